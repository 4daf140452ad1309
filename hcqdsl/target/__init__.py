"""The vendor-neutral target layer: what AMD (hcqdsl/amd) and NVIDIA (hcqdsl/nv) both fill in, as tinygrad's
runtime/support/hcq.py is filled in by ops_amd.py and ops_nv.py: the compiled image and its file format
(`image.py`), where memories live (`layout.py`)."""
