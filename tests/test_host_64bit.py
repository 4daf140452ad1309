"""The host compares a signal's 64-bit slot (tinygrad's HCQSignal.wait), the queues' packets 32 bits: a host wait for
2**32 or more never passes (tinygrad's CPU wait on a wrapped timeline times out), in check, the reference semantics
and the emulator alike (docs/language.md, "The host compares 64 bits")."""
import pytest
import hcqdsl
from reference import verdicts

HEAD = "device gpu = AMD:0 gfx1100\nsignal tl on gpu = 4294967294\nvar v\n"
QUEUE = "queue c compute on gpu {\n  signal tl = 4294967295\n}\n"

def prog(host: str, queue: str = QUEUE):
  return hcqdsl.parse(HEAD + queue + "host {\n" + host + "}\n", "h.hcq")

@pytest.mark.parametrize("wait,verdict", [("wait tl >= 4294967295", {}), ("wait tl >= 0x1_0000_0000", {8: 1}),
                                          ("wait tl >= v + 4294967295", {8: 1}), ("wait tl >= v + 4294967294", {})])
def test_host_wait_past_32_bits_never_passes(wait, verdict):
  p = prog(f"  {wait}\n")
  diags = hcqdsl.check(p, 1)
  assert {d.span.line: 1 for d in diags if d.code == "deadlock"} == verdict, [str(d) for d in diags]
  assert not [d for d in diags if d.code == "overflow"]
  assert verdicts(p, 1)["deadlock"] == verdict   # the literal reference semantics agree
  r = hcqdsl.run(p)
  assert (r.hang is not None) == bool(verdict), r
  if verdict: assert "waits tl >= 4294967296" in str(r.hang)

def test_host_wait_message():
  [d] = [d for d in hcqdsl.check(prog("  wait tl >= 0x1_0000_0000\n"), 1) if d.code == "deadlock"]
  assert d.message == ("the host waits forever for tl >= 4294967296 (launch 1); tl is stuck at 4294967295, and no write "
                       "left in the checked launches brings it to 4294967296")

def test_a_queue_wait_compares_32_bits():
  """The same value on a queue is an overflow (its packet holds 32 bits); past 64 bits the host's is one too."""
  _, d = hcqdsl.parse_with_diagnostics(HEAD + "queue c compute on gpu {\n  wait tl >= 0x1_0000_0000\n}\n", "q.hcq")
  assert [x.message for x in d] == ["4294967296 (0x100000000) is outside 32 bits (signal values are 0 .. 4294967295)"]
  _, d = hcqdsl.parse_with_diagnostics(HEAD + "host {\n  wait tl >= 0x1_0000_0000_0000_0000\n}\n", "q.hcq")
  assert [x.message for x in d] == ["18446744073709551616 (0x10000000000000000) is outside 64 bits (the host's waits compare 0 .. "
                                    "18446744073709551615)"]
  _, d = hcqdsl.parse_with_diagnostics(HEAD + "host {\n  signal tl = 0x1_0000_0000\n}\n", "q.hcq")   # the host's writes stay 32-bit
  assert [x.code for x in d] == ["overflow"]

def test_host_signal_writes_the_whole_slot():
  """The host's `signal` stores 8 bytes (HCQSignal.value): a queue's 32-bit write left the high half as it was."""
  p = hcqdsl.parse(HEAD + "host {\n  signal tl = 7\n  wait tl >= 7\n}\n", "s.hcq")
  r = hcqdsl.run(p)
  assert r.ok and r.signals["tl"] == 7
