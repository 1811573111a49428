"""Records that cross from the model service to the UI: small, frozen, picklable, JSON-able.

No tensors here. Probabilities are rounded to 6 significant digits: enough for any chart, and it
keeps a step record a few kilobytes whatever the vocabulary size.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, fields


def r6(x: float) -> float:
    return float(f"{x:.6g}")


@functools.cache
def _names(cls) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def _shallow(record) -> dict:
    """A flat record's fields as a dict, sharing its values: they are numbers, strings and tuples of them,
    all immutable. asdict() deep-copies every tuple, which for a step record is ~0.7 ms of the web server's
    Python per streamed step and learner."""
    return {name: getattr(record, name) for name in _names(type(record))}


@dataclass(frozen=True)
class ModelInfo:
    name: str
    source: str  # where it was loaded from (hub id, directory, or cached GGUF)
    parameters: int
    vocab_size: int
    hidden_size: int
    num_layers: int
    device: str
    dtype: str
    has_chat_template: bool
    adds_bos: bool
    eos_token_ids: tuple[int, ...]
    load_seconds: float
    from_cache: bool
    device_name: str = ""  # the card, on a GPU ("NVIDIA L4"); "" on the CPU
    # bytes of the LM head's weight (V x d x bytes per parameter): what every forward pass reads to score
    # the vocabulary at one position (the lessons' "1 GB per step" for Llama-3.1-8B in bf16); 0 = unknown
    head_bytes: int = 0
    precision: str = ""  # fp32, bf16, int8 or int4 as loaded (models/precision.py; a model passed in: by its dtype)
    # a lone learner's one-row products where they do not take torch's own kernel, and what choosing it measured
    # ("numpy's BLAS (1.8x torch's)": models/row_products.py); "" = torch's
    row_products: str = ""
    # a lone learner's decode step on a CPU: "native C step" (models/native_step.py) or "transformers' (why not)";
    # "" = not asked (a GPU, a model passed in)
    decode_step: str = ""

    def describe(self) -> str:
        device = f"{self.device} ({self.device_name})" if self.device_name else self.device
        native = self.decode_step.startswith("native")
        return (
            f"{self.name} · {self.parameters / 1e6:.0f}M parameters · vocab {self.vocab_size:,} · "
            f"d {self.hidden_size} · {self.num_layers} layers · {device} · {self.dtype}"
            + (f" · decode step: {self.decode_step}" if self.decode_step else "")
            + (f" · one-row products: {self.row_products}" if self.row_products and not native else "")
        )

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LoadStatus:
    fraction: float
    message: str
    ready: bool
    error: str | None = None

    def to_dict(self) -> dict:
        return {"fraction": self.fraction, "message": self.message, "ready": self.ready, "error": self.error}

@dataclass(frozen=True)
class Token:
    id: int
    piece: str  # as it reads in text: leading spaces kept; bytes of a split character as \xNN
    special: bool = False
    bytes_hex: str = ""  # its bytes in hex when it holds part of a character ("e1bb"), else "" (piece.encode())

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Stage:
    """One stage of the pipeline at one step, summarised.

    probs are aligned with StepRecord.candidates (the top-N of the raw ranking: the bias and penalties may
    reorder the tokens, the other stages do not), 0 where the stage removed the token. kept_mass is the
    probability, under the stage before, of the tokens this stage kept (1.0 for raw and for a stage that only
    reshapes). applied: a value the stage computed for this step, when it has one: the dynamic temperature's T,
    XTC's chance (it fires when the chance is at most xtc_probability), mirostat's mu (the surprise, in bits, its cut
    used); None otherwise (and left out of to_dict).
    """

    name: str
    probs: tuple[float, ...]
    kept_count: int
    kept_mass: float
    entropy_bits: float
    chosen_prob: float
    applied: float | None = None

    def to_dict(self) -> dict:
        """Its fields (shared, not copied: they are immutable), without `applied` when it has none."""
        out = _shallow(self)
        if self.applied is None:
            del out["applied"]
        return out


@dataclass(frozen=True)
class DrawInfo:
    """u ~ U[0,1) on the final distribution's cumulative bar (most probable first); None = argmax.

    margin: how far u lies from the nearer edge of the chosen token's interval [low, high), on the same bar: a
    draw with a margin near 0 (below the page's KNIFE_EDGE_MARGIN) sat on a knife's edge, where the round-off of
    another batch's arithmetic could have moved the edge past u and drawn the neighbour. None for greedy, and
    for a token that was forced rather than drawn. logit_gap: for greedy, the raw logits' top two apart (how
    far the argmax is from a tie); None otherwise."""

    u: float | None
    rank: int
    low: float
    high: float
    margin: float | None = None
    logit_gap: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class StepRecord:
    step: int
    token_id: int
    piece: str
    special: bool
    text: str  # the generated text so far, safe to show (no partial character, no partial stop string)
    candidates: tuple[Token, ...]  # top-N by raw logit, most probable first
    stages: tuple[Stage, ...]  # in pipeline order: raw, ..., final (empty when capture is off)
    chosen_rank: int  # 0-based rank of the chosen token under the raw logits
    draw: DrawInfo
    seed: int
    forward_ms: float
    sampling_ms: float
    stop_reason: str | None = None  # on the last step only: "eos", "max_tokens" or "stop_string"
    order: str = "hf"
    batch_size: int = 1  # rows that shared the forward pass which produced this step's logits
    # A character can span tokens: the chosen token's bytes in hex when it holds part of one (else "":
    # piece.encode()), and the bytes generated before this step that do not make a whole character
    # yet, which this step's token (and each candidate) may complete. model_service/records/utf8.py reads them.
    bytes_hex: str = ""
    pending_hex: str = ""
    # the raw logits of the candidates, aligned with them (empty when capture is off): the scores before
    # any softmax, negative ones included
    logits: tuple[float, ...] = ()
    capture_ms: float = 0.0  # the part of sampling_ms spent summarising the stages into this record
    # mirostat's mu after this step, in bits (what the next step's cut reads; a run continued from here starts
    # from it); None without mirostat, and then left out of to_dict
    mirostat_mu: float | None = None
    # the tokens whose logit this step's bias, penalties, DRY and bans moved, with how much (token id, adjusted -
    # raw; None for a banned token, whose logit became -inf), bans and then the largest moves first (at most
    # limits.MAX_ADJUSTED_SHOWN); empty when nothing moved, and then left out
    adjusted: tuple[tuple[int, float | None], ...] = ()

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)

    def to_dict(self) -> dict:
        """What asdict() gives (tests check it), built without its deep copies (see _shallow), and a stage's
        `applied` left out where it has none."""
        out = {**_shallow(self), "candidates": tuple(_shallow(t) for t in self.candidates),
               "stages": tuple(s.to_dict() for s in self.stages), "draw": _shallow(self.draw)}
        for name, empty in (("mirostat_mu", None), ("adjusted", ())):
            if out[name] == empty:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, d: dict) -> StepRecord:
        """Rebuild a record from its JSON form (e.g. what the API streams, or a saved run)."""
        d = dict(d)
        d["candidates"] = tuple(Token(**t) for t in d["candidates"])
        d["stages"] = tuple(Stage(**{**s, "probs": tuple(s["probs"])}) for s in d["stages"])
        d["draw"] = DrawInfo(**d["draw"])
        d["logits"] = tuple(d.get("logits", ()))
        d["adjusted"] = tuple((int(t), None if v is None else float(v)) for t, v in d.get("adjusted", ()))
        return cls(**d)


def json_size(record) -> int:
    """Bytes of a record as JSON (UTF-8): what the API streams for it, and what the tests bound."""
    return len(json.dumps(record.to_dict()).encode())


@dataclass(frozen=True)
class WhatIf:
    """One step of a run redrawn with other settings (client.what_if): the record a run with those settings would
    give at that step after the same tokens, drawn with the same u. logits_from says where the step's logits came
    from: "kept" (the run's own, kept by the service: no forward pass), or recomputed by one forward pass, and why
    they were not kept: "not_kept" (a run never kept under this key: a branch, a loaded run file), "page" (a run
    longer than a page keeps: its oldest steps were let go), "room" (the room let go the run of the page that was
    used longest ago). model_service/engine/kept.py keeps them."""

    record: StepRecord
    logits_from: str = "kept"

    def to_dict(self) -> dict:
        return {"record": self.record.to_dict(), "logits_from": self.logits_from}

    @classmethod
    def from_dict(cls, d: dict) -> WhatIf:
        return cls(StepRecord.from_dict(d["record"]), d["logits_from"])


@dataclass(frozen=True)
class BatchStep:
    """One step of the batched engine: a StepRecord per request (None once it has finished) and the
    batch as the sampler saw it."""

    step: int
    rows: tuple[StepRecord | None, ...]  # one per request, in request order
    active: tuple[int, ...]  # the requests in this step's batch, in batch-row order
    logits_shape: tuple[int, int]  # (B, V) actually sampled
    params: dict  # per-row parameter tensors as they entered the sampler, as lists: temperature, top_k, ...
    forward_ms: float
    sampling_ms: float

    def to_dict(self) -> dict:
        return {
            "step": self.step, "rows": [r.to_dict() if r else None for r in self.rows], "active": list(self.active),
            "logits_shape": list(self.logits_shape), "params": self.params,
            "forward_ms": self.forward_ms, "sampling_ms": self.sampling_ms,
        }

    @classmethod
    def from_dict(cls, d: dict) -> BatchStep:
        return cls(
            step=d["step"], rows=tuple(StepRecord.from_dict(r) if r else None for r in d["rows"]),
            active=tuple(d["active"]), logits_shape=tuple(d["logits_shape"]), params=d["params"],
            forward_ms=d["forward_ms"], sampling_ms=d["sampling_ms"],
        )


@dataclass(frozen=True)
class Waiting:
    """A request waits for a row: its place in the queue (1 = next in). Streamed before the first
    StepRecord only to callers that ask for it (generate(..., report_waiting=True))."""

    position: int
    ahead: int  # requests waiting before this one
    queue_length: int  # requests waiting in all

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RoomRow:
    """One live row of the shared batch, anonymised: its settings and progress, never its prompt."""

    settings: dict  # SamplingSettings.to_dict() without the seed
    seeded: bool
    step: int  # tokens generated so far
    max_new_tokens: int
    prompt_tokens: int
    prefilling: bool  # still reading its prompt (a long one is read a chunk per step)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Room:
    """The scheduler that owns the model, seen from outside (ModelService.room())."""

    rows: tuple[RoomRow, ...]  # in batch-row order
    waiting: int  # requests in the queue
    step: int  # forward steps the scheduler has run since it started
    max_rows: int  # rows per step
    queue_size: int  # waiting requests allowed; more are refused
    batch_invariant: bool = False  # the room's arithmetic: a row's logits bit-identical in any batch (engine/invariant.py)

    def to_dict(self) -> dict:
        return {**asdict(self), "rows": [r.to_dict() for r in self.rows]}


@dataclass(frozen=True)
class ManyDraws:
    """One frozen step sampled n times (ModelService.sample_many): the histogram of the draws beside the
    final distribution they were drawn from, and Pearson's chi-square test of one against the other.

    tokens / counts / probs: the top tokens of the final distribution (most probable first) with their
    draw counts and probabilities; other_count / other_prob: everything else. Bins of the test: every
    token whose expected count n*p is at least 5, the rest pooled (a pooled bin still under 5 joins the
    smallest bin); dof = bins - 1; p_value None when there is a single bin (nothing to test).
    """

    step: int
    n: int
    seed: int
    tokens: tuple[Token, ...]
    counts: tuple[int, ...]
    probs: tuple[float, ...]
    other_count: int
    other_prob: float
    distinct: int  # distinct tokens among the n draws
    support: int  # tokens the final distribution gives a probability > 0
    chi2: float
    dof: int
    p_value: float | None
    token_id: int  # the token this recomputed step draws with the run's own seed (the frozen step's, up to round-off)
    forward_ms: float  # recomputing the step's logits (one forward pass through the room's batch)
    draw_ms: float  # the n draws, their counts and the test
    pending_hex: str = ""  # bytes before this step that do not make a whole character yet (as StepRecord's)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ManyDraws:
        """Rebuild the record from its JSON form (what a remote model service sends)."""
        return cls(**{**d, "tokens": tuple(Token(**t) for t in d["tokens"]), "counts": tuple(d["counts"]),
                      "probs": tuple(d["probs"])})
