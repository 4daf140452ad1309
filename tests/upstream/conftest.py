"""tests/upstream/test_*.py are standalone tinygrad tests (written for tinygrad's test/): they need a GPU or tinygrad's
mock GPU picked when tinygrad is imported, so the suite runs them in subprocesses (tests/test_upstream_findings.py),
unpatched and with docs/findings/*.patch applied, instead of collecting them here."""
collect_ignore_glob = ["test_*.py"]
