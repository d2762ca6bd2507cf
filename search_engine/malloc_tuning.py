"""Keep a long-running server's memory from ratcheting up under glibc malloc (issue 21).

What held the memory: not a cache of ours. `scripts/soak_search.py` showed the search server's RSS
rising round after round under 64 concurrent clients (754 → 941 → 1106 MiB over three 30 s rounds,
sample text index) and staying there when idle. The same growth happens with no server at all, in
one thread calling the query embedder on batches of mixed-length queries (530 → 758 MiB in 10
batches), and not with the BM25 channel alone. The cause is glibc's *dynamic mmap threshold*: an
allocation above the threshold (128 KiB at start) is served by mmap and returned to the system on
free — but each such free raises the threshold (up to 32 MiB), so later activation tensors of
MiniLM's forward (a few MiB each, a new size for every batch shape) come from the heap instead,
where freed space is kept for reuse and fragmented by differently-sized batches, so it is rarely
returned. `MALLOC_ARENA_MAX=2` only slowed the growth (760 → 915 MiB): it is not the per-thread
arenas.

Fixing the threshold (`mallopt(M_MMAP_THRESHOLD, 1 MiB)`, which also turns the dynamic adjustment
off) keeps large tensors on mmap, so they go back to the system when freed: the same single-thread
run stayed at 567-586 MiB. `malloc_trim(0)` after each batch gave the same, at a cost per call;
`release_free_memory` is here for callers that want it. Not Python's to do: the interpreter has no
control over the C allocator, hence ctypes; a no-op (False) where the C library is not glibc.
Users who set glibc's own `MALLOC_MMAP_THRESHOLD_` keep theirs; `VRAG_MALLOC_TUNING=0` turns this off.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)
DEFAULT_MMAP_THRESHOLD = 1 << 20


def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def bound_heap_growth(mmap_threshold: int = DEFAULT_MMAP_THRESHOLD) -> bool:
    """Serve allocations of `mmap_threshold` bytes and more by mmap for the rest of the process, so freed
    tensors return to the system. True when applied; False where it cannot be (not glibc), was turned
    off (`VRAG_MALLOC_TUNING=0`) or the user set `MALLOC_MMAP_THRESHOLD_` themselves."""
    if os.environ.get("VRAG_MALLOC_TUNING", "1") == "0" or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    libc = _glibc()
    if libc is None:
        return False
    applied = bool(libc.mallopt(M_MMAP_THRESHOLD, int(mmap_threshold)))
    if applied:
        log.info("malloc: allocations of %d bytes and more use mmap (fixed threshold)", mmap_threshold)
    return applied


def release_free_memory() -> bool:
    """Return the free pages of every malloc arena to the system (`malloc_trim(0)`); True if any was."""
    libc = _glibc()
    return bool(libc.malloc_trim(0)) if libc is not None else False
