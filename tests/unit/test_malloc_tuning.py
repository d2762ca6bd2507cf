"""The allocator step the search server takes after each search batch (search_engine.malloc_tuning, issue 21)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from search_engine import malloc_tuning


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("VRAG_MALLOC_TUNING", "0")
    assert malloc_tuning.heap_trimming_enabled() is False


@pytest.mark.skipif(malloc_tuning._glibc() is None, reason="not glibc: the tuning is a no-op there")
def test_freed_activations_go_back_to_the_system():
    """The retention, reproduced in a fresh process (so the session's heap does not blur it): once glibc's
    dynamic mmap threshold has risen, MiB-sized buffers come from the heap, and a small block allocated
    after them keeps ~60 MiB of freed memory in the process; `release_free_memory` returns it."""
    assert malloc_tuning.heap_trimming_enabled()
    probe = """
from search_engine import malloc_tuning
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
import numpy as np
np.ones(16 << 20, np.uint8)  # a 16 MiB buffer, freed: glibc raises its mmap threshold to 16 MiB
before = rss()
buffers = [np.ones((3 << 20) + i * 4096, np.uint8) for i in range(20)]  # ~60 MiB of activations
pin = np.ones(200_000, np.uint8)  # a small block allocated after them, still in use
del buffers
kept = rss() - before
malloc_tuning.release_free_memory()
print(kept >> 20, (rss() - before) >> 20)
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    kept, after_release = int(out[-2]), int(out[-1])
    assert kept >= 40, (kept, after_release)  # the problem: freed, but still resident
    assert after_release <= 2, (kept, after_release)
