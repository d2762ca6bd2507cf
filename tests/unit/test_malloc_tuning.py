"""The allocator settings of the search server (search_engine.infra.malloc_tuning, issue 21)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from search_engine.infra import malloc_tuning

# Reproduces the retention in a fresh process (so the test session's heap does not blur it): once glibc's
# dynamic mmap threshold has risen, MiB-sized buffers come from the heap, and a small block allocated after
# them keeps ~60 MiB of freed memory resident. Prints MiB kept after the frees, then after a trim.
PROBE = """
import sys
from search_engine.infra import malloc_tuning
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
kept = rss() - before
malloc_tuning.release_free_memory()
print(kept >> 20, (rss() - before) >> 20)
"""


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("VRAG_MALLOC_TUNING", "0")
    assert malloc_tuning.malloc_tuning_enabled() is False
    assert malloc_tuning.bound_heap_growth() is False
    monkeypatch.delenv("VRAG_MALLOC_TUNING")
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "262144")  # the user's own glibc setting wins
    assert malloc_tuning.bound_heap_growth() is False


@pytest.mark.skipif(malloc_tuning._glibc() is None, reason="not glibc: the tuning is a no-op there")
def test_freed_activations_go_back_to_the_system():
    def run(mode: str) -> tuple[int, int]:
        out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True,
                             env={"VRAG_MALLOC_TUNING": "1"}).stdout.split()
        return int(out[-2]), int(out[-1])

    kept, after_trim = run("dynamic")
    assert kept >= 40, (kept, after_trim)  # the problem: freed, but still resident
    assert after_trim <= 2, (kept, after_trim)  # release_free_memory (after each search batch) returns it
    kept_fixed, _ = run("fixed")
    assert kept_fixed <= 2, kept_fixed  # with the fixed threshold the buffers never entered the heap
