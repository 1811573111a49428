"""The LM head, drawn from an LmHeadView record (or its dict): why the top token scores highest.

Every logit is h · w = ‖h‖ · ‖w‖ · cos(h, w). ‖h‖ is shared by all tokens, so the bars of logits
and the bars of cos tell the lesson's story: rows that point the way h points get high logits. The
Markdown gives the head's size, which the lesson stresses because it is read at every decode step.
Pure functions, no torch: the record may come from another process or from JSON; their words are in
`lang` (the catalogues' strings, English by default), their numbers formatted the same in every language.
"""

from __future__ import annotations

from collections.abc import Mapping

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from model_service.records.step import Token

from ..common.colours import BLUE as MUTED
from ..common.colours import VERMILLION as ACCENT
from ..common.figures import base_layout
from ..common.i18n import tr
from ..common.text import Shown, big_count, nbytes, piece_hover, piece_label, piece_markdown, show_token, unique_labels

LLAMA_8B = (128256, 4096)  # the lesson's reference head: Llama-3.1-8B


def _as_dict(view) -> dict:
    return view.to_dict() if hasattr(view, "to_dict") else dict(view)


def _shown(c: dict, pieces: Mapping | None, before: bytes, lang: str = "en") -> Shown:
    """A candidate as it reads after the text so far (" Paris" -> "␣Paris", a split character's piece
    as the character), or its id. pieces: id -> Token (or its dict, or its piece as text)."""
    token = (pieces or {}).get(c["id"])
    if token is None:
        token = (pieces or {}).get(str(c["id"]))  # JSON turns int keys into strings
    if token is None:
        return Shown(f"#{c['id']}", hover=f"#{c['id']}")
    if isinstance(token, str):
        token = Token(c["id"], token)
    elif isinstance(token, Mapping):
        token = Token(**{"id": c["id"], **token})
    return show_token(token, before, lang=lang)


def lm_head_figure(view, pieces: Mapping | None = None, height: int = 380, lang: str = "en",
                   before: bytes = b"") -> go.Figure:
    """Two panels per candidate token: its logit (hover: ‖h‖ · ‖w‖ · cos), and cos(h, w_row).
    before: the bytes generated before this position (the candidates are read after them)."""
    v = _as_dict(view)
    cands = v["candidates"]
    shown = [_shown(c, pieces, before, lang) for c in cands]
    labels = unique_labels([piece_label(sh, 24) for sh in shown])
    top = max(range(len(cands)), key=lambda i: cands[i]["logit"]) if cands else -1
    colours = [ACCENT if i == top else MUTED for i in range(len(cands))]
    hover = [
        tr(lang, "softmax.head.hover", token=piece_hover(sh), logit=f"{c['logit']:.3f}", h=f"{c['norm_h']:.2f}",
           w=f"{c['norm_w']:.3f}", cos=f"{c['cos']:.4f}", bias=f" + bias {c['bias']:.3f}" if c["bias"] else "",
           model_logit=f"{c['model_logit']:.3f}", p=f"{c['prob']:.1%}", rank=c["rank"] + 1)
        for sh, c in zip(shown, cands)
    ]
    titles = (tr(lang, "softmax.head.fig.logit"), tr(lang, "softmax.head.fig.cos", norm=f"{v['hidden_norm']:.2f}"))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.14, subplot_titles=titles)
    fig.update_annotations(font_size=13)  # Plotly's 16 px: the cos title was cut off on a 390 px phone
    fig.add_trace(
        go.Bar(x=labels, y=[c["logit"] for c in cands], marker_color=colours, hovertext=hover,
               hoverinfo="text", text=[f"{c['logit']:.2f}" for c in cands], textposition="outside",
               cliponaxis=False),
        row=1, col=1,
    )
    fig.add_trace(
        go.Bar(x=labels, y=[c["cos"] for c in cands], marker_color=colours, hovertext=hover,
               hoverinfo="text", text=[f"{c['cos']:.3f}" for c in cands], textposition="outside",
               cliponaxis=False),
        row=2, col=1,
    )
    cos_values = [c["cos"] for c in cands] or [0.0]
    fig.update_yaxes(range=[min(0.0, min(cos_values)) * 1.2, max(0.0, max(cos_values)) * 1.25 or 1], row=2, col=1)
    return base_layout(fig, height, dict(l=50, r=20, t=40, b=40), bargap=0.3)


def lm_head_markdown(view, pieces: Mapping | None = None, lang: str = "en", before: bytes = b"") -> str:
    """Size of the head (V × d, parameters, bytes read per step), the Llama-3.1-8B comparison, and,
    if there are candidates, a table showing logit = ‖h‖ · ‖w‖ · cos."""
    v = _as_dict(view)
    V, d = v["vocab_size"], v["hidden_size"]
    share = v["head_parameters"] / v["model_parameters"] if v.get("model_parameters") else None
    loaded = "" if v["dtype"] == "bfloat16" else tr(
        lang, "softmax.head.size.loaded", size=nbytes(v["bytes_model_dtype"]), dtype=v["dtype"])
    lines = [tr(lang, "softmax.head.size", vocab=f"{V:,}", hidden=f"{d:,}", dims=d,
                params=big_count(v["head_parameters"]), bf16=nbytes(v["bytes_bf16"]), loaded=loaded)]
    if share is not None:
        lines.append(tr(lang, "softmax.head.share.tied" if v["tied"] else "softmax.head.share.untied",
                        share=f"{share:.0%}", params=big_count(v["model_parameters"])))
    lv, ld = LLAMA_8B
    ratio = lv * ld / v["head_parameters"]
    lines.append(tr(lang, "softmax.head.llama", vocab=f"{lv:,}", hidden=f"{ld:,}",
                    ratio=tr(lang, "softmax.head.llama.ratio", ratio=f"{ratio:.0f}") if ratio >= 1.5 else ""))
    if v.get("softcap"):
        lines.append(tr(lang, "softmax.head.softcap", cap=f"{v['softcap']:g}"))
    if v.get("has_bias"):
        lines.append(tr(lang, "softmax.head.bias"))
    if not v.get("matches_model", True):
        lines.append(tr(lang, "softmax.head.mismatch", diff=f"{v['max_abs_diff']:.3g}"))
    if v["candidates"]:
        lines += ["", tr(lang, "softmax.head.formula", norm=f"{v['hidden_norm']:.2f}"), ""]
        lines += [tr(lang, "softmax.head.table.header"), "|:--|--:|--:|--:|--:|--:|"]
        for c in v["candidates"]:
            token = piece_markdown(_shown(c, pieces, before, lang))
            lines.append(
                f"| {token} | {c['norm_w']:.3f} | {c['cos']:.4f} | {c['recomputed']:.3f} | "
                f"{c['model_logit']:.3f} | {c['prob']:.1%} |"
            )
    return "\n".join(lines)


__all__ = ["lm_head_figure", "lm_head_markdown"]
