"""Write-then-rename helpers: a reader (or a crash) never sees a half-written file.

`tempfile.mkstemp` creates its file with mode 0600 whatever the umask; the renamed file keeps it, so a
search server running as another user could not read the index. The temp file is given the mode a
plain `open()` would have produced (0666 & ~umask) before it is renamed into place.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

_umask_lock = threading.Lock()


def _current_umask() -> int:
    """The process umask. Linux reports it in /proc/self/status; elsewhere os.umask is the only way to read
    it, which sets it too, so it is set back at once (under a lock against our own threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _umask_lock:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def _default_file_mode() -> int:
    """The mode `open(path, "w")` would give a new file: 0666 minus the umask."""
    return 0o666 & ~_current_umask()


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[IO[bytes]]:
    """A binary file handle whose content appears at `path` only if the block finishes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), _default_file_mode())
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_file(path) as fh:
        fh.write(data)


def atomic_write_json(path: Path, payload: Any) -> None:
    atomic_write_bytes(path, json.dumps(payload, ensure_ascii=False, indent=1).encode("utf-8"))


def atomic_save_npy(path: Path, array: np.ndarray) -> None:
    with atomic_file(path) as fh:
        np.save(fh, array, allow_pickle=False)


def atomic_save_npz(path: Path, **arrays: np.ndarray) -> None:
    with atomic_file(path) as fh:
        named: dict[str, Any] = arrays  # savez's stubs also take allow_pickle=bool by keyword: ndarray-only ** misses
        np.savez(fh, **named)
