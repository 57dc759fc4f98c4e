"""Files only their owner may read: mode 0600 in 0700 folders, written atomically.

Recordings, a tune's state and reports, run records: what kimitui writes may hold a server's launch
command or a profile's settings, so nobody else on the machine reads them.  Run records (through
:meth:`kimitui.host.local.LocalHost.write_file`) and the rest share this one writer.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def atomic_write(path: Path, data: bytes, mode: int = FILE_MODE) -> None:
    """Temp file in the same directory, fsync, chmod, then ``os.replace``: a crash leaves the old file or the new."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def private_dir(path: Path) -> Path:
    """Make ``path`` (and missing parents) as 0700 folders; folders that exist already are left as they are
    (a recording named into the operator's own folder does not change that folder)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for p in reversed(missing):
        with contextlib.suppress(FileExistsError):
            p.mkdir(mode=DIR_MODE)
        os.chmod(p, DIR_MODE)  # mkdir's mode is masked by the umask
    return path


def write_private(path: Path, data: str | bytes) -> Path:
    """Write a whole file, 0600, atomically, its folder made 0700 if missing."""
    private_dir(path.parent)
    atomic_write(path, data.encode() if isinstance(data, str) else data, FILE_MODE)
    return path


def private_opener(path: str, flags: int) -> int:
    """``open(..., opener=private_opener)``: a file it creates is 0600; one that exists keeps its mode
    (``--output /dev/stdout`` stays what it is)."""
    return os.open(path, flags, FILE_MODE)
