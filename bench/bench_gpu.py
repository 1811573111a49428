"""GPU benchmark of the service and the room: a random-initialised Llama-3.1-8B (the config shipped in
assets/llama-3.1-8b.json, bf16, no download, no weights) and the embedded SmolLM2, on CUDA.

For each model, measured in one run:
  (a) one request alone: the decode step's forward pass (median ms, from the records) against the
      memory-bandwidth bound — the weights' bytes over the card's HBM bandwidth, the least a step can take
      when it reads every weight once;
  (b) capture overhead: tokens/s with every stage summarised vs capture off (interleaved rounds);
  (c) our loop vs transformers' model.generate(), same settings, same token count;
  (d) batch scaling through the room's scheduler: N concurrent requests, N = 1 … 32 rows — the forward
      pass's median ms at N rows, aggregate tokens/s, and the speed-up over N = 1;
  (e) the room's decode step eager vs CUDA graphs (engine/static_decode.py) at the fewest and most rows: step ms
      against the bandwidth bound, tok/s with every stage captured.

    python bench/bench_gpu.py                                # on a GPU: both models, rows 1 2 4 8 16 32 64
    python bench/bench_gpu.py --models llama8b --bandwidth 3350 --json figures.json
    python bench/bench_gpu.py --tiny                         # anywhere: the same script on a tiny Llama, CPU

--tiny shrinks the Llama config (2 blocks of 64, same vocabulary) and the run, so the script is exercised
by the test suite on a CPU (tests/model/test_bench_gpu.py); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from model_service import ModelService, SamplingSettings  # noqa: E402
from model_service.models.loading import model_info  # noqa: E402

PROMPT = "Once upon a time, in a small village by the sea,"
SAMPLED = SamplingSettings(temperature=0.8, top_p=0.95, seed=0)
# HBM bandwidth, GB/s, by the name torch reports (first match wins). A MIG slice (ZeroGPU's "H200 MIG
# 3g.71gb") has part of the card's bandwidth: pass --bandwidth for it.
BANDWIDTH_GBS = [("MIG", None), ("H200", 4800), ("H100 PCIe", 2000), ("H100", 3350), ("A100-SXM4-80GB", 2039),
                 ("A100 80GB PCIe", 1935), ("A100", 1555), ("L40S", 864), ("A10G", 600), ("L4", 300), ("T4", 320)]
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16}


def bandwidth_gbs(device: torch.device, given: float | None) -> float | None:
    if given:
        return given
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((gbs for key, gbs in BANDWIDTH_GBS if key in name), None)


def byte_tokenizer():
    """One token per byte: enough to feed a random model (its own vocabulary is never decoded to words)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {"<eos>": 0, "<bos>": 1, **{c: i + 2 for i, c in enumerate(alphabet)}}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", bos_token="<bos>")


def random_llama(device: torch.device, dtype: torch.dtype, tiny: bool, max_rows: int) -> ModelService:
    """Llama-3.1-8B's architecture with random weights, built directly on the device in `dtype`."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    shipped = json.loads((ROOT / "assets" / "llama-3.1-8b.json").read_text())["config"]
    config = {k: v for k, v in shipped.items() if k not in ("architectures", "torch_dtype")}
    config.update(TINY if tiny else {})
    torch.manual_seed(0)
    started = time.perf_counter()
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(LlamaConfig(**config), dtype=dtype).eval()
    name = "Llama-3.1-8B (random weights" + (", tiny shape)" if tiny else ")")
    tokenizer = byte_tokenizer()
    info = model_info(model, tokenizer, name, "assets/llama-3.1-8b.json", time.perf_counter() - started)
    return ModelService(model, tokenizer, info, max_rows=max_rows)


def ours(service, tokens, capture=True, settings=SAMPLED):
    started = time.perf_counter()
    records = list(service.generate(PROMPT, settings, max_new_tokens=tokens, capture=capture, ignore_eos=True))
    return tokens / (time.perf_counter() - started), records


def theirs(service, tokens):
    ids = torch.tensor([service.encode(PROMPT)], device=service.model.device)
    started = time.perf_counter()
    with torch.inference_mode():
        out = service.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens,
                                     min_new_tokens=tokens, do_sample=True, temperature=SAMPLED.temperature,
                                     top_p=SAMPLED.top_p, top_k=0, pad_token_id=0)
    if service.model.device.type == "cuda":
        torch.cuda.synchronize()
    assert out.shape[1] - ids.shape[1] == tokens
    return tokens / (time.perf_counter() - started)


def alone(service, tokens, rounds, bandwidth):
    """(a), (b), (c): one request at a time."""
    ours(service, 4), theirs(service, 4)  # warm-up (CUDA kernels, allocator)
    rates = {"capture on": [], "capture off": [], "generate()": []}
    forward = []
    for _ in range(rounds):
        rate, records = ours(service, tokens)
        rates["capture on"].append(rate)
        forward += [r.forward_ms for r in records[1:]]  # the first record's time is the prompt's prefill
        rates["generate()"].append(theirs(service, tokens))
        rates["capture off"].append(ours(service, tokens, capture=False)[0])
    med = {k: statistics.median(v) for k, v in rates.items()}
    weights = sum(p.numel() * p.element_size() for p in service.model.parameters())
    step = statistics.median(forward)
    bound = weights / (bandwidth * 1e9) * 1000 if bandwidth else None
    print(f"  weights {weights / 1e9:.2f} GB; {tokens} tokens x {rounds} interleaved rounds, medians")
    print(f"  (a) forward pass per step, B=1: {step:.2f} ms" + (
        f"; bandwidth bound {bound:.2f} ms ({bandwidth:g} GB/s) -> {step / bound:.2f}x the bound" if bound else
        "; bandwidth bound: unknown card (pass --bandwidth GB/s)"))
    print(f"  (b) capture on {med['capture on']:.1f} tok/s, off {med['capture off']:.1f} tok/s -> overhead "
          f"{(med['capture off'] / med['capture on'] - 1) * 100:+.1f}%")
    print(f"  (c) ours (capture on) / generate(): {med['capture on'] / med['generate()']:.3f}x "
          f"({med['generate()']:.1f} tok/s)")
    return {"weights_bytes": weights, "step_ms": step, "bound_ms": bound, "bandwidth_gbs": bandwidth,
            "tokens_per_s": med, "capture_overhead": med["capture off"] / med["capture on"] - 1,
            "ours_vs_generate": med["capture on"] / med["generate()"]}


def together(service, n, tokens):
    """N requests at once through the scheduler: (aggregate tok/s, median forward ms of N-row steps)."""
    out: dict = {}

    def one(i):
        settings = SamplingSettings(temperature=0.8, top_p=0.95, seed=1000 + i)
        out[i] = list(service.generate(PROMPT, settings, max_new_tokens=tokens, ignore_eos=True))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    full = [r.forward_ms for records in out.values() for r in records if r.batch_size == n]
    return sum(len(r) for r in out.values()) / elapsed, statistics.median(full) if full else None


def scaling(service, rows, tokens):
    """(d): batch scaling; rows that never shared a step in full are marked."""
    together(service, rows[0], 4)  # warm-up
    results, base = [], None
    for n in rows:
        rate, step = together(service, n, tokens)
        base = base or rate
        results.append({"rows": n, "tokens_per_s": rate, "step_ms": step, "speedup": rate / base})
        shown = f"{step:7.2f} ms ({step / n:6.2f} per row)" if step else "    (never all N in one step)"
        print(f"  (d) N={n:3d}: forward {shown}, {rate:8.1f} tok/s aggregate, {rate / base:5.2f}x N=1")
    return results


def graphs(service, rows, tokens, bandwidth):
    """(e): the room's decode step eager vs at static shapes (engine/static_decode.py: CUDA graphs per bucket on
    a GPU; on a CPU the same static step runs without a backend: the figures then say nothing of graphs). One row
    against the bandwidth bound, and the largest N's tok/s with every stage captured."""
    from model_service.engine.scheduler import Scheduler
    from model_service.engine.static_decode import StaticDecoder

    backend = "cudagraphs" if service.model.device.type == "cuda" else None
    eager_decoder = Scheduler._batch_decoder
    weights = sum(p.numel() * p.element_size() for p in service.model.parameters())
    bound = weights / (bandwidth * 1e9) * 1000 if bandwidth else None
    out = {}
    for mode in ("eager", "graphs"):
        if service._scheduler is not None:
            service._scheduler.stop()
            service._scheduler = None
        Scheduler._batch_decoder = eager_decoder if mode == "eager" else (
            lambda self: StaticDecoder(self.loaded.model, self._pad, backend=backend))
        try:
            figures = {}
            for n in rows:
                together(service, n, 4)  # warm-up: this bucket's graph is captured here
                rate, step = together(service, n, tokens)
                figures[n] = {"tokens_per_s": rate, "step_ms": step}
            out[mode] = figures
        finally:
            Scheduler._batch_decoder = eager_decoder
            service._scheduler.stop()
            service._scheduler = None
    for n in rows:
        e, g = out["eager"][n], out["graphs"][n]
        vs_bound = (f"; bound {bound:.2f} ms -> eager {e['step_ms'] / bound:.2f}x, graphs {g['step_ms'] / bound:.2f}x"
                    if bound and e["step_ms"] and g["step_ms"] else "")
        steps = (f"step eager {e['step_ms']:.2f} ms, graphs {g['step_ms']:.2f} ms ({e['step_ms'] / g['step_ms']:.2f}x)"
                 if e["step_ms"] and g["step_ms"] else "step: never all N in one step")
        print(f"  (e) N={n:3d}: {steps}{vs_bound}; {e['tokens_per_s']:.1f} -> {g['tokens_per_s']:.1f} tok/s "
              f"with full capture{'' if backend else ' (CPU: the static step without graphs)'}")
    return {"backend": backend, "bound_ms": bound,
            "rows": [{"rows": n, **{f"{m}_{k}": out[m][n][k] for m in out for k in ("tokens_per_s", "step_ms")}}
                     for n in rows]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=None, choices=["llama8b", "smollm2"])
    ap.add_argument("--rows", type=int, nargs="+", default=None, help="batch sizes (default 1 2 4 8 16 32 64)")
    ap.add_argument("--tokens", type=int, default=None, help="new tokens per request (default 64; tiny 6)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3; tiny 1)")
    ap.add_argument("--device", default=None, help="default: cuda, or cpu with --tiny")
    ap.add_argument("--bandwidth", type=float, default=None, help="HBM GB/s, when the card is not in the table")
    ap.add_argument("--tiny", action="store_true", help="a tiny Llama on the CPU: checks the script, not the GPU")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args()
    models = args.models or (["llama8b"] if args.tiny else ["llama8b", "smollm2"])
    rows = args.rows or ([1, 2, 4] if args.tiny else [1, 2, 4, 8, 16, 32, 64])
    tokens, rounds = args.tokens or (6 if args.tiny else 64), args.rounds or (1 if args.tiny else 3)
    device = torch.device(args.device or ("cpu" if args.tiny else "cuda"))
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("error: no CUDA GPU here (run with --tiny to exercise the script on the CPU)")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    bandwidth = bandwidth_gbs(device, args.bandwidth)
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"device: {device} ({card}); torch {torch.__version__}; dtype {dtype}; rows {rows}")

    figures = {"device": str(device), "card": card, "torch": torch.__version__, "models": {}}
    for key in models:
        try:
            service = (random_llama(device, dtype, args.tiny, max(rows)) if key == "llama8b"
                       else ModelService.load("smollm2", str(device), max_rows=max(rows)))
        except Exception as e:  # e.g. the offline package missing on a bare GPU machine: report, go on
            print(f"\n[{key}] not run: {e}")
            continue
        print(f"\n[{service.info.describe()}]")
        figures["models"][key] = {"model": service.info.describe(), **alone(service, tokens, rounds, bandwidth),
                                  "scaling": scaling(service, rows, tokens),
                                  "graphs": graphs(service, sorted({rows[0], rows[-1]}), tokens, bandwidth)}
        service.close()
        del service
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
