""""Ban this token": a click on a candidate's bar in the stage chart puts that token in the logit bias at -100,
the engines' "never this token" (OpenAI's and vLLM's logit_bias take -100 for it).

The click is the browser's: BAN_JS hooks each stage chart Plotly draws (its bars carry their token ids as
customdata: stage_panels.py) and writes the id into a small box (common/plot_clicks.py), whose change event runs
`ban` here. The next Generate runs without the token; the "Penalties, bans and logit bias" box shows the ban, and deleting it there lifts it.
"""

from __future__ import annotations

import gradio as gr

from model_service.records import validation
from playground import limits

from ..common.errors import user_error
from ..common.handlers import bind
from ..common.i18n import tr
from ..common.plot_clicks import click_js, clicked_value
from .components import LabComponents

BAN_BIAS = -limits.MAX_LOGIT_BIAS  # -100: the token's probability is 0 to float32's precision

# a click on a bar with a token id (its customdata) writes it into #ban-token's box, whose change event bans it
BAN_JS = click_js("stage-plot", "ban-token", "point.customdata")


def banned(bias_text, token) -> str:
    """The logit bias box's text with `token` at BAN_BIAS (the other entries as they were)."""
    pairs = dict(validation.logit_bias("logit bias", bias_text))
    pairs[validation.number("token", token, integer=True, low=0, high=limits.MAX_TOP_K)] = BAN_BIAS
    return validation.format_logit_bias(sorted(pairs.items()))


def ban(lab: LabComponents, token, bias_text, lang: str = "en") -> dict:
    """A clicked candidate -> the bias box with it banned, and a note saying so."""
    try:
        token = clicked_value("token", token)
        if token is None:
            return {}
        text = banned(bias_text, token)
    except ValueError as e:
        raise user_error(e, lang) from None
    gr.Info(tr(lang, "lab.ban.done", token=int(float(token))))
    return {lab.control("logit_bias"): text}


def wire_ban(lab: LabComponents, box: gr.Textbox) -> None:
    """The clicked id's box -> ban (the page loads BAN_JS once: page.py). change, not input: the script sets the value."""
    box.change(bind(ban, lab), [box, lab.control("logit_bias"), lab.language], [lab.control("logit_bias")], api_visibility="private",
              show_progress="hidden", queue=False)
