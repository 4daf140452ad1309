"""What the analyses find, as the passes (check/passes.py) read it: one record per kind of finding, made by the
happens-before pass (hb.py, accesses.py) or the explorer (explore.py) and gathered in `passes.Findings`. A step of the
unrolled program is `(sequence, position)` as `unroll.Unrolled` numbers them (position 1-based over every launch); an
access is its op's `(buffer id, start, end, mode)`."""
from __future__ import annotations
from typing import Optional, Sequence
import attrs

__all__ = ["Stuck", "Party", "RacePair", "SignalRace", "NonMonotonic", "WaitStats"]

@attrs.frozen
class Stuck:
  """A state where nothing can run: the steps done per sequence and the signal and polled-word values."""
  done: Sequence[int]
  values: Sequence[int]

@attrs.frozen
class Party:
  """One access of a race: sequence `seq` at step `pos`, its `access`."""
  seq: int
  pos: int
  access: tuple

@attrs.frozen
class RacePair:
  """Two unordered conflicting accesses of one pair of statements and buffer, kept at its smallest launches (`rank`:
  the larger launch, then both launches in statement order). `first` is the earlier step."""
  rank: tuple
  first: Party
  then: Party

@attrs.frozen
class SignalRace:
  """Unordered writes of one signal from two sequences, at steps `first` and `second`."""
  first: tuple
  second: tuple

@attrs.frozen
class NonMonotonic:
  """A write at step `write` that lowers a signal another step (`other`) uses, with the signal's value before and after
  (None: one execution's verdict, which does not say)."""
  write: tuple
  other: tuple
  current: Optional[int]
  new: Optional[int]

@attrs.frozen
class WaitStats:
  """A wait statement's instances over the checked launches: how many ran and how many of them were redundant."""
  run: int
  redundant: int
