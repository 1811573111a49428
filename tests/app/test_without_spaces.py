"""The app starts and serves with no `spaces` package at all (it is optional: only ZeroGPU needs it)."""

from __future__ import annotations

import subprocess
import sys

from ..conftest import ROOT, byte_tokenizer, free_port, tiny_llama

SCRIPT = r"""
import sys, time
sys.modules["spaces"] = None  # `import spaces` now fails, as on a machine without the package
sys.path.insert(0, sys.argv[1])
import app
from model_service.deploy import zero_gpu
assert zero_gpu.spaces is None
args = app.parse_args(["--model", sys.argv[2], "--port", sys.argv[3]])
demo, *_ = app.build(args)
demo.launch(prevent_thread_lock=True, server_name=args.bind, server_port=args.port, quiet=True, ssr_mode=False)
from gradio_client import Client
client = Client(f"http://127.0.0.1:{args.port}/", verbose=False)
for _ in range(240):
    info = client.predict(api_name="/model_info")
    if info["status"]["ready"] or info["status"]["error"]:
        break
    time.sleep(0.5)
assert info["status"]["ready"], info["status"]
records = list(client.submit("Hello", 0, 0, 1.0, 0.0, 1, "hf", 3, None, False, 5, api_name="/stream_records"))
print("served", len(records), info["models"]["current"] == sys.argv[2], "spaces" in sys.modules and sys.modules["spaces"] is None)
from tests.conftest import close_demo
close_demo(demo)
"""


def test_the_app_serves_without_the_spaces_package(tmp_path):
    model = tmp_path / "tiny"
    tiny_llama().save_pretrained(model)
    byte_tokenizer().save_pretrained(model)
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT), str(model), str(free_port())],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "served 3 True True" in out.stdout.splitlines()
