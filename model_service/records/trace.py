"""The forward-pass trace (lesson 10) as records: small, frozen, JSON-able, and free of torch.

A trace keeps summaries, never full tensors: shapes, norms, the first few numbers of a vector, the
top-N of a distribution, and the attention of one block over a window of at most a few dozen
positions. That keeps a 1024-token trace well under 1 MB as JSON, so it can sit in gr.State, cross a
process boundary, or be saved. Conventions: `block` counts from 1 (hidden_states[k] is the stream
after block k, hidden_states[0] the embedding output); positions count from 0.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from dataclasses import asdict, dataclass

from .step import Token


def _rebuild(hint, value):
    """A JSON value back into the type named by a field's annotation (nested records, tuples, None)."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _rebuild(options[0], value) if len(options) == 1 else value
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_rebuild(args[0], v) for v in value)
        return tuple(_rebuild(a, v) for a, v in zip(args, value))
    if dataclasses.is_dataclass(hint):
        return _from_dict(hint, value)
    return value


def _from_dict(cls, data: dict):
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    return cls(**{f.name: _rebuild(hints[f.name], data[f.name]) for f in dataclasses.fields(cls) if f.name in data})


class _Record:
    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict):
        """Rebuild a record from its JSON form (what the API returns, or a saved trace)."""
        return _from_dict(cls, data)


@dataclass(frozen=True)
class Candidate(_Record):
    """One vocabulary entry in a top-N list."""

    id: int
    piece: str
    prob: float
    special: bool = False
    bytes_hex: str = ""  # as Token.bytes_hex: its bytes when it holds part of a character


@dataclass(frozen=True)
class Shapes(_Record):
    """Read off the tensors of the traced forward pass (batch of one)."""

    input_ids: tuple[int, ...]  # (1, T)
    embeddings: tuple[int, ...]  # hidden_states[0]: (1, T, d)
    num_hidden_states: int  # L + 1
    hidden_state: tuple[int, ...]  # each of them: (1, T, d)
    hidden_states_same_shape: bool  # every snapshot had that shape
    logits: tuple[int, ...]  # (1, T, V)
    logits_dtype: str
    num_layers: int  # L
    hidden_size: int  # d
    vocab_size: int  # V


@dataclass(frozen=True)
class EmbeddingRow(_Record):
    """The lookup for one position: token id = row index of the embedding matrix."""

    position: int
    token_id: int
    values: tuple[float, ...]  # the first few numbers of that row, as stored in the matrix
    norm: float  # ‖row‖


@dataclass(frozen=True)
class Embedding(_Record):
    matrix: tuple[int, int]  # (V, d)
    scale: float  # hidden_states[0] = scale × row (1 for Llama; √d for Gemma, which scales its embeddings)
    rows: tuple[EmbeddingRow, ...]  # the last DETAIL_POSITIONS positions
    first_position: int  # position of rows[0]


@dataclass(frozen=True)
class Residual(_Record):
    """The residual stream, read-then-add, over blocks and positions.

    norms[k] (k = 0..L) is ‖stream after block k‖ *before* the final norm (row L comes from the final
    norm's input); final_norms is ‖hidden_states[L]‖, which transformers returns with the final norm
    applied. updates[k-1] = ‖stream_k − stream_{k−1}‖: what block k added.
    """

    positions: tuple[int, ...]  # the columns kept (the last MAP_POSITIONS positions)
    norms: tuple[tuple[float, ...], ...]  # (L + 1) × len(positions)
    updates: tuple[tuple[float, ...], ...]  # L × len(positions)
    final_norms: tuple[float, ...]  # len(positions)
    first_numbers_start: tuple[float, ...]  # hidden_states[0][0, -1, :K]
    first_numbers_end: tuple[float, ...]  # hidden_states[L][0, -1, :K] (final norm applied)
    last_is_normed: bool  # hidden_states[-1] == final_norm(stream after block L), checked on the tensors
    final_norm: str  # the final norm module's class, "" if none was found


@dataclass(frozen=True)
class AttentionMap(_Record):
    """One block's attention: every head, over a window of the last positions.

    weights[h][i][j]: how much query positions[i] attends to key positions[j] (0 above the diagonal:
    the causal mask). earlier[h][i]: its total weight on keys before the window, so that
    earlier + sum(row) = 1 even when the window is cut.
    """

    block: int  # 1..L
    num_blocks: int
    num_heads: int
    num_kv_heads: int
    tokens: int  # T: the whole prompt
    positions: tuple[int, ...]  # the window (queries and keys), the last positions of the prompt
    pieces: tuple[Token, ...]  # the tokens at those positions
    weights: tuple[tuple[tuple[float, ...], ...], ...]  # heads × window × window
    earlier: tuple[tuple[float, ...], ...]  # heads × window
    sliding_window: int | None  # this block sees at most this many keys (Gemma's local layers)
    max_abs_diff: float  # |eager re-run - the model's own attention output|: the check that the weights are real
    ms: float


@dataclass(frozen=True)
class PositionPrediction(_Record):
    """The logits row of one position: its top-N next tokens and the token that really came next."""

    position: int
    token: Token  # the input token at this position
    top: tuple[Candidate, ...]
    next: Token | None  # the prompt's next token (teacher forcing); None at the last position
    next_rank: int | None  # 0-based rank of that token in this row
    next_prob: float | None


@dataclass(frozen=True)
class TeacherForcing(_Record):
    """For every position but the last: the probability and rank of the prompt's actual next token."""

    probs: tuple[float, ...]  # T - 1
    ranks: tuple[int, ...]  # T - 1, 0-based
    mean_nll: float  # nats per token over the prompt (0 for a one-token prompt)
    perplexity: float


@dataclass(frozen=True)
class LogitsCost(_Record):
    """Memory of keeping the logits of every position: T × V × bytes (pure arithmetic)."""

    tokens: int
    vocab_size: int
    actual_bytes: int  # the logits tensor of this trace, at its own dtype
    lengths: tuple[int, ...]  # prompt lengths for the curve
    bytes_fp32: tuple[int, ...]  # length × V × 4
    bytes_bf16: tuple[int, ...]  # length × V × 2
    keep_one_fp32: int  # logits_to_keep=1: V × 4, whatever the length
    keep_one_bf16: int


@dataclass(frozen=True)
class LensLayer(_Record):
    index: int  # hidden_states index: 0 = embedding output, L = after the last block
    top: tuple[Candidate, ...]
    target_prob: float  # probability of the model's final prediction, read at this layer
    target_rank: int  # its 0-based rank here


@dataclass(frozen=True)
class LogitLens(_Record):
    """Final norm + LM head applied to every snapshot at the last position (norm for 0..L−1 only:
    hidden_states[L] already has it)."""

    position: int
    target: Token  # the model's own top prediction (argmax of its last-position logits)
    layers: tuple[LensLayer, ...]  # L + 1
    max_abs_diff: float  # |lens at index L − the model's last-position logits|: 0 up to float error
    softcap: float | None  # final logit soft-capping, applied as the model does


@dataclass(frozen=True)
class Trace(_Record):
    prompt: str
    chat: bool
    model: str
    device: str
    tokens: tuple[Token, ...]
    starts_with_bos: bool  # the tokenizer put its begin-of-text marker first (Llama 3, Gemma; not SmolLM2)
    tokenize_ms: float
    forward_ms: float
    trace_ms: float  # everything: forward pass, summaries, the attention re-run
    shapes: Shapes
    embedding: Embedding
    residual: Residual
    attention: AttentionMap | None  # None when the architecture's attention could not be re-run
    attention_note: str
    predictions: tuple[PositionPrediction, ...]  # the last DETAIL_POSITIONS positions, in order
    teacher: TeacherForcing
    cost: LogitsCost
    lens: LogitLens

    @property
    def num_layers(self) -> int:
        return self.shapes.num_layers

    def with_attention(self, attention: AttentionMap | None, note: str = "") -> Trace:
        """The same trace showing another block's attention (what the UI's block picker asks for)."""
        return dataclasses.replace(self, attention=attention, attention_note=note)


__all__ = [
    "AttentionMap", "Candidate", "Embedding", "EmbeddingRow", "LensLayer", "LogitLens", "LogitsCost",
    "PositionPrediction", "Residual", "Shapes", "TeacherForcing", "Token", "Trace",
]
