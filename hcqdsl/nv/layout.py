"""Where the memory plan puts an NV device's memory: below 2**40, since the semaphore methods (SEM_ADDR_HI: 8 bits), the
QMD pointers (SEND_PCAS_A, DEPENDENT_QMD0_POINTER: address >> 8 in 32 bits) and the GPFIFO entries address 40 bits.
The windows themselves are target/layout.py's WINDOWS["NV"], their sizes the language's (hcqdsl/ir.py), checked
statically."""

__all__ = ["ADDR_BITS"]

ADDR_BITS = 40
