"""The Forward pass tab in Vietnamese: every text panel and figure reads Vietnamese with lang="vi",
English stays the default, and a change of language redraws from the trace without the model.

Hand-made Trace records (test_charts.make_trace), no model, no browser."""

from __future__ import annotations

import dataclasses
import re
import string
from pathlib import Path

import gradio as gr
import pytest

from playground.common import i18n
from playground.forward import charts as tc
from playground.forward import tab as ft
from playground.forward import text as tt

from .test_charts import make_attention, make_trace

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "playground" / "forward"
EN, VI = i18n.catalogue("en"), i18n.catalogue("vi")


def variants():
    """Traces that take every branch of the text: begin-of-text marker, scaled and cut embedding, a
    last snapshot that is not normed, a cut and sliding attention window, no attention, a soft-cap."""
    t = make_trace()
    yield dataclasses.replace(t, starts_with_bos=True, lens=dataclasses.replace(t.lens, softcap=30.0))
    yield dataclasses.replace(t, embedding=dataclasses.replace(t.embedding, scale=24.0, first_position=2))
    yield dataclasses.replace(t, residual=dataclasses.replace(t.residual, last_is_normed=False, final_norm=None,
                                                              positions=(1, 2, 3, 4)))
    cut = dataclasses.replace(make_attention(t=10, start=6), sliding_window=3)
    yield dataclasses.replace(make_trace(10), attention=cut)
    yield dataclasses.replace(t, attention=None, attention_note="no attention module found")
    yield make_trace(1)


def texts(trace, lang: str) -> list[str]:
    return [tt.tokens_html(trace, lang), tt.input_markdown(trace, lang), tt.shapes_markdown(trace, lang),
            tt.embedding_markdown(trace, lang=lang), tt.stream_markdown(trace, lang), tt.output_markdown(trace, lang),
            tt.cost_markdown(trace, lang), tt.lens_markdown(trace, lang),
            tt.attention_markdown(trace.attention, trace.attention_note, lang), ft.status_line(trace, lang)]


def figures(trace, lang: str) -> list:
    return [tc.residual_figure(trace, lang=lang), tc.predictions_figure(trace, lang), tc.teacher_figure(trace, lang=lang),
            tc.cost_figure(trace, lang=lang), tc.lens_figure(trace, lang),
            tc.attention_figure(trace.attention, None, trace.attention_note, lang),
            tc.attention_figure(trace.attention, 1, trace.attention_note, lang)]


def words(fig) -> str:
    """Every piece of text a figure shows or hovers: titles, ticks, annotations, legend, hover, cells."""
    found = []

    def walk(node, key=""):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list | tuple):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and key in {"text", "ticktext", "hovertemplate", "hovertext", "name", "customdata"}:
            found.append(node)

    walk(fig.to_plotly_json())
    return "\n".join(found)


# The technical terms the lessons keep in English inside Vietnamese prose (and code: bf16, float32, kv).
KEPT = set("""
attention batch bf block causal chat cpu decoding eager embedding engine final float forcing forward greedy grouped
head heatmap hidden id key kv lab layer lens lm log logit logits marker mask merge mlp model ms nats neural norm pass
perplexity prefill prompt query request residual shape sliding soft stream sub teacher template tensor token tokenizer
top value vocabulary window""".split())
NOT_PROSE = re.compile(r"<style>.*?</style>|<[^>]*>|%\{[^}]*\}|class=\"[^\"]*\"|`[^`]*`|\w*_\w*(\[\w*\])?", re.S)


def prose_words(text: str) -> list[str]:
    """The words a reader sees as prose: not markup, hover placeholders, code spans or identifiers."""
    return [w for w in re.findall(r"[A-Za-z]+", NOT_PROSE.sub(" ", text)) if len(w) > 1]


def english_words(trace) -> set[str]:
    """The English words of the forward.* strings, less the kept terms and the trace's own text (its
    pieces, names, and the service's note on attention, which the service writes in English)."""
    literal = [lit for k in EN if k.startswith("forward.") for lit, *_ in string.Formatter().parse(EN[k])]
    own = [t.piece for t in trace.tokens] + [trace.lens.target.piece, trace.model, trace.device, trace.attention_note]
    return {w.lower() for w in prose_words(" ".join(literal))} - KEPT - {w.lower() for w in prose_words(" ".join(own))}


def leaked(trace, texts) -> set[str]:
    english = english_words(trace)
    return {w for text in texts for w in prose_words(text) if w.lower() in english}


def test_the_package_uses_only_keys_both_catalogues_have_and_every_forward_key_is_used():
    source = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.glob("*.py"))
    used = set(re.findall(r"""["'](forward\.[a-z0-9_.]+)["']""", source))  # also keys chosen by a condition
    assert used and used <= set(EN) and used <= set(VI), sorted(used - set(EN))
    assert {k for k in EN if k.startswith("forward.")} == used


@pytest.mark.parametrize("n", range(6))
def test_text_panels_read_vietnamese_and_english_by_default(n):
    trace = list(variants())[n]
    vi, en = texts(trace, "vi"), texts(trace, "en")
    assert [tt.input_markdown(trace), tt.cost_markdown(trace), ft.status_line(trace)] == [en[1], en[6], en[9]]
    assert english_words(trace) >= {"after", "matrix", "position", "rows", "shows", "never"}  # the check can fail
    assert not leaked(trace, vi), leaked(trace, vi)
    assert vi != en and not [text for text in vi if re.search(r"\{[a-z_]+(:[.,0-9a-z%]*)?\}", text)]  # placeholders filled


def test_vietnamese_panels_say_what_the_english_ones_say():
    t = list(variants())[0]
    assert "ID đầu tiên là marker bắt đầu văn bản" in tt.input_markdown(t, "vi")
    assert "= 3 block + 1, mỗi cái (1, 5, 8)" in tt.shapes_markdown(t, "vi")
    assert "| vị trí | token | hàng (= ID) |" in tt.embedding_markdown(t, lang="vi")
    assert "| 0 | <code>The</code> | 0 |" in tt.embedding_markdown(t, lang="vi")  # the numbers do not change
    assert "5 × 1,000 × 4 B = **20 kB** ở float32" in tt.cost_markdown(t, "vi")  # nor their formatting
    assert "vươn lên đứng đầu sau block 3" in tt.lens_markdown(t, "vi") and "soft-cap ở 30" in tt.lens_markdown(t, "vi")
    assert "Block 2 trong số 3: 4 head dùng chung 2 head key/value" in tt.attention_markdown(t.attention, lang="vi")
    assert "Đã lần theo **5 token** qua 3 block của toy" in ft.status_line(t, "vi")
    cut = list(variants())[3]
    assert "cột *trước đó*" in tt.attention_markdown(cut.attention, lang="vi")
    assert "3 key gần nhất" in tt.attention_markdown(cut.attention, lang="vi")
    assert "không khớp với final norm" in tt.stream_markdown(list(variants())[2], "vi")


def test_the_chips_say_how_many_tokens_are_hidden_and_escape_the_piece_in_vietnamese_too():
    long = make_trace(300)
    assert "… 44 token trước đó …" in tt.tokens_html(long, "vi") and "… 44 earlier tokens …" in tt.tokens_html(long)
    special = dataclasses.replace(make_trace(), tokens=(dataclasses.replace(make_trace().tokens[0], piece='"<b>', special=True),
                                                        *make_trace().tokens[1:]))
    html = tt.tokens_html(special, "vi")
    assert "token đặc biệt" in html and "<b>" not in html.split("</style>")[1]


@pytest.mark.parametrize("n", range(6))
def test_figures_read_vietnamese_and_english_by_default(n):
    trace = list(variants())[n]
    shown = [words(fig) for fig in figures(trace, "vi")]
    assert not leaked(trace, shown), leaked(trace, shown)
    assert [fig.to_plotly_json() for fig in figures(trace, "en")] == [
        fig.to_plotly_json() for fig in (tc.residual_figure(trace), tc.predictions_figure(trace), tc.teacher_figure(trace),
                                         tc.cost_figure(trace), tc.lens_figure(trace),
                                         tc.attention_figure(trace.attention, None, trace.attention_note),
                                         tc.attention_figure(trace.attention, 1, trace.attention_note))]


def test_chart_titles_axes_and_hover_in_vietnamese():
    t = make_trace()
    residual = tc.residual_figure(t, lang="vi")
    assert [a.text for a in residual.layout.annotations][0] == "‖stream‖ sau mỗi block"
    assert "sau final norm" in residual.layout.yaxis.ticktext and "block 1" in residual.layout.yaxis.ticktext
    assert "sau block 1 · vị trí 0 'The'" in residual.data[0].text[1][0]
    predictions = tc.predictions_figure(t, "vi")
    assert predictions.layout.annotations[0].text == "← quá trình sinh<br>chỉ dùng hàng này"
    assert predictions.layout.xaxis.ticktext[-1] == "kế tiếp thật" and "bắt đầu từ đây" in predictions.data[0].text[-1][-1]
    teacher = tc.teacher_figure(t, lang="vi")
    assert teacher.layout.yaxis.title.text == "p(kế tiếp thật)" and "hạng 1" in teacher.data[0].hovertext[0]
    cost = tc.cost_figure(t, lang="vi")
    assert cost.layout.yaxis.title.text == "bộ nhớ cho logits" and cost.data[0].name == "mọi vị trí, float32"
    assert cost.layout.annotations[0].text == "prompt này: 20 kB"
    lens = tc.lens_figure(t, "vi")
    assert lens.layout.annotations[1].text == "p(␣Paris), đáp án cuối cùng"
    attention = tc.attention_figure(t.attention, 2, lang="vi")
    assert attention.layout.annotations[0].text == "head 3 · kv 2"  # short: nine titles share a phone's width
    assert attention.data[0].colorbar.title.text == "trọng số" and "bị mask" in attention.data[0].text[0][1]
    assert "Không có attention" in tc.attention_figure(None, lang="vi").layout.annotations[0].text


def test_a_change_of_language_redraws_from_the_state_without_the_model():
    """The tab's language.change handler: placeholders before any trace, every view of the kept trace
    after one; the service is never asked (it is None here)."""
    with gr.Blocks() as demo:
        language = gr.Radio([("English", "en"), ("Tiếng Việt", "vi")], value="en")
        tab = ft.build_forward_tab(None, language=language)
    (redraw,) = [f for f in demo.fns.values() if f.name == "change_language"]
    outputs = {c._id: c for c in redraw.outputs}
    by_id = {getattr(c, "elem_id", None): c for c in outputs.values()}

    before = redraw.fn("vi", None, -1)
    assert before[by_id["fw-status"]] == VI["forward.status.ready"]
    assert before[by_id["fw-input"]] == VI["forward.lesson.input"]
    assert "residual stream sẽ hiện ở đây" in words(before[by_id["fw-residual"]])
    assert before[by_id["fw-head"]]["choices"] == [("mọi head", -1)]

    after = redraw.fn("vi", make_trace(), 1)
    assert set(after) <= set(outputs.values()) and tab["block"] not in after  # the slider stays as it is
    assert after[by_id["fw-status"]] == ft.status_line(make_trace(), "vi")
    assert "sau mỗi block" in words(after[by_id["fw-residual"]])
    assert after[by_id["fw-head"]]["value"] == 1 and after[by_id["fw-head"]]["choices"][2] == ("head 2", 1)
    assert redraw.fn("en", make_trace(), -1)[by_id["fw-status"]] == ft.status_line(make_trace())
    assert by_id["fw-lesson-numbers"] not in before  # no numbers known yet: the watcher draws the table


def test_a_change_of_language_redraws_the_lesson_numbers_it_was_given():
    from .test_lesson_numbers import info

    with gr.Blocks() as demo:
        language = gr.Radio([("English", "en"), ("Tiếng Việt", "vi")], value="en")
        ft.build_forward_tab(None, language=language)
    (redraw,) = [f for f in demo.fns.values() if f.name == "change_language"]
    (table,) = [c for c in redraw.outputs if getattr(c, "elem_id", None) == "fw-lesson-numbers"]
    assert "(30 block + 1)" in redraw.fn("vi", None, -1, (info(), 5))[table]
    assert "(30 blocks + 1)" in redraw.fn("en", make_trace(), -1, (info(), 5))[table]


def test_what_the_server_redraws_starts_as_text_never_as_a_translation_key():
    """Gradio's frontend translates a T() value again at every switch of language, over whatever the server
    set since: a trace's panels would fall back to the bare lesson text."""
    with gr.Blocks() as demo:
        language = gr.Radio([("English", "en"), ("Tiếng Việt", "vi")], value="en")
        ft.build_forward_tab(None, language=language)
    (redraw,) = [f for f in demo.fns.values() if f.name == "change_language"]
    keyed = [c.elem_id for c in redraw.outputs if "__i18n__" in str(getattr(c, "value", ""))]  # T()'s marker
    assert not keyed, keyed
    status = next(c for c in redraw.outputs if c.elem_id == "fw-status")
    assert status.value == EN["forward.status.ready"]


def test_the_lesson_prompt_follows_the_language_unless_the_learner_typed_another():
    with gr.Blocks() as demo:
        language = gr.Radio([("English", "en"), ("Tiếng Việt", "vi")], value="en")
        tab = ft.build_forward_tab(None, language=language)
    (redraw,) = [f for f in demo.fns.values() if f.name == "change_language"]
    prompt = tab["prompt"]
    assert prompt in redraw.outputs
    assert redraw.fn("vi", None, -1, None, "The capital of France is")[prompt] == "Thủ đô của Pháp là"
    assert redraw.fn("en", make_trace(), -1, None, "Thủ đô của Pháp là")[prompt] == "The capital of France is"
    assert prompt not in redraw.fn("vi", make_trace(), -1, None, "Once upon a time")  # typed: kept
    assert prompt not in redraw.fn("vi", None, -1, None, "Thủ đô của Pháp là")  # already the language's


def test_opening_the_tab_traces_the_lesson_prompt_of_the_pages_language():
    """The tab's select event can reach the server before the language's redraw swapped the box."""
    from types import SimpleNamespace

    asked = []

    def trace(text, chat, block=None):
        asked.append(text)
        return dataclasses.replace(make_trace(), prompt=text)

    service = SimpleNamespace(trace=trace, info=SimpleNamespace(num_layers=3, name="toy"))
    with gr.Blocks():
        language = gr.Radio([("English", "en"), ("Tiếng Việt", "vi")], value="en")
        tab = ft.build_forward_tab(service, language=language)
    prompt = tab["prompt"]
    assert prompt in tab["select_outputs"]
    out = tab["trace_if_new"]("The capital of France is", False, 2, -1, None, "vi")
    assert asked == ["Thủ đô của Pháp là"] and out[prompt] == "Thủ đô của Pháp là"
    assert "Đã lần theo" in out[tab["status"]]
    out = tab["trace_if_new"]("Once upon a time", False, 2, -1, None, "vi")  # typed: traced as it is
    assert asked[-1] == "Once upon a time" and prompt not in out
    shown = dataclasses.replace(make_trace(), prompt="Thủ đô của Pháp là")
    out = tab["trace_if_new"]("The capital of France is", False, 2, -1, shown, "vi")  # already traced: no model work
    assert len(asked) == 2 and out[prompt] == "Thủ đô của Pháp là"


def test_a_language_redraw_that_read_no_trace_draws_the_trace_its_page_made_meanwhile():
    """The page opens the tab (its select traces) while it sets its language: the redraw read the State before
    the trace ended, and its placeholders must not land over the trace (clean run 58). Another page's trace is
    not this page's."""
    from types import SimpleNamespace

    service = SimpleNamespace(trace=lambda text, chat, block=None: dataclasses.replace(make_trace(), prompt=text),
                              info=SimpleNamespace(num_layers=3, name=make_trace().model))
    with gr.Blocks() as demo:
        language = gr.Radio([("English", "en"), ("Tiếng Việt", "vi")], value="en")
        tab = ft.build_forward_tab(service, language=language)
    (redraw,) = [f for f in demo.fns.values() if f.name == "change_language"]
    page, other = SimpleNamespace(session_hash="page-a"), SimpleNamespace(session_hash="page-b")
    made = tab["trace_if_new"]("The capital of France is", False, 2, -1, None, "vi", page)
    assert "Đã lần theo" in made[tab["status"]]
    late = redraw.fn("vi", None, -1, None, "Thủ đô của Pháp là", page)  # its State read before the trace ended
    assert late[tab["status"]] == made[tab["status"]]
    assert redraw.fn("vi", None, -1, None, "Thủ đô của Pháp là", other)[tab["status"]] == VI["forward.status.ready"]
    service.info.name = "another model"  # the page's trace is of a model no longer served: placeholders
    assert redraw.fn("vi", None, -1, None, "Thủ đô của Pháp là", page)[tab["status"]] == VI["forward.status.ready"]
