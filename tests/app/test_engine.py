"""The Engine tab through its API (gradio_client against the launched app), plus its streaming
generator driven directly on the tiny model, where the chart rate can be pinned down."""

from __future__ import annotations

import html
import json

import pytest
from gradio_client.exceptions import AppError

from model_service.records.settings import Request, SamplingSettings
from playground.engine import tab as engine_tab
from playground.engine.table import COLUMNS, EXAMPLE_ROWS, parse_table


def table(rows) -> dict:
    """The Dataframe's API form."""
    return {"headers": list(COLUMNS), "data": rows, "metadata": None}


def skipped(value) -> bool:
    return isinstance(value, dict) and value.get("__type__") == "update"


@pytest.fixture(scope="module")
def example_run(app_url):
    from gradio_client import Client

    return list(Client(app_url, verbose=False).submit(table(EXAMPLE_ROWS), api_name="/engine_run"))


def test_the_run_has_a_named_endpoint_and_the_table_helpers_are_private(client):
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert "/engine_run" in names
    assert not {"/engine_add_row", "/engine_remove_row", "/engine_example"} & names


def test_the_example_batch_streams_one_update_per_step_until_every_row_stops(example_run):
    statuses = [out[1] for out in example_run]
    assert [s.split("**")[1] for s in statuses] == [f"Step {k}" for k in range(1, len(statuses) + 1)]
    assert "batch of **6** of 6 rows" in statuses[0]
    texts, status, plot, params = example_run[-1]
    assert "All rows finished" in status and "Batch size: 6 rows for steps 1–" in status
    assert texts.count('class="ntp-card ntp-done"') == 6 and "Paris" in texts
    assert "stopped</b> after 3 tokens: stop string" in texts  # row 1 stops at its "\n"
    assert plot["type"] == "plotly"  # the last step's charts are always drawn
    heat = json.loads(plot["plot"])["data"][0]
    assert heat["type"] == "heatmap" and len(heat["z"]) == 6
    assert "next_tokens" in params and "min_p" in params
    assert "penalty" not in params  # no row of the example has one: the penalties' lines stay out


def test_the_batch_shrinks_as_rows_finish(example_run):
    sizes = [int(out[1].split("batch of **")[1].split("**")[0]) for out in example_run]
    assert sizes[0] == 6 and sizes == sorted(sizes, reverse=True) and sizes[-1] < 6


def test_a_seeded_row_shows_what_the_service_gives_it_alone(embedded, example_run):
    numbers, requests = parse_table(EXAMPLE_ROWS)
    q = requests[1]  # seed 1, T 0.8, top-p 0.95
    alone = list(embedded.generate(q.prompt, q.settings, q.max_new_tokens, q.stop))[-1].text
    card = example_run[-1][0].split('data-row="2"')[1].split('data-row="3"')[0]
    assert alone.strip() and html.escape(alone) in card


@pytest.mark.parametrize("rows, needle", [
    ([EXAMPLE_ROWS[0], EXAMPLE_ROWS[1], ["Hi", "hot", 0, 1, 0, "hf", "", 4, ""]], "row 3, temperature must be a number"),
    ([EXAMPLE_ROWS[0], ["Hi", 1, 0, 1, 0, "beam", "", 4, ""]], "row 2, order must be one of"),
    ([EXAMPLE_ROWS[0], ["Hi", 1, 0, 1.5, 0, "hf", "", 4, ""]], "row 2, top-p must be a number between 0 and 1 \\(0 excluded\\), got 1.5"),
    ([EXAMPLE_ROWS[0]] * 9, "at most 8 requests"),
    ([[None] * 9], "no requests"),
    ([EXAMPLE_ROWS[0], ["Hi", 1, 0, 1, 0, "vllm", "", 4, "", 0, 0, 0]],
     "row 2, repetition penalty must be a number between 0 and 10 \\(0 excluded\\), got 0"),
    ([EXAMPLE_ROWS[0], ["Hi", 1, 0, 1, 0, "hf", "", 4, "", 1, 0.5, 0]], "row 2, frequency penalty is not part of the hf order"),
])
def test_bad_tables_come_back_as_clear_errors_and_the_app_keeps_serving(client, rows, needle):
    with pytest.raises(AppError, match=needle):
        client.predict(table(rows), api_name="/engine_run")
    out = client.predict(table([["Hi", 0, 0, 1, 0, "hf", "", 2, ""]]), api_name="/engine_run")
    assert "All rows finished" in out[1]


def test_a_row_too_long_for_the_model_is_named_by_its_table_row(client, embedded):
    long_prompt = "word " * embedded.max_context
    rows = [EXAMPLE_ROWS[0], [None] * 9, [long_prompt, 0, 0, 1, 0, "hf", "", 4, ""]]
    with pytest.raises(AppError, match="row 3: prompt"):
        client.predict(table(rows), api_name="/engine_run")


# ---- the generator itself, on the tiny model -------------------------------------------------------------


def run_fn(service, with_parts=False):
    """The run handler, taking the table and the page's language."""
    import gradio as gr

    with gr.Blocks() as demo:
        language = gr.Radio(["en", "vi"], value="en")
        parts = engine_tab.build_engine_tab(service, language=language)
    fn = next(f.fn for f in demo.fns.values() if f.api_name == "engine_run")
    return (fn, parts) if with_parts else fn


def test_charts_are_rate_limited_but_the_first_and_last_steps_are_always_drawn(tiny_service, monkeypatch):
    monkeypatch.setattr(engine_tab, "CHART_INTERVAL", 3600.0)
    rows = [["ab", 1, 0, 1, 0, "hf", str(s), 6 + s, ""] for s in range(3)]
    run, parts = run_fn(tiny_service, with_parts=True)
    outs = list(run(rows, "en"))  # {component: value}: a component left out is not redrawn
    assert len(outs) == 8  # the longest row: 8 steps
    drawn = [parts["heatmap"] in o for o in outs]
    assert drawn == [True] + [False] * 6 + [True]
    assert all(parts["texts"] in o and parts["status"] in o for o in outs)  # text and status on every step
    monkeypatch.setattr(engine_tab, "CHART_INTERVAL", 0.0)
    assert all(parts["heatmap"] in o for o in run(rows, "en"))


def test_requests_reach_the_service_as_parsed(tiny_service):
    seen = []

    class Spy:
        def generate_batch(self, requests, top_n, report_waiting=False):
            seen.append((list(requests), top_n))
            return tiny_service.generate_batch(requests, top_n=top_n, report_waiting=report_waiting)

    old_row = ["ab", "0.5", None, "", 0.2, "VLLM", "4", "3", " b|\\n"]  # nine cells, from before the penalties
    list(run_fn(Spy())([old_row, ["cd", 1, 0, 1, 0, "llama.cpp", "", 2, "", "1.3", 0.5, ""]], "en"))
    (requests, top_n), = seen
    assert top_n == engine_tab.TOP_N
    assert requests == [Request("ab", SamplingSettings(temperature=0.5, min_p=0.2, seed=4, order="vllm"), 3,
                                (" b", "\n")),
                        Request("cd", SamplingSettings(order="llama.cpp", repetition_penalty=1.3, frequency_penalty=0.5), 2)]


# ---- the page's language ----------------------------------------------------------------------------------


def test_a_run_in_vietnamese_through_the_api(client):
    texts, status, plot, params = client.predict(table([["Hi", 0, 0, 1, 0, "hf", "", 2, ""]]), "vi",
                                                 api_name="/engine_run")
    assert "**Mọi hàng đã xong** sau 2 bước" in status and "<b>Hàng 1</b>" in texts
    assert "đạt số token mới tối đa" in texts and "hàng batch" in params
    layout = json.loads(plot["plot"])["layout"]
    assert layout["xaxis"]["title"]["text"] == "hạng theo logits thô"
    with pytest.raises(AppError, match="bảng chưa có request nào"):
        client.predict(table([[None] * 9]), "vi", api_name="/engine_run")
    with pytest.raises(AppError, match="hàng 2, thứ tự phải là một trong hf, vllm, llama.cpp"):
        client.predict(table([EXAMPLE_ROWS[0], ["Hi", 1, 0, 1, 0, "beam", "", 4, ""]]), "vi", api_name="/engine_run")


def test_a_language_switch_redraws_the_run_and_the_room_without_the_model(tiny_service):
    calls = []

    class Counting:
        def generate_batch(self, *args, **kwargs):
            calls.append(args)
            return tiny_service.generate_batch(*args, **kwargs)

        def room(self):
            return tiny_service.room()

    run, parts = run_fn(Counting(), with_parts=True)
    rows = [["ab", 0, 0, 1, 0, "hf", "", 3, ""], ["cd", 1, 0, 1, 0, "hf", "1", 4, ""]]
    last = list(run(rows, "en"))[-1]
    state, snapshot = last[parts["last_run"]], tiny_service.room()
    shown = {"headers": list(COLUMNS), "data": rows, "metadata": None}
    vi = parts["rerender"]("vi", state, snapshot, shown)
    assert len(calls) == 1  # drawn from the kept run: no second batch
    assert "**Mọi hàng đã xong** sau 4 bước" in vi[parts["status"]]
    assert "<b>Hàng 2</b>" in vi[parts["texts"]] and "hàng batch" in vi[parts["params"]]
    assert vi[parts["heatmap"]].layout.xaxis.title.text == "hạng theo logits thô"
    assert "Mỗi hàng là một request" in vi[parts["help"]] and "Cả phòng, trực tiếp" in vi[parts["room"]]
    assert vi[parts["watch"]].label == "Theo dõi trực tiếp (làm mới mỗi 2 s)"
    table_update = vi[parts["table"]]
    assert table_update.label == "Các request (tối đa 8)"
    assert table_update.value["headers"][5:] == ["thứ tự", "seed", "token tối đa", "dừng", "repetition penalty",
                                                 "frequency penalty", "presence penalty",
                                                 "bộ lấy mẫu khác (tên=giá trị …)"]
    assert table_update.value["data"] == [[*r, 1, 0, 0, ""] for r in rows]  # the learner's cells; old rows' tail off
    # and back: English exactly as the run itself drew it
    en = parts["rerender"]("en", state, None, shown)
    for name in ("status", "texts", "params"):
        assert en[parts[name]] == last[parts[name]], name
    assert en[parts["heatmap"]].to_plotly_json() == last[parts["heatmap"]].to_plotly_json()
    assert skipped(en[parts["room"]])  # no room shown yet: nothing to redraw
    assert len(calls) == 1


def test_before_any_run_a_switch_gives_the_placeholders_in_the_new_language(tiny_service):
    _, parts = run_fn(tiny_service, with_parts=True)
    vi = parts["rerender"]("vi", None, None, {"headers": list(COLUMNS), "data": EXAMPLE_ROWS, "metadata": None})
    assert "**Chạy batch**" in vi[parts["status"]] and "Văn bản của từng hàng" in vi[parts["texts"]]
    assert vi[parts["heatmap"]].layout.annotations[0].text.startswith("Batch sẽ hiện ở đây")
