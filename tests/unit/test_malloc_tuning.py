"""The allocator setting the search server applies at start (search_engine.malloc_tuning, issue 21)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from search_engine import malloc_tuning


def test_switched_off_or_left_to_the_user(monkeypatch):
    monkeypatch.setenv("VRAG_MALLOC_TUNING", "0")
    assert malloc_tuning.bound_heap_growth() is False
    monkeypatch.delenv("VRAG_MALLOC_TUNING")
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "262144")
    assert malloc_tuning.bound_heap_growth() is False


@pytest.mark.skipif(malloc_tuning._glibc() is None, reason="not glibc: the tuning is a no-op there")
def test_freed_large_buffers_go_back_to_the_system():
    """Under glibc's dynamic threshold, freeing one large buffer makes the next ones of that size come from
    the heap, where a small block allocated after them keeps them from being returned; with the fixed
    threshold they are mmapped and returned on free. A fresh process, so the session's heap does not blur it."""
    probe = """
import sys
from search_engine import malloc_tuning
if sys.argv[1] == "fixed":
    assert malloc_tuning.bound_heap_growth()
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
import numpy as np
np.ones(16 << 20, np.uint8)  # a 16 MiB buffer, freed: glibc raises its mmap threshold to 16 MiB
before = rss()
buffers = [np.ones((3 << 20) + i * 4096, np.uint8) for i in range(20)]  # ~60 MiB of activations
pin = np.ones(200_000, np.uint8)  # a small block allocated after them, still in use
del buffers
print((rss() - before) >> 20)
"""
    grown = {mode: int(subprocess.run([sys.executable, "-c", probe, mode], capture_output=True, text=True,
                                      check=True, env={"VRAG_MALLOC_TUNING": "1"}).stdout.split()[-1])
             for mode in ("dynamic", "fixed")}
    assert grown["dynamic"] >= 40, grown  # the problem, reproduced: ~60 MiB freed but kept
    assert grown["fixed"] <= 2, grown
