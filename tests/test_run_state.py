"""RunState (lift/captured.py): the whole run's rule for a dispatch's kernel-argument write, decided by sanitize's
windows with most of the run forgotten, against the rule over the whole history kept (docs/sanitize.md, "Memory over a
long run")."""
import random
from hcqdsl.lift.captured import RunState

def _whole_run(decisions: list) -> list:
  """The rule with nothing forgotten: a write is a statement when its block differs from the last block written at its
  address by a step before it, among the writes decided so far (decisions come in the order the windows make them)."""
  hist: dict = {}
  out = []
  for step, ka, block in decisions:
    last = max((w for w in hist.get(ka, ()) if w[0] < step), default=None, key=lambda w: w[0])
    emit = last is None or last[1] != block
    if emit: hist.setdefault(ka, []).append((step, block))
    out.append(emit)
  return out

def _runs(seed: int) -> tuple:
  """A run of a few hundred dispatches over a small ring of kernel-argument addresses (a bump allocator that wraps, and
  a replay's fixed blocks), decided window by window a little out of step order, forgetting as sanitize does: every
  step before the next window's first."""
  rnd = random.Random(seed)
  addrs = [0x1000 + 0x40 * i for i in range(rnd.choice([2, 5, 17]))]
  blocks = [bytes([b]) * 24 for b in range(rnd.choice([1, 2, 3]))]
  decisions, forgets, step = [], [], 0
  for _ in range(rnd.randrange(5, 40)):
    first = step
    window = [(first + rnd.randrange(8), rnd.choice(addrs), rnd.choice(blocks)) for _ in range(rnd.randrange(1, 10))]
    seen = set()
    window = [d for d in window if (d[0], d[1]) not in seen and not seen.add((d[0], d[1]))]
    rnd.shuffle(window)            # (a window decides its dispatches in its own order)
    decisions.append(window)
    step += 8
    forgets.append(step if rnd.random() < 0.8 else first)
  return decisions, forgets

def test_a_forgetting_run_state_decides_as_the_whole_run():
  compared = emitted = 0
  for seed in range(300):
    windows, forgets = _runs(seed)
    rs = RunState([])
    got = []
    for window, before in zip(windows, forgets):
      got += [rs.kernarg_write(step, ka, block) for step, ka, block in window]
      assert [rs.kernarg_write(step, ka, block) for step, ka, block in window] == got[-len(window):]   # (decided once)
      rs.forget(before)
    assert got == _whole_run([d for w in windows for d in w]), f"seed {seed}"
    assert all(len(h) > 1 for h in rs.several.values()) and not set(rs.several) & set(rs.written)
    compared += len(got)
    emitted += sum(got)
  assert compared > 10_000 and 0 < emitted < compared, (compared, emitted)

def test_the_last_write_at_an_address_is_kept_across_forgetting():
  rs = RunState([])
  assert rs.kernarg_write(1, 0x100, b"a" * 16)
  assert not rs.kernarg_write(2, 0x100, b"a" * 16)
  assert rs.kernarg_write(3, 0x100, b"b" * 16)
  assert set(rs.several) == {0x100}
  rs.forget(10)
  assert rs.several == {} and len(rs.written[0x100]) == 24   # (its step and digest, packed)
  assert not rs.kernarg_write(11, 0x100, b"b" * 16)
  assert rs.kernarg_write(12, 0x100, b"a" * 16)
