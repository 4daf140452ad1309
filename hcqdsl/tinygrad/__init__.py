"""The tinygrad integration: schedules and TinyJit replays emitted as programs, tinygrad's AMD code objects, the host compiler."""
