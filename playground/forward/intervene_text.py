"""What the interventions' lines say: an Attribution or a KnockoutResult in, Markdown out (every token escaped).
No torch, no gradio."""

from __future__ import annotations

from model_service.records.intervention import Attribution, Knockout, KnockoutResult, PatchResult, SteerResult

from ..common.i18n import tr
from ..common.text import escape_html, escape_markdown_cell, piece_markdown, prob_text, show_token
from ..lab.stage_panels import FOLD_NAMES


def token_md(token, lang: str = "en") -> str:
    """A token in a sentence: its visible reading in <code>, escaped."""
    return f"<code>{piece_markdown(show_token(token, lang=lang))}</code>"


def attribution_markdown(a: Attribution, lang: str = "en") -> str:
    lines = [tr(lang, "intervene.attribution.sum", candidate=token_md(a.candidate, lang), rival=token_md(a.rival, lang),
                diff=a.logit_diff, embedding=a.embedding, attention=sum(a.attention), mlp=sum(a.mlp),
                error=a.residual_error, scale=a.scale)]
    shares = [(v, b + 1, "intervene.chart.attention") for b, v in enumerate(a.attention)]
    shares += [(v, b + 1, "intervene.chart.mlp") for b, v in enumerate(a.mlp)]
    part = lambda s: tr(lang, "intervene.attribution.part", block=s[1], part=tr(lang, s[2]), value=s[0])
    lines.append(tr(lang, "intervene.attribution.most", up=part(max(shares)), down=part(min(shares))))
    if a.heads:
        head = max(range(len(a.heads)), key=lambda h: abs(a.heads[h]))
        lines.append(tr(lang, "intervene.attribution.heads", block=a.head_block, head=head + 1, value=a.heads[head]))
    else:
        lines.append(tr(lang, "intervene.attribution.no_heads", block=a.head_block, why=a.head_note))
    if a.softcap:
        lines.append(tr(lang, "intervene.attribution.softcap", cap=a.softcap))
    return "\n\n".join(lines)


def target_text(t: Knockout, lang: str = "en") -> str:
    return tr(lang, f"intervene.target.{t.kind}", block=t.block, head=t.head)


def knockout_markdown(r: KnockoutResult, lang: str = "en") -> str:
    mode = tr(lang, f"intervene.mode.{r.target.mode}")
    lines = [tr(lang, "intervene.knockout.title", target=target_text(r.target, lang), mode=mode),
             tr(lang, "intervene.knockout.candidate", candidate=token_md(r.candidate, lang),
                before=prob_text(r.prob_before), after=prob_text(r.prob_after), rank_before=r.rank_before,
                rank_after=r.rank_after)]
    top_before, top_after = r.before.candidates[0], r.after.candidates[0]
    if top_before.id == top_after.id:
        lines.append(tr(lang, "intervene.knockout.greedy_same", token=token_md(top_before, lang)))
    else:
        lines.append(tr(lang, "intervene.knockout.greedy_changed", before=token_md(top_before, lang),
                        after=token_md(top_after, lang)))
    drawn = dict(before=token_md(r.before, lang), after=token_md(r.after, lang))
    if r.before.draw.u is None:
        lines.append(tr(lang, "intervene.knockout.greedy_draw", **drawn))
    else:
        lines.append(tr(lang, "intervene.knockout.draw", u=r.before.draw.u, **drawn))
    kept = [tr(lang, "intervene.knockout.kept", stage=FOLD_NAMES.get(b.name, b.name), before=b.kept_count,
               after=a.kept_count)
            for b, a in zip(r.before.stages, r.after.stages) if b.name not in ("raw", "final") and b.kept_count != a.kept_count]
    lines += kept
    lines.append(tr(lang, "intervene.knockout.dlogit", dlogit=r.max_abs_dlogit))
    return "\n\n".join(lines)


def patch_markdown(r: PatchResult, source: str, tokens=(), lang: str = "en") -> str:
    """What the grid shows: the two ends of its scale, then, block by block, the position whose copy carries the
    source's answer furthest (where at least half of the source's own probability comes back)."""
    answer, own = token_md(r.source_answer, lang), token_md(r.candidate, lang)
    lines = [tr(lang, "intervene.patch.ends", source=escape_html(source), answer=answer, own=own,
                p_clean=prob_text(r.clean[1]), p_source=prob_text(r.source[1]))]
    carriers = []  # (first block, last block, position)
    for block in sorted({c.block for c in r.cells}):
        cells = [c for c in r.cells if c.block == block and c.position is not None]
        best = max(cells, key=lambda c: c.source_answer, default=None)
        if best is None or best.source_answer < r.source[1] / 2:
            continue
        if carriers and carriers[-1][2] == best.position and carriers[-1][1] == block - 1:
            carriers[-1] = (carriers[-1][0], block, best.position)
        else:
            carriers.append((block, block, best.position))
    if not carriers:
        lines.append(tr(lang, "intervene.patch.nowhere", answer=answer))
    for first, last, position in carriers:
        token = token_md(tokens[position], lang) if position < len(tokens) else str(position)
        key = "intervene.patch.carrier" if last > first else "intervene.patch.carrier_one"
        lines.append(tr(lang, key, first=first, last=last, position=position, token=token, answer=answer))
    return "\n\n".join(lines)


def patch_cell_markdown(r: PatchResult, cell, lang: str = "en") -> str:
    """The cell just patched: both answers' odds before (this prompt as it is) and after the copy, the top token now."""
    token = token_md(r.tokens[cell.position], lang) if cell.position < len(r.tokens) else str(cell.position)
    return tr(lang, "intervene.patch.cell", position=cell.position, token=token, block=cell.block,
              answer=token_md(r.source_answer, lang), own=token_md(r.candidate, lang), p_answer_before=prob_text(r.clean[1]),
              p_answer=prob_text(cell.source_answer), p_own_before=prob_text(r.clean[0]), p_own=prob_text(cell.candidate),
              top=token_md(cell.top, lang), p_top=prob_text(cell.top_prob))


def steer_markdown(r: SteerResult, lang: str = "en") -> str:
    """The two runs side by side (escaped), where they part, and how big the push was."""
    cell = lambda records: escape_markdown_cell(records[-1].text if records else "").replace("\n", "↵")
    lines = [tr(lang, "intervene.steer.push", block=r.block, scale=r.scale, norm=r.direction_norm * abs(r.scale),
                stream=r.stream_norm, seed=r.seed),
             f"| {tr(lang, 'intervene.steer.plain')} | {tr(lang, 'intervene.steer.steered')} |\n|---|---|\n"
             f"| {cell(r.plain)} | {cell(r.steered)} |"]
    if r.parted_at is None:
        lines.append(tr(lang, "intervene.steer.same"))
    else:
        a, b = r.plain[r.parted_at], r.steered[r.parted_at]
        key = "intervene.steer.parted" if a.draw.u is not None else "intervene.steer.parted_greedy"
        lines.append(tr(lang, key, step=r.parted_at + 1, plain=token_md(a, lang), steered=token_md(b, lang), u=a.draw.u))
    return "\n\n".join(lines)


__all__ = ["attribution_markdown", "knockout_markdown", "patch_cell_markdown", "patch_markdown", "steer_markdown", "target_text", "token_md"]
