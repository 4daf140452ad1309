"""The emulator's cost model, in emulated microseconds (docs/run.md's table): what each packet, byte and host step
costs, and the rate of the clocks the engines write as timestamps. The engines (runtime/amd_engine.py,
runtime/nv_engine.py) and the submitter (runtime/submit.py) charge these; the scheduler orders actors by the time."""

__all__ = ["PACKET_COST", "NOP_DWORD_COST", "NV_GROUP_COST", "KERNEL_BYTES_PER_US", "COPY_BYTES_PER_US", "HOST_COST",
           "AMD_CLOCK_MHZ", "NV_TIMER_MHZ"]

# a PM4 or SDMA packet, by its decoded name
PACKET_COST = {"NOP": 0.02, "TYPE2_NOP": 0.01, "WAIT_REG_MEM": 0.3, "POLL_REGMEM": 0.3, "RELEASE_MEM": 0.8, "FENCE": 0.5,
               "ACQUIRE_MEM": 0.4, "EVENT_WRITE": 0.2, "SET_SH_REG": 0.05, "SET_UCONFIG_REG": 0.05, "INDIRECT_BUFFER": 0.1,
               "INDIRECT": 0.1, "DISPATCH_DIRECT": 4.0, "COPY_LINEAR": 1.0, "TIMESTAMP_GET_GLOBAL": 0.2, "TRAP": 0.2,
               "WRITE_UNTILED": 0.3, "WRITE_DATA": 0.3, "CONSTANT_FILL": 0.5}
NOP_DWORD_COST = 0.02           # a PM4 NOP also costs each dword it skips past its header
# an NV method group, by the trigger it holds ("state": none, it only sets methods)
NV_GROUP_COST = {"semaphore": 0.5, "launch": 4.0, "dma": 1.0, "state": 0.05}
KERNEL_BYTES_PER_US = 500_000   # a dispatch also costs its argument bytes at 500 GB/s
COPY_BYTES_PER_US = 25_000      # SDMA copies (and NV's copy engine) at 25 GB/s
HOST_COST = {"submit": 1.0, "submit_dword": 0.001, "signal": 0.1, "wait": 0.5}
AMD_CLOCK_MHZ = 100             # the GPU clock counter RELEASE_MEM / TIMESTAMP write (AMD's 100 MHz reference)
NV_TIMER_MHZ = 1000             # the GPU timer an NV release writes at +8 counts nanoseconds (PTIMER)
