"""The emulator's own cost model, in emulated microseconds (docs/run.md's table): what a kernel's argument bytes and
each host step cost. What a packet costs is its vendor's (amd/engine.py's PACKET_COST, nv/engine.py's NV_GROUP_COST,
target/engine.py's copy rate); the submitter (runtime/submit.py) and the scheduler charge these, and the scheduler
orders actors by the time."""

__all__ = ["KERNEL_BYTES_PER_US", "HOST_COST"]

KERNEL_BYTES_PER_US = 500_000   # a dispatch also costs its argument bytes at 500 GB/s
HOST_COST = {"submit": 1.0, "submit_dword": 0.001, "signal": 0.1, "wait": 0.5}
