"""The forward-pass tab's words and tables: pure functions, a Trace record in, Markdown or HTML out.

Each panel opens with the lesson's own explanation; the numbers after it come from the record, so
the text stays true for whichever model is loaded (SmolLM2 has no begin-of-text marker, Gemma does).
Every sentence is a catalogue string (assets/i18n, keys `forward.*`) in the language `lang`.
"""

from __future__ import annotations

from model_service.records.trace import AttentionMap, Trace
from playground import limits

from ..common.i18n import tr
from ..common.text import escape_html, nbytes, piece_html, piece_markdown, show_token, show_tokens, token_bytes

STYLE = """<style>
.ntp-fw-tokens{display:flex;flex-wrap:wrap;gap:4px;align-items:flex-end;max-height:12.5em;overflow-y:auto}
.ntp-fw-tok{display:inline-flex;flex-direction:column;align-items:center;border:1px solid #0072B2;border-radius:6px;padding:2px 6px;min-width:2.2em}
.ntp-fw-piece{font-family:ui-monospace,monospace;font-size:15px;white-space:pre}
.ntp-fw-piece .ntp-part{font-size:9px;vertical-align:baseline;margin-left:1px;color:inherit}
.ntp-fw-id{font-size:11px;opacity:.75}
.ntp-fw-special{border-style:dashed;font-style:italic}
.ntp-fw-more{font-size:12px;opacity:.7;align-self:center}
</style>"""
MAX_CHIPS = limits.FORWARD_MAX_CHIPS


def tokens_html(trace: Trace, lang: str = "en") -> str:
    """One chip per token: the piece as it reads (spaces ␣, specials ⟨…⟩) over its id; a piece of a
    split character shows the character, the bytes it holds as a subscript and in its title."""
    chips = []
    tokens = trace.tokens
    first = max(0, len(tokens) - MAX_CHIPS)
    if first:
        chips.append(f'<span class="ntp-fw-more">{tr(lang, "forward.tokens.earlier", count=first)}</span>')
    for t, s in zip(tokens[first:], show_tokens(tokens, lang=lang)[first:]):
        cls = "ntp-fw-tok ntp-fw-special" if t.special else "ntp-fw-tok"
        key = "forward.tokens.title_special" if t.special else "forward.tokens.title"
        title = escape_html(tr(lang, key, id=t.id, piece=s.hover))
        chips.append(f'<span class="{cls}" title="{title}"><span class="ntp-fw-piece">'
                     f'{piece_html(s)}</span><span class="ntp-fw-id">{t.id}</span></span>')
    return f'{STYLE}<div class="ntp-fw-tokens">{"".join(chips)}</div>'


def _after_prompt(trace: Trace, candidate):
    """A candidate for the token after the whole prompt (the last position), read after the prompt."""
    return show_token(candidate, b"".join(token_bytes(t) for t in trace.tokens[-4:]))


def _shape(s) -> str:
    return "(" + ", ".join(f"{x}" for x in s) + ")"


def input_markdown(trace: Trace, lang: str = "en") -> str:
    s = trace.shapes
    marker = tr(lang, "forward.input.bos" if trace.starts_with_bos else "forward.input.no_bos")
    ids = tr(lang, "forward.input.ids", tokens=len(trace.tokens), marker=marker, tokenize_ms=trace.tokenize_ms,
             shape=_shape(s.input_ids), forward_ms=trace.forward_ms, device=trace.device, model=trace.model,
             trace_ms=trace.trace_ms)
    return f"{tr(lang, 'forward.lesson.input')}\n\n{ids}"


def shapes_markdown(trace: Trace, lang: str = "en") -> str:
    s = trace.shapes
    same = "forward.shapes.hidden_same" if s.hidden_states_same_shape else "forward.shapes.hidden_differ"
    rows = [
        ("input_ids", _shape(s.input_ids), ""),
        (tr(lang, "forward.shapes.embedding"), _shape(s.embeddings), "= hidden_states[0]"),
        ("len(hidden_states)", str(s.num_hidden_states), tr(lang, same, blocks=s.num_layers, shape=_shape(s.hidden_state))),
        ("logits", _shape(s.logits), s.logits_dtype),
    ]
    width = max(len(r[1]) for r in rows)
    return "```\n" + "\n".join(f"{a:<20}{b:<{width + 3}}{c}".rstrip() for a, b, c in rows) + "\n```"


def embedding_markdown(trace: Trace, columns: int = 6, lang: str = "en") -> str:
    e = trace.embedding
    V, d = e.matrix
    lines = [tr(lang, "forward.lesson.embedding"), "",
             tr(lang, "forward.embedding.matrix", rows=V, dim=d, tokens=len(trace.tokens),
                shape=_shape(trace.shapes.embeddings))]
    if abs(e.scale - 1) > 1e-3:
        lines.append(tr(lang, "forward.embedding.scale", scale=e.scale))
    if e.first_position:
        lines.append(tr(lang, "forward.embedding.window", shown=len(e.rows), tokens=len(trace.tokens)))
    head = " | ".join(f"[{i}]" for i in range(columns))
    lines += ["", tr(lang, "forward.embedding.header", columns=head), "|--:|:--|--:|" + "--:|" * columns + ":-:|--:|"]
    shown = show_tokens(trace.tokens, lang=lang)
    for row in e.rows:
        piece = piece_markdown(shown[row.position])
        nums = " | ".join(f"{v:+.3f}" for v in row.values[:columns])
        lines.append(f"| {row.position} | <code>{piece}</code> | {row.token_id} | {nums} | … | {row.norm:.3f} |")
    return "\n".join(lines)


def stream_markdown(trace: Trace, lang: str = "en") -> str:
    r, s = trace.residual, trace.shapes
    L = s.num_layers
    lines = [tr(lang, "forward.lesson.blocks"), "", tr(lang, "forward.stream.snapshots", blocks=L, shape=_shape(s.hidden_state)), "",
             "| | " + " | ".join(f"[{i}]" for i in range(len(r.first_numbers_start))) + " | … |",
             "|:--|" + "--:|" * len(r.first_numbers_start) + ":-:|"]
    for name, values in (("hidden_states[0]", r.first_numbers_start), (f"hidden_states[{L}]", r.first_numbers_end)):
        lines.append(f"| {name} | " + " | ".join(f"{v:+.3f}" for v in values) + " | … |")
    if r.last_is_normed:
        note = tr(lang, "forward.stream.normed", blocks=L, norm=r.final_norm)
    else:
        note = tr(lang, "forward.stream.not_normed", blocks=L, norm=r.final_norm or tr(lang, "forward.stream.no_norm"))
    lines += ["", note]
    if r.positions[0] > 0:
        lines.append("\n" + tr(lang, "forward.stream.window", shown=len(r.positions), tokens=len(trace.tokens)))
    return "\n".join(lines)


def attention_markdown(a: AttentionMap | None, note: str = "", lang: str = "en") -> str:
    lesson = tr(lang, "forward.lesson.attention")
    if a is None:
        return f"{lesson}\n\n⚠️ {note}"  # the service's note names the model and the error, as it gives them
    group = a.num_heads // max(a.num_kv_heads, 1)
    heads = (tr(lang, "forward.attention.heads_shared", block=a.block, blocks=a.num_blocks, heads=a.num_heads,
                kv_heads=a.num_kv_heads, group=group) if group > 1 else
             tr(lang, "forward.attention.heads", block=a.block, blocks=a.num_blocks, heads=a.num_heads))
    parts = [lesson, "", heads + " " + tr(lang, "forward.attention.checked", diff=a.max_abs_diff)]
    if a.positions[0] > 0:
        parts.append(tr(lang, "forward.attention.window", shown=len(a.positions), tokens=a.tokens, last=a.positions[0] - 1))
    if a.sliding_window and a.sliding_window < a.tokens:
        parts.append(tr(lang, "forward.attention.sliding", window=a.sliding_window))
    return "\n".join(parts)


def output_markdown(trace: Trace, lang: str = "en") -> str:
    s, t = trace.shapes, trace.teacher
    T = s.logits[1]
    last = trace.predictions[-1] if trace.predictions else None
    lines = [tr(lang, "forward.lesson.output"), "", tr(lang, "forward.output.shape", shape=_shape(s.logits), rows=T, vocab=s.vocab_size)]
    if last is not None and last.top:
        top = last.top[0]
        lines.append(tr(lang, "forward.output.last", position=last.position,
                        piece=f"<code>{piece_markdown(_after_prompt(trace, top))}</code>", prob=top.prob))
    if t.probs:
        first = sum(1 for r in t.ranks if r == 0)
        lines.append(tr(lang, "forward.output.teacher", first=first, count=len(t.probs), nll=t.mean_nll, ppl=t.perplexity))
    if trace.predictions and trace.predictions[0].position > 0:
        lines.append(tr(lang, "forward.output.window", shown=len(trace.predictions), rows=T))
    return "\n".join(lines)


def cost_markdown(trace: Trace, lang: str = "en") -> str:
    c = trace.cost
    fp32, bf16 = c.tokens * c.vocab_size * 4, c.tokens * c.vocab_size * 2
    longest = c.lengths[-1]
    detail = tr(lang, "forward.cost.detail", tokens=c.tokens, vocab=c.vocab_size, fp32=nbytes(fp32), bf16=nbytes(bf16),
                actual=nbytes(c.actual_bytes), longest=longest, longest_bytes=nbytes(longest * c.vocab_size * 4),
                keep=nbytes(c.keep_one_fp32))
    return f"{tr(lang, 'forward.lesson.cost')}\n\n{detail}"


def lens_markdown(trace: Trace, lang: str = "en") -> str:
    lens = trace.lens
    target = f"<code>{piece_markdown(_after_prompt(trace, lens.target))}</code>"
    first = next((layer.index for layer in lens.layers if layer.target_rank == 0), None)
    stable = next((layer.index for layer in lens.layers
                   if all(later.target_rank == 0 for later in lens.layers[layer.index:])), None)
    lines = [tr(lang, "forward.lesson.lens"), ""]
    if first is None:
        lines.append(tr(lang, "forward.lens.never", target=target))
    else:
        where = tr(lang, "forward.lens.after_embedding") if first == 0 else tr(lang, "forward.block", block=first)
        if stable is not None and stable != first:
            lines.append(tr(lang, "forward.lens.first_stable", target=target, where=where, stable=stable))
        else:
            lines.append(tr(lang, "forward.lens.first", target=target, where=where))
    lines.append(tr(lang, "forward.lens.exact", index=len(lens.layers) - 1, diff=lens.max_abs_diff))
    if lens.softcap:
        lines.append(tr(lang, "forward.lens.softcap", cap=lens.softcap))
    return "\n".join(lines)


__all__ = [
    "attention_markdown", "cost_markdown", "embedding_markdown", "input_markdown", "lens_markdown",
    "output_markdown", "shapes_markdown", "stream_markdown", "tokens_html",
]
