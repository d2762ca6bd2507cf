"""Keep a long-running server's memory from ratcheting up under glibc malloc (issue 21).

What held the memory: not a cache of ours. `scripts/soak_search.py` showed the search server's RSS
rising round after round under 64 concurrent clients and staying there when idle (715 → 884 → 933 MiB
over three rounds of 100 requests, sample text index). The same growth happens with no server at all,
in one thread calling the MiniLM query embedder on batches of mixed-length queries (530 → 758 MiB in
10 batches), and not with the BM25 channel alone (530 → 534 MiB in 40). `MALLOC_ARENA_MAX=2` only
slowed it, so it is not the per-thread arenas. The cause is glibc's heap: activation tensors of a few
MiB, a new size for every batch shape, come from the heap once glibc's *dynamic mmap threshold* has
risen (each free of an mmapped block raises it, up to 32 MiB); freed, they stay in the heap for reuse,
and a small block allocated after them keeps the heap from shrinking, so RSS only goes up.

Two fixes held the embedder at ~585 MiB over the same batches: a fixed mmap threshold (`mallopt`,
1 MiB) and `malloc_trim(0)` after each batch. The threshold costs a page fault for every large
tensor, every time (system CPU 1.3 s → 4.8 s for 12 batches, +19% CPU); trimming once per batch
returns the pages only between batches (1.3 s → 2.1 s, +4%). The search server trims after each
search batch (`release_free_memory`); `VRAG_MALLOC_TUNING=0` turns it off. Not Python's to do: the
interpreter has no say over the C allocator, hence ctypes; a no-op where the C library is not glibc.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def heap_trimming_enabled() -> bool:
    """True unless turned off (`VRAG_MALLOC_TUNING=0`) or the C library is not glibc."""
    return os.environ.get("VRAG_MALLOC_TUNING", "1") != "0" and _glibc() is not None


def release_free_memory() -> bool:
    """Return the free pages of every malloc arena to the system (`malloc_trim(0)`); True if any was."""
    libc = _glibc()
    return bool(libc.malloc_trim(0)) if libc is not None else False
