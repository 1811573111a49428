"""The README's front matter is what a Hugging Face Space reads (hub-docs spaces-config-reference.md): it
parses, it matches the pins, and the README after it is still the README."""

from __future__ import annotations

import re

import pytest
import yaml

from .conftest import ROOT

ZERO_GPU_PYTHONS = {"3.10.13", "3.12.12"}  # hub-docs spaces-zerogpu.md, "Supported Versions"
ZERO_GPU_TORCHES = {"2.8.0", "2.9.1", "2.10.0", "2.11.0"}
HARDWARE = {"cpu-basic", "cpu-upgrade", "t4-small", "t4-medium", "l4x1", "l4x4", "l40sx1", "l40sx4", "l40sx8",
            "a10g-small", "a10g-large", "a10g-largex2", "a10g-largex4", "a100-large", "a100x4", "a100x8"}


def front_matter() -> tuple[dict, str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, "README.md must open with a --- YAML block ---"
    return yaml.safe_load(match.group(1)), text[match.end():]


def pins(name: str) -> dict[str, str]:
    out = {}
    for line in (ROOT / name).read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            package, version = line.split("==")
            out[package.strip().lower()] = version.strip()
    return out


@pytest.fixture(scope="module")
def meta():
    return front_matter()[0]


def test_the_space_runs_this_app_with_the_pinned_gradio(meta):
    assert meta["sdk"] == "gradio" and meta["sdk_version"] == pins("requirements.txt")["gradio"]
    assert meta["app_file"] == "app.py" and (ROOT / meta["app_file"]).is_file()
    assert str(meta["python_version"]) in ZERO_GPU_PYTHONS


def test_the_space_card_fields_are_valid(meta):
    assert meta["title"] and len(meta["short_description"]) <= 60
    assert meta["suggested_hardware"] in HARDWARE
    assert re.fullmatch(r"\d+[mh]", meta["startup_duration_timeout"])
    assert meta["colorFrom"] in {"red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray"}


def test_models_are_the_catalogs_and_the_space_default_is_preloaded(meta):
    from model_service.models.catalog import CATALOG, SPACE_GPU_MODEL

    assert meta["models"] == [entry.hub_id for entry in CATALOG.values()]
    preload = meta["preload_from_hub"]
    assert CATALOG[SPACE_GPU_MODEL].hub_id in preload and CATALOG["smollm2"].hub_id in preload
    assert set(preload) <= set(meta["models"])
    assert not any(CATALOG[key].gated for key in CATALOG if CATALOG[key].hub_id in preload)  # preloading private repos fails


def test_a_space_gets_a_zero_gpu_torch_and_this_machine_keeps_its_own():
    import torch

    assert pins("pre-requirements.txt")["torch"] in ZERO_GPU_TORCHES
    assert "torch" not in pins("requirements.txt")  # else the Space would replace the pre-installed one
    assert torch.__version__.split("+")[0] == pins("requirements-torch.txt")["torch"]
    setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    assert "-r requirements-torch.txt -r requirements.txt" in setup and "-r pre-requirements.txt" not in setup


def test_the_readme_is_still_a_readme():
    _, body = front_matter()
    assert body.lstrip().startswith("# Next-Token Playground\n")
    assert "make run" in body and "make test" in body


def test_the_readme_reads_in_two_minutes_and_its_first_screen_has_the_two_commands():
    _, body = front_matter()
    lines = body.lstrip().splitlines()
    assert len(lines) <= 80, f"the README is {len(lines)} lines: details belong in docs/"
    first_screen = "\n".join(lines[:30])  # what a 1280x720 window shows of GitHub's or the Space's rendering
    assert "make run" in first_screen and "make test" in first_screen


def test_every_relative_link_in_the_readme_and_docs_resolves():
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to a missing {target}"
