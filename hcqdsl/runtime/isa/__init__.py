"""Instruction-set execution for kernels' machine code: tinygrad's RDNA3 pseudocode translated and run per wave."""
