"""`hcqdsl run`: compile a program, submit its launches to a device (the built-in AMD emulator) and check its
`expect`s; replay `check`'s witnesses. Python API: `run(program_or_text, launches=1, seed=None, ...) -> RunResult`,
`run_schedules(...)`, `replay(program, witness)`, `explore(program, schedules)` (`run --schedules`: check's witnesses and
PCT)."""
from .execute import run, run_schedules, compare, as_program, RunResult, QueueStats, ExpectResult, Race, BufferMemory, physical_memory
from .replays import replay
from .schedules import explore, run_pct, Exploration, Schedule

__all__ = ["run", "run_schedules", "compare", "as_program", "replay", "explore", "run_pct", "Exploration", "Schedule", "RunResult",
           "QueueStats", "ExpectResult", "Race", "BufferMemory", "physical_memory"]
