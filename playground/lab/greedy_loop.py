"""Greedy's repetition loop, next to a sampled run of the same prompt (lesson 13, "Choice").

Greedy always takes the most likely token: fast and repeatable, and in free writing it can fall
into a loop. One click runs both and measures how much of each text repeats itself.
"""

from __future__ import annotations

import gradio as gr

from model_service.records import validation
from model_service.records.settings import SamplingSettings

from ..common.errors import user_error
from ..common.i18n import T, swapped_default, tr
from ..common.text import escape_html
from .request import field_labels

LOOP_PROMPTS = {"en": "Write whatever comes to mind:", "vi": "Hãy viết bất cứ điều gì nảy ra trong đầu:"}
LOOP_PROMPT = LOOP_PROMPTS["en"]
LOOP_TOKENS = 120
GREEDY = SamplingSettings(temperature=0)
SAMPLED = SamplingSettings(temperature=0.8, top_p=0.95, seed=0)
RUNS = (("greedy.title.greedy", GREEDY), ("greedy.title.sampled", SAMPLED))  # (title's key, settings)


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


def panel_html(title_key: str, text: str, done: bool, lang: str = "en") -> str:
    """One run's panel: its title, how much of it repeats (once done), and the text (escaped)."""
    rep = repeated_fraction(text)
    note = tr(lang, "greedy.repeats", percent=f"{rep:.0%}") if done else tr(lang, "greedy.generating")
    body = escape_html(text).replace("\n", "<br>")
    return (
        f'<div class="ntp-loop"><div class="ntp-loop-title"><b>{escape_html(tr(lang, title_key))}</b> · {note}</div>'
        f'<div class="ntp-loop-text">{body}</div></div>'
    )


def build_greedy_loop(service, language: gr.Radio | None = None) -> dict:
    """Components inside the current Blocks context. `language`: the page's picker (None: English)."""
    language = language if language is not None else gr.State("en")
    gr.Markdown(T("greedy.intro"))
    with gr.Row():
        prompt = gr.Textbox(LOOP_PROMPT, label=T("greedy.prompt"), scale=3, elem_id="loop-prompt")
        run_btn = gr.Button(T("greedy.run"), variant="secondary", elem_id="greedy-loop", scale=1)
    with gr.Row():
        greedy_out = gr.HTML(panel_html(RUNS[0][0], "", False), elem_id="loop-greedy")
        sampled_out = gr.HTML(panel_html(RUNS[1][0], "", False), elem_id="loop-sampled")
    # what the panels show, kept so that a change of language redraws them without running the model
    shown = gr.State(("", "", False, False))

    panels = (greedy_out, sampled_out)

    def run(text, lang):
        texts, done = ["", ""], [False, False]
        for i, (title, settings) in enumerate(RUNS):
            try:
                text = validation.text("free-writing prompt", text)
                records = service.generate(text, settings, max_new_tokens=LOOP_TOKENS, capture=False)
            except (ValueError, RuntimeError) as e:
                raise user_error(e, lang, field_labels(lang)) from None
            for record in records:
                texts[i], done[i] = record.text, record.stop_reason is not None
                yield {panels[i]: panel_html(title, texts[i], done[i], lang), shown: (*texts, *done)}
        yield {
            **{panel: panel_html(title, t, True, lang) for panel, (title, _), t in zip(panels, RUNS, texts)},
            shown: (*texts, True, True),
        }

    def rerender(lang, state, current_prompt):
        """The page's language changed: the same texts in the new words, and the default prompt swapped."""
        texts, done = state[:2], state[2:]
        out = {panel: panel_html(title, t, d, lang) for panel, (title, _), t, d in zip(panels, RUNS, texts, done)}
        swapped = swapped_default(current_prompt, lang, LOOP_PROMPTS)
        return out | ({prompt: swapped} if swapped is not None else {})

    run_btn.click(run, [prompt, language], [greedy_out, sampled_out, shown], api_name="greedy_loop",
                  show_progress="hidden", preprocess=False)
    if isinstance(language, gr.Radio):
        language.change(rerender, [language, shown, prompt], [greedy_out, sampled_out, prompt],
                        api_visibility="private", show_progress="hidden", trigger_mode="multiple")
    return {"prompt": prompt, "greedy": greedy_out, "sampled": sampled_out}
