"""The process set-up for serving the model next to a web server (model_service/loading.py)."""

import sys

import torch

from model_service import limits
from model_service.background import LoadingService
from model_service.loading import serve_beside_web_server


def test_the_scheduler_gets_the_gil_back_quickly_and_leaves_a_core(monkeypatch):
    threads, interval = torch.get_num_threads(), sys.getswitchinterval()
    try:
        monkeypatch.setenv("NTP_THREADS", "1")
        serve_beside_web_server()
        assert sys.getswitchinterval() == limits.GIL_SWITCH_INTERVAL_S < 0.005  # below Python's default
        assert torch.get_num_threads() == 1
        sys.setswitchinterval(0.005)
        LoadingService(service=type("Loaded", (), {"description": "a stand-in"})())  # the app's path sets it up too
        assert sys.getswitchinterval() == limits.GIL_SWITCH_INTERVAL_S
    finally:
        torch.set_num_threads(threads)
        sys.setswitchinterval(interval)
