"""bench/bench_gpu.py is not dead code: its --tiny mode runs the whole script on a CPU (a tiny Llama of the
shipped config's family) and writes every figure the GPU run would."""

from __future__ import annotations

import json
import subprocess
import sys

from ..conftest import ROOT


def test_the_gpu_bench_runs_on_a_cpu_with_a_tiny_config(tmp_path):
    out_file = tmp_path / "figures.json"
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_gpu.py"), "--tiny", "--rows", "1", "2",
                          "--tokens", "4", "--bandwidth", "100", "--json", str(out_file)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "(a) forward pass per step, B=1" in out.stdout and "(d) N=  2" in out.stdout
    figures = json.loads(out_file.read_text())
    llama = figures["models"]["llama8b"]
    assert "vocab 128,256" in llama["model"]  # the shipped config's vocabulary, shrunk everywhere else
    assert llama["bound_ms"] == llama["weights_bytes"] / 100e9 * 1000  # weights over HBM bandwidth
    assert [row["rows"] for row in llama["scaling"]] == [1, 2] and llama["scaling"][0]["speedup"] == 1.0
    assert llama["step_ms"] > 0 and set(llama["tokens_per_s"]) == {"capture on", "capture off", "generate()"}
    assert "(e) N=  2: step eager" in out.stdout and [row["rows"] for row in llama["graphs"]["rows"]] == [1, 2]
    assert llama["graphs"]["rows"][1]["graphs_tokens_per_s"] > 0 and llama["graphs"]["backend"] is None  # a CPU


def test_without_a_gpu_the_full_run_says_so():
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the full run is the GPU bench itself")
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_gpu.py")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode != 0 and "no CUDA GPU here" in out.stderr
