"""Keep a long-running server's memory from ratcheting up under glibc malloc (issue 21).

What held the memory: not a cache of ours. `scripts/soak_search.py` showed the search server's RSS
rising round after round under 64 concurrent clients and staying there when idle (715 → 884 → 933 MiB
over three rounds of 100 requests, sample text index). The same growth happens with no server at all,
in one thread calling the MiniLM query embedder on batches of mixed-length queries (530 → 758 MiB in
10 batches), and not with the BM25 channel alone (530 → 534 MiB in 40). `MALLOC_ARENA_MAX=2` only
slowed it, so it is not the per-thread arenas. The cause is glibc's heap: activation tensors of a few
MiB, a new size for every batch shape, come from the heap once glibc's *dynamic mmap threshold* has
risen (each free of an mmapped block raises it, up to 32 MiB); freed, they stay in the heap for reuse,
and small blocks allocated after them keep the heap from shrinking, so RSS only goes up.

What bounds it, measured side by side in the server (three soaks at once, 100 requests per round):
a fixed mmap threshold (`mallopt(M_MMAP_THRESHOLD, 1 MiB)`: large tensors are mmapped and returned on
free) 612 → 623 MiB over two rounds; `malloc_trim(0)` after each batch alone 663 → 703 MiB (not
enough); both 608 → 610 MiB. The server does both (`bound_heap_growth` at start, `release_free_memory`
after each search batch). The cost: a page fault per large tensor per use — the query encoder's system
CPU time rose 1.3 s → 4.8 s for 12 batches on one thread (user time 16.9 s either way), ~+19% CPU on a
CPU-only server; trimming alone cost +4%. `VRAG_MALLOC_TUNING=0` turns both off; a user's own
`MALLOC_MMAP_THRESHOLD_` (glibc's variable) is left in force. Not Python's to do: the interpreter has
no say over the C allocator, hence ctypes; a no-op where the C library is not glibc.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)
DEFAULT_MMAP_THRESHOLD = 1 << 20


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


def malloc_tuning_enabled() -> bool:
    """True unless turned off (`VRAG_MALLOC_TUNING=0`) or the C library is not glibc."""
    return os.environ.get("VRAG_MALLOC_TUNING", "1") != "0" and _glibc() is not None


def bound_heap_growth(mmap_threshold: int = DEFAULT_MMAP_THRESHOLD) -> bool:
    """Serve allocations of `mmap_threshold` bytes and more by mmap from now on (a fixed threshold: glibc
    stops raising it), so freed tensors go back to the system. True when applied; False when turned off,
    left to the user's `MALLOC_MMAP_THRESHOLD_`, or not glibc."""
    if not malloc_tuning_enabled() or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    return bool(_glibc().mallopt(M_MMAP_THRESHOLD, int(mmap_threshold)))  # type: ignore[union-attr]


def release_free_memory() -> bool:
    """Return the free pages of every malloc arena to the system (`malloc_trim(0)`); True if any was."""
    libc = _glibc()
    return bool(libc.malloc_trim(0)) if libc is not None else False
