"""Greedy's repetition loop, next to a sampled run of the same prompt (lesson 13, "Choice").

Greedy always takes the most likely token: fast and repeatable, and in free writing it can fall
into a loop. One click runs both and measures how much of each text repeats itself.
"""

from __future__ import annotations

import gradio as gr

from model_service import validation
from model_service.settings import SamplingSettings

from ..common.errors import user_error
from ..common.text import escape_html

LOOP_PROMPT = "Write whatever comes to mind:"
LOOP_TOKENS = 120
GREEDY = SamplingSettings(temperature=0)
SAMPLED = SamplingSettings(temperature=0.8, top_p=0.95, seed=0)
RUNS = (("Greedy (temperature 0)", GREEDY), ("Sampled (T 0.8, top-p 0.95, seed 0)", SAMPLED))


def repeated_fraction(text: str, n: int = 4) -> float:
    """Share of the text's word n-grams that already appeared earlier in it (0 = no repetition)."""
    words = text.split()
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return 0.0
    seen, repeats = set(), 0
    for g in grams:
        repeats += g in seen
        seen.add(g)
    return repeats / len(grams)


def panel_html(title: str, text: str, done: bool) -> str:
    rep = repeated_fraction(text)
    note = f"{rep:.0%} of its 4-word sequences repeat earlier ones" if done else "generating…"
    body = escape_html(text).replace("\n", "<br>")
    return (
        f'<div class="ntp-loop"><div class="ntp-loop-title"><b>{escape_html(title)}</b> · {note}</div>'
        f'<div class="ntp-loop-text">{body}</div></div>'
    )


def build_greedy_loop(service, language: gr.Radio | None = None) -> dict:
    """Components inside the current Blocks context."""
    gr.Markdown(
        "Greedy decoding always takes the most likely token. For facts and code that is what you want; in free "
        "writing it can get stuck repeating itself. Run both on the same prompt and compare."
    )
    with gr.Row():
        prompt = gr.Textbox(LOOP_PROMPT, label="Free-writing prompt", scale=3)
        run_btn = gr.Button("Greedy vs sampled", variant="secondary", elem_id="greedy-loop", scale=1)
    with gr.Row():
        greedy_out = gr.HTML(panel_html(RUNS[0][0], "", False), elem_id="loop-greedy")
        sampled_out = gr.HTML(panel_html(RUNS[1][0], "", False), elem_id="loop-sampled")

    panels = (greedy_out, sampled_out)

    def run(text):
        texts = ["", ""]
        for i, (title, settings) in enumerate(RUNS):
            try:
                text = validation.text("free-writing prompt", text)
                records = service.generate(text, settings, max_new_tokens=LOOP_TOKENS, capture=False)
            except (ValueError, RuntimeError) as e:
                raise user_error(e) from None
            for record in records:
                texts[i] = record.text
                yield {panels[i]: panel_html(title, texts[i], record.stop_reason is not None)}
        yield {panel: panel_html(title, t, True) for panel, (title, _), t in zip(panels, RUNS, texts)}

    run_btn.click(run, prompt, [greedy_out, sampled_out], api_name="greedy_loop", show_progress="hidden", preprocess=False)
    return {"prompt": prompt, "greedy": greedy_out, "sampled": sampled_out}
