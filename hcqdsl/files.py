"""Writing outputs without losing what was there: every file a command writes (a formatted program, an image, a
manifest, a lifted program, a trace, a witness, a report) goes through `write_atomic` — a temporary file in the same
directory, then `os.replace` — so a failed write (a full disk, a file-size limit, an interrupt, a text the locale
cannot encode) leaves the old file whole, and readers never see half a file. `same_file` says whether an output would
overwrite an input (every command refuses that)."""
from __future__ import annotations
import os, stat, tempfile
from typing import Union

__all__ = ["write_atomic", "same_file", "check_writable"]

def same_file(a, b) -> bool:
  """Do the paths name one file (by inode when both exist, else by their resolved paths: symlinks followed)?"""
  try: return os.path.samefile(a, b)
  except OSError: return os.path.realpath(a) == os.path.realpath(b)

def _target(path) -> str:
  """The file a write to `path` changes: a symlink's target (the link stays a link), else `path`."""
  return os.path.realpath(path) if os.path.islink(path) else os.fspath(path)

def check_writable(path) -> None:
  """Raise OSError (with its filename) when `path` cannot be written: its directory missing or not writable, or
  `path` a directory. Checked before work whose result would otherwise be lost at the end."""
  p = _target(path)
  d = os.path.dirname(os.path.abspath(p))
  if os.path.isdir(p): raise IsADirectoryError(21, "is a directory", os.fspath(path))
  if not os.path.isdir(d): raise FileNotFoundError(2, "no such directory", os.path.dirname(os.fspath(path)) or ".")
  if os.path.exists(p):   # (a file in a directory it cannot create files in is written in place: write_atomic)
    if not os.access(p, os.W_OK): raise PermissionError(13, "permission denied", os.fspath(path))
    return
  if not os.access(d, os.W_OK | os.X_OK): raise PermissionError(13, "permission denied (its directory is not writable)", os.fspath(path))

def write_atomic(path, data: Union[str, bytes]) -> None:
  """Write `data` (text is always UTF-8, whatever the locale) to `path` in full or not at all: into a temporary file
  beside it, then renamed over it (keeping an existing file's permissions; a new one gets the umask's). A symlink's
  target is written; a device or FIFO (`/dev/stdout`) is written directly, it has nothing to lose, and so is a file in
  a directory that takes no new file (no temporary file can go there). Raises OSError with `filename` set; the old
  file is then as it was (but in that last case) and no temporary file is left."""
  b = data.encode("utf-8") if isinstance(data, str) else bytes(data)
  p = _target(path)
  try: st = os.stat(p)
  except FileNotFoundError: st = None
  except OSError as e: raise _named(e, path)
  if st is not None and stat.S_ISDIR(st.st_mode): raise IsADirectoryError(21, "is a directory", os.fspath(path))
  if st is not None and not os.access(p, os.W_OK): raise PermissionError(13, "Permission denied", os.fspath(path))   # (a rename would pass it)
  d = os.path.dirname(os.path.abspath(p))
  if st is not None and (not stat.S_ISREG(st.st_mode) or not os.access(d, os.W_OK | os.X_OK)):
    try:
      with open(p, "wb") as f: f.write(b)
    except OSError as e: raise _named(e, path)
    return
  try: fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{os.path.basename(p)}.", suffix=".tmp")
  except OSError as e: raise _named(e, path)
  try:
    with os.fdopen(fd, "wb") as f: f.write(b)   # (closed here: a full disk's error may come at the close)
    if st is not None: os.chmod(tmp, stat.S_IMODE(st.st_mode))
    else:
      umask = os.umask(0)
      os.umask(umask)
      os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, p)
  except BaseException as e:
    try: os.unlink(tmp)
    except OSError: pass
    if isinstance(e, OSError): raise _named(e, path)
    raise

def _named(e: OSError, path) -> OSError:
  """`e` naming the output as the user gave it."""
  if e.filename is None or os.path.basename(str(e.filename)).startswith("."): e.filename = os.fspath(path)
  return e
