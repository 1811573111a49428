"""The forward-pass tab's words and tables: pure functions, a Trace record in, Markdown or HTML out.

Each panel opens with the lesson's own explanation; the numbers after it come from the record, so
the text stays true for whichever model is loaded (SmolLM2 has no begin-of-text marker, Gemma does).
"""

from __future__ import annotations

from model_service.trace_records import AttentionMap, Trace

from ..common.text import escape_html, nbytes, visible_piece

LESSON = {
    "input": "**Input: tokenizer, then embedding.** The tokenizer is the last non-neural step: a lookup "
             "table plus merge rules, on the CPU, in microseconds. After it the request is only tensors.",
    "embedding": "**Embedding.** Each id selects its row of the embedding matrix; the rows stacked give "
                 "(batch, position, numbers per position). That tensor is the **residual stream**: its "
                 "shape never changes until the end.",
    "blocks": "**Through: read-then-add stations.** Each block reads the stream, computes a correction and "
              "adds it back: same shape in, same shape out. Attention lets positions exchange information "
              "under a causal (look-back-only) mask; the MLP works on each position alone.",
    "attention": "**Attention inside one block.** Each row is a position asking *where should I read "
                 "from?*; its weights sum to 1 and never reach ahead (grey: the causal mask).",
    "output": "**Output: logits for every position.** After the last block and the final norm, the output "
              "matrix scores the next token at *every* position, not just the last. Generation uses only "
              "the last row.",
    "cost": "**Keeping them costs memory:** positions × vocabulary × bytes. That is why an engine's "
            "prefill asks for `logits_to_keep=1`: the head runs for the last position only.",
    "lens": "**Logit lens.** Apply the final norm and the LM head to the stream after *each* block (final "
            "norm to indices 0…L−1 only: the last snapshot already has it) and watch the answer form.",
    "sample": "**Sample from here:** hand this prompt to the Sampling lab and draw the next token.",
}

STYLE = """<style>
.ntp-fw-tokens{display:flex;flex-wrap:wrap;gap:4px;align-items:flex-end;max-height:12.5em;overflow-y:auto}
.ntp-fw-tok{display:inline-flex;flex-direction:column;align-items:center;border:1px solid #0072B2;border-radius:6px;padding:2px 6px;min-width:2.2em}
.ntp-fw-piece{font-family:ui-monospace,monospace;font-size:15px;white-space:pre}
.ntp-fw-id{font-size:11px;opacity:.75}
.ntp-fw-special{border-style:dashed;font-style:italic}
.ntp-fw-more{font-size:12px;opacity:.7;align-self:center}
</style>"""
MAX_CHIPS = 256


def tokens_html(trace: Trace) -> str:
    """One chip per token: the piece as it reads (spaces ␣, specials ⟨…⟩) over its id."""
    chips = []
    tokens = trace.tokens
    shown = tokens if len(tokens) <= MAX_CHIPS else tokens[-MAX_CHIPS:]
    if len(shown) < len(tokens):
        chips.append(f'<span class="ntp-fw-more">… {len(tokens) - len(shown)} earlier tokens …</span>')
    for t in shown:
        cls = "ntp-fw-tok ntp-fw-special" if t.special else "ntp-fw-tok"
        title = escape_html(f"id {t.id} · {t.piece!r}" + (" · special token" if t.special else ""))
        chips.append(f'<span class="{cls}" title="{title}"><span class="ntp-fw-piece">'
                     f'{escape_html(visible_piece(t.piece, t.special))}</span><span class="ntp-fw-id">{t.id}</span></span>')
    return f'{STYLE}<div class="ntp-fw-tokens">{"".join(chips)}</div>'


def _shape(s) -> str:
    return "(" + ", ".join(f"{x}" for x in s) + ")"


def input_markdown(trace: Trace) -> str:
    t, s = len(trace.tokens), trace.shapes
    marker = " (the first is the tokenizer's begin-of-text marker)" if trace.starts_with_bos else (
        " (this tokenizer adds no begin-of-text marker)")
    return (f"{LESSON['input']}\n\n**{t} token ids**{marker}, tokenized in {trace.tokenize_ms:.2f} ms → "
            f"`input_ids {_shape(s.input_ids)}`. One forward pass: {trace.forward_ms:.0f} ms on {trace.device} "
            f"({trace.model}); the whole trace {trace.trace_ms:.0f} ms.")


def shapes_markdown(trace: Trace) -> str:
    s = trace.shapes
    same = "each" if s.hidden_states_same_shape else "⚠️ not all"
    rows = [
        ("input_ids", _shape(s.input_ids), ""),
        ("embedding output", _shape(s.embeddings), "= hidden_states[0]"),
        ("len(hidden_states)", str(s.num_hidden_states), f"= {s.num_layers} blocks + 1, {same} {_shape(s.hidden_state)}"),
        ("logits", _shape(s.logits), s.logits_dtype),
    ]
    width = max(len(r[1]) for r in rows)
    return "```\n" + "\n".join(f"{a:<20}{b:<{width + 3}}{c}".rstrip() for a, b, c in rows) + "\n```"


def embedding_markdown(trace: Trace, columns: int = 6) -> str:
    e = trace.embedding
    V, d = e.matrix
    lines = [LESSON["embedding"], "",
             f"The matrix is {V:,} × {d:,}; {len(trace.tokens)} rows stacked = `{_shape(trace.shapes.embeddings)}`."]
    if abs(e.scale - 1) > 1e-3:
        lines.append(f"This model multiplies each row by {e.scale:.4g} (≈ √d) on its way into the stream.")
    if e.first_position:
        lines.append(f"Showing the last {len(e.rows)} of {len(trace.tokens)} positions.")
    head = " | ".join(f"[{i}]" for i in range(columns))
    lines += ["", f"| position | token | row (= id) | {head} | … | ‖row‖ |", "|--:|:--|--:|" + "--:|" * columns + ":-:|--:|"]
    for row in e.rows:
        tok = trace.tokens[row.position]
        piece = visible_piece(tok.piece, tok.special).replace("|", "\\|")
        nums = " | ".join(f"{v:+.3f}" for v in row.values[:columns])
        lines.append(f"| {row.position} | `{piece}` | {row.token_id} | {nums} | … | {row.norm:.3f} |")
    return "\n".join(lines)


def stream_markdown(trace: Trace) -> str:
    r, s = trace.residual, trace.shapes
    L = s.num_layers
    lines = [LESSON["blocks"], "",
             f"hidden_states[0] is the embedding output; hidden_states[k] the stream after block k. Below, the "
             f"first numbers at the last position, at index 0 and at index {L}: same position, same shape "
             f"{_shape(s.hidden_state)}, different numbers. That difference is how the model read the prompt.", "",
             "| | " + " | ".join(f"[{i}]" for i in range(len(r.first_numbers_start))) + " | … |",
             "|:--|" + "--:|" * len(r.first_numbers_start) + ":-:|"]
    for name, values in (("hidden_states[0]", r.first_numbers_start), (f"hidden_states[{L}]", r.first_numbers_end)):
        lines.append(f"| {name} | " + " | ".join(f"{v:+.3f}" for v in values) + " | … |")
    if r.last_is_normed:
        note = (f"**Detail to notice:** the library returns the *last* snapshot, hidden_states[{L}], with the final "
                f"norm ({r.final_norm}) already applied (checked on the tensors: it equals the final norm of the "
                f"stream after block {L}). The heatmap shows both rows.")
    else:
        note = (f"Note: hidden_states[{L}] did not match the final norm of the last block's output here "
                f"({r.final_norm or 'no final norm found'}); its row is shown as returned.")
    lines += ["", note]
    if r.positions[0] > 0:
        lines.append(f"\nHeatmaps: the last {len(r.positions)} of {len(trace.tokens)} positions.")
    return "\n".join(lines)


def attention_markdown(a: AttentionMap | None, note: str = "") -> str:
    if a is None:
        return f"{LESSON['attention']}\n\n⚠️ {note}"
    group = a.num_heads // max(a.num_kv_heads, 1)
    parts = [LESSON["attention"], "",
             f"Block {a.block} of {a.num_blocks}: {a.num_heads} heads"
             + (f" sharing {a.num_kv_heads} key/value heads ({group} query heads each: grouped-query attention)" if group > 1 else "")
             + f". Weights from an eager re-run of this block's attention; its output matches the model's own "
               f"to {a.max_abs_diff:.1e}."]
    if a.positions[0] > 0:
        parts.append(f"Showing the last {len(a.positions)} of {a.tokens} positions; the *earlier* column holds "
                     f"each row's weight on positions 0…{a.positions[0] - 1}.")
    if a.sliding_window and a.sliding_window < a.tokens:
        parts.append(f"This block uses a sliding window: each position sees only the last {a.sliding_window} keys.")
    return "\n".join(parts)


def output_markdown(trace: Trace) -> str:
    s, t = trace.shapes, trace.teacher
    T = s.logits[1]
    last = trace.predictions[-1] if trace.predictions else None
    lines = [LESSON["output"], "",
             f"`logits {_shape(s.logits)}`: {T} rows of {s.vocab_size:,} scores."]
    if last is not None and last.top:
        top = last.top[0]
        lines.append(f"The last row (position {last.position}) puts `{visible_piece(top.piece, top.special)}` first "
                     f"at {top.prob:.1%}: that is the next token greedy decoding would pick.")
    if t.probs:
        first = sum(1 for r in t.ranks if r == 0)
        lines.append(f"Teacher forcing: at {first} of {len(t.probs)} positions the prompt's real next token is the "
                     f"model's first choice; mean −log p = {t.mean_nll:.2f} nats (perplexity {t.perplexity:.3g}).")
    if trace.predictions and trace.predictions[0].position > 0:
        lines.append(f"Table: the last {len(trace.predictions)} of {T} positions.")
    return "\n".join(lines)


def cost_markdown(trace: Trace) -> str:
    c = trace.cost
    fp32, bf16 = c.tokens * c.vocab_size * 4, c.tokens * c.vocab_size * 2
    longest = c.lengths[-1]
    return (f"{LESSON['cost']}\n\nThis prompt: {c.tokens} × {c.vocab_size:,} × 4 B = **{nbytes(fp32)}** at float32 "
            f"({nbytes(bf16)} at bf16; this trace's tensor was {nbytes(c.actual_bytes)}). At {longest:,} tokens: "
            f"{nbytes(longest * c.vocab_size * 4)}. With `logits_to_keep=1`: {nbytes(c.keep_one_fp32)}, at any length.")


def lens_markdown(trace: Trace) -> str:
    lens = trace.lens
    target = visible_piece(lens.target.piece, lens.target.special)
    first = next((layer.index for layer in lens.layers if layer.target_rank == 0), None)
    stable = next((layer.index for layer in lens.layers
                   if all(later.target_rank == 0 for later in lens.layers[layer.index:])), None)
    lines = [LESSON["lens"], ""]
    if first is None:
        lines.append(f"`{target}` never tops the lens before the end.")
    else:
        where = "the embedding" if first == 0 else f"block {first}"
        lines.append(f"The final answer `{target}` first comes out on top after {where}"
                     + (f" and stays there from block {stable} on." if stable is not None and stable != first else "."))
    lines.append(f"At index {len(lens.layers) - 1} the lens equals the model's own last-position logits "
                 f"(max difference {lens.max_abs_diff:.1e}).")
    if lens.softcap:
        lines.append(f"Logits soft-capped at {lens.softcap:g}, as the model does.")
    return "\n".join(lines)


__all__ = [
    "LESSON", "attention_markdown", "cost_markdown", "embedding_markdown", "input_markdown", "lens_markdown",
    "output_markdown", "shapes_markdown", "stream_markdown", "tokens_html",
]
