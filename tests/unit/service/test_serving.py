"""The process set-up for serving the model next to a web server (model_service/models/loading.py)."""

import subprocess
import sys

import pytest
import torch

from model_service import limits
from model_service.models.loading import keep_freed_memory, serve_beside_web_server
from model_service.models.switching import LoadingService

from ...conftest import ROOT, blas_threads_now


def test_the_scheduler_gets_the_gil_back_quickly_and_leaves_a_core(monkeypatch):
    from model_service.models.row_products import blas_threads

    threads, interval, blas = torch.get_num_threads(), sys.getswitchinterval(), blas_threads_now()
    try:
        monkeypatch.setenv("NTP_THREADS", "1")
        blas_threads(2)
        serve_beside_web_server()
        assert sys.getswitchinterval() == limits.GIL_SWITCH_INTERVAL_S < 0.005  # below Python's default
        assert torch.get_num_threads() == 1
        assert blas_threads_now() == {1}  # numpy's BLAS too (the one-row products, models/row_products.py)
        sys.setswitchinterval(0.005)
        LoadingService(service=type("Loaded", (), {"description": "a stand-in"})())  # the app's path sets it up too
        assert sys.getswitchinterval() == limits.GIL_SWITCH_INTERVAL_S
    finally:
        torch.set_num_threads(threads)
        blas_threads(max(blas, default=1))
        sys.setswitchinterval(interval)


FAULTS = """
import resource, sys, torch
from model_service.models.loading import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for k in range(320):  # a KV cache layer growing by one token a step: each block one page larger, written, freed
    torch.empty(256 * 1024 + 1024 * k).fill_(1.0)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_freed_blocks_stay_in_the_heap_instead_of_page_faulting_anew():
    """A KV cache layer at 16 rows (1 MiB) that grows by a page a step: each new block is larger than any freed
    one, so glibc's own adaptive threshold never catches up; by default every block is mapped anew and faults
    in ~256 fresh pages, with keep_freed_memory the heap's pages are reused."""
    def faults(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, cwd=ROOT, check=True)
        return int(out.stdout.strip())

    default, kept = faults("default"), faults("keep")
    assert default >= 320 * 200  # about 256 pages for each of the 320 blocks
    assert kept < default / 20, (kept, default)


def test_keep_freed_memory_is_a_no_op_off_linux(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert keep_freed_memory() is False
