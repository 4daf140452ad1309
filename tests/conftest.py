import collections, pathlib, sys
import pytest
sys.path.insert(0, str(pathlib.Path(__file__).parent))  # tests share strategies.py and helpers

# The peer tier (`pytest.mark.peer`: tinygrad's mock GPU from a tinygrad checkout, tests/mock_gpu.py) skips where the
# mock cannot run, naming how to enable it; the end of the run says how many skipped and why, not only `-rs`.
_peer_skips: collections.Counter = collections.Counter()

def pytest_collection_modifyitems(config, items):
  peer = [it for it in items if it.get_closest_marker("peer") is not None]
  if not peer: return
  import mock_gpu
  why = mock_gpu.unavailable()
  if why is not None:
    for it in peer: it.add_marker(pytest.mark.skip(reason=why))

def pytest_runtest_logreport(report):
  if report.skipped and "peer" in report.keywords and not hasattr(report, "wasxfail"):
    why = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    _peer_skips[why.removeprefix("Skipped: ")] += 1

def pytest_terminal_summary(terminalreporter):
  for why, n in _peer_skips.items():
    terminalreporter.write_line(f"peer tier: {n} test{'s' * (n != 1)} skipped: {why}")
