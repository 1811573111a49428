"""The lab's charts as the page's view draws them (playground/lab/view.py, charts.folded, figures.for_view):
panels that change nothing folded into one note, a log zoom, big text, dark ink."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from playground.common.figures import BIG_TEXT, DARK_GAP, DARK_GRID, DARK_INK, for_view
from playground.lab import charts
from playground.lab.view import View, draw_chart, placeholders, run_chart, stage_chart

from .test_charts import PROBS, make_record

OFF = {**PROBS, "temperature": PROBS["raw"], "min_p": PROBS["top_p"]}  # temperature 1 and min-p change nothing


def font_sizes(node, key="") -> list[float]:
    """Every font size in a figure's JSON (lists flattened)."""
    if isinstance(node, list):
        return [s for item in node for s in font_sizes(item, key)]
    if not isinstance(node, dict):
        return []
    out = []
    for name, value in node.items():
        if name == "size" and key.endswith("font"):
            out += value if isinstance(value, list) else [value]
        else:
            out += font_sizes(value, name)
    return out


def test_panels_that_change_nothing_fold_into_one_note():
    record = make_record(OFF)
    kept, same = charts.folded(record.stages)
    assert [s.name for s in kept] == ["raw", "top_k", "top_p", "final"] and same == ["temperature", "min_p"]
    fig = charts.stage_figure(record, fold=True)
    titles = [a.text for a in fig.layout.annotations]
    assert len(fig.data) == 4 and titles[2].startswith("after top-p<br>kept 2 · mass")  # the lab's two lines
    presenter = charts.stage_figure(record, fold=True, present=True).layout.annotations
    assert presenter[2].text.startswith("after top-p<br>kept 2<br>mass")  # the presenter's: a line per fact
    assert "temperature, min-p: same as the stage before (nothing removed)" in titles
    assert len(charts.stage_figure(record).data) == 6  # unfolded (a sweep's frames): every panel
    assert "giống hệt bước trước" in json.dumps(charts.stage_figure(record, lang="vi", fold=True).to_plotly_json(),
                                                  ensure_ascii=False)


def test_a_greedy_final_panel_is_never_folded_and_cut_bars_stay_grey_after_a_fold():
    record = make_record(OFF, u=None)
    fig = charts.stage_figure(record, fold=True)
    assert fig.layout.annotations[len(fig.data) - 1].text.startswith("final: argmax")
    top_k = fig.data[1]  # after the folded temperature, top-k's cut rows are grey at their height before
    assert list(top_k.marker.color)[3:] == [charts.GREY, charts.GREY] and top_k.x[3] == OFF["temperature"][3]


def test_the_log_zoom_puts_every_panel_on_a_log_axis_from_a_hundredth_of_a_percent():
    fig = charts.stage_figure(make_record(), log=True)
    axes = [fig.layout[f"xaxis{i if i > 1 else ''}"] for i in range(1, 7)]
    assert all(a.type == "log" and tuple(a.range) == (-4, 0.02) for a in axes)
    assert tuple(axes[0].ticktext) == ("0.1%", "10%")
    assert charts.stage_figure(make_record()).layout.xaxis.type in (None, "-", "linear")


def test_big_text_raises_every_font_and_the_run_chart_with_it():
    record = make_record(step=0)
    for fig, big in ((charts.stage_figure(record), stage_chart(record, View(present=True))),
                     (charts.draw_figure(record), draw_chart(record, View(present=True))),
                     (charts.run_figure([record, make_record(step=1)]), run_chart([record, make_record(step=1)], 1,
                                                                                  View(present=True)))):
        assert min(font_sizes(fig.to_plotly_json())) < BIG_TEXT <= min(font_sizes(big.to_plotly_json()))
    assert run_chart([record], 0, View(present=True)).layout.height > charts.run_figure([record]).layout.height
    assert for_view(charts.draw_figure(record)) is not None


def test_the_presenter_puts_one_step_on_one_screen():
    """The stage chart: its ten most probable rows, 20 px each, a height that follows from its lines of text;
    the draw bar a slim strip. At 1280x720 these and the chips end within 720 px of the tab bar (browser test)."""
    many = {name: [0.3, 0.2] + [0.5 / 12] * 12 for name in PROBS}  # 14 candidates
    big = stage_chart(make_record(many), View(present=True))
    margin = big.layout.margin
    assert len(big.data[0].y) == charts.PRESENT_ROWS == 10
    assert big.layout.height == margin.t + 20 * 10 + margin.b <= 340
    assert min(font_sizes(big.to_plotly_json())) >= BIG_TEXT
    assert draw_chart(make_record(), View(present=True)).layout.height <= 100
    assert all(len(p.to_plotly_json()["layout"]) for p in placeholders(View(present=True)))


def test_a_chosen_token_the_presenter_rows_leave_out_gets_its_own_row_with_its_rank():
    many = {name: [0.3, 0.2] + [0.5 / 12] * 12 for name in PROBS}
    record = make_record(many, chosen=12)  # rank 13: past the ten rows
    record = replace(record, chosen_rank=12)
    fig = charts.stage_figure(record, fold=True, rows=charts.PRESENT_ROWS, present=True)
    labels = list(fig.layout.yaxis.ticktext)
    assert len(labels) == 11 and labels[-1].startswith("<b>") and labels[-1].endswith("#13</b>")
    assert all(list(trace.marker.color)[-1] == charts.VERMILLION for trace in fig.data)  # chosen in every panel
    assert charts.top_rows(make_record(), list(make_record().stages), 10)[0] == make_record()  # few rows: as is


def test_the_presenter_key_stands_over_the_labels_and_the_note_wraps_from_the_left_edge():
    plain = make_record()  # every filter off and temperature 1: four stages fold into the note
    record = replace(plain, stages=tuple(s if s.name in ("raw", "final") else replace(
        s, probs=plain.stages[0].probs, kept_count=plain.stages[0].kept_count) for s in plain.stages))
    fig = charts.stage_figure(record, fold=True, rows=charts.PRESENT_ROWS, present=True)
    key, note = fig.layout.annotations[-2:]
    assert key.text.count("<br>") == 2 and "removed" in key.text and "by this stage" not in key.text
    assert (key.x, key.xanchor, key.y, key.yanchor) == (0, "right", 1, "bottom")
    assert note.text.startswith("temperature, top-k, top-p, min-p: same as")
    assert all(len(line) <= 44 for line in note.text.split("<br>")) and note.xshift == 6 - fig.layout.margin.l
    assert fig.layout.margin.b == 22 + 18 * len(note.text.split("<br>")) + 6
    assert tuple(fig.layout.xaxis.ticktext) == ("0", "50%", "")  # a 14 px "100%" would run into the next "0"
    vietnamese = charts.stage_figure(record, lang="vi", fold=True, rows=charts.PRESENT_ROWS, present=True)
    assert "bị cắt bỏ" in vietnamese.layout.annotations[-2].text


@pytest.mark.parametrize("text, width", [("a b c", 3), ("one two three four five six seven", 9),
                                         ("averyveryverylongword and more", 8)])
def test_wrapped_breaks_between_words_only(text, width):
    lines = charts.wrapped(text, width).split("<br>")
    assert " ".join(lines) == text
    assert all(len(line) <= width or " " not in line for line in lines)


def test_dark_charts_let_the_page_through_with_light_ink():
    fig = stage_chart(make_record(), View(dark=True))
    assert fig.layout.paper_bgcolor == fig.layout.plot_bgcolor == "rgba(0,0,0,0)"
    assert fig.layout.font.color == DARK_INK and fig.layout.xaxis.gridcolor == DARK_GRID
    draw = draw_chart(make_record(), View(dark=True))
    light_draw = charts.draw_figure(make_record())
    assert draw.data[0].textfont.color == light_draw.data[0].textfont.color  # text inside a bar keeps its contrast
    assert draw.data[0].marker.line.color == DARK_GAP  # the gaps between segments are the dark page, not white
    assert all(p.layout.paper_bgcolor == "rgba(0,0,0,0)" for p in placeholders(View(dark=True)))
    light = stage_chart(make_record())
    assert light.to_json() == charts.stage_figure(make_record(), fold=True).to_json()  # the normal view: folded only


@pytest.mark.parametrize("present", [False, True])
def test_on_a_phone_the_panels_stand_one_under_another_each_the_screens_width_with_its_labels(present):
    record = make_record(OFF)
    fig = stage_chart(record, View(present=present, narrow=True)).to_plotly_json()
    layout, panels = fig["layout"], len(fig["data"])
    assert panels == 4  # folded as in every view: temperature and min-p change nothing
    xs = [layout[f"xaxis{i if i > 1 else ''}"] for i in range(1, panels + 1)]
    ys = [layout[f"yaxis{i if i > 1 else ''}"] for i in range(1, panels + 1)]
    assert all(x.get("domain", [0, 1]) == [0, 1] for x in xs)  # every panel the figure's whole width
    tops = [y["domain"][1] for y in ys]
    assert tops[0] == 1 and tops == sorted(tops, reverse=True)  # top to bottom, in the pipeline's order
    assert all(ys[i]["domain"][0] > ys[i + 1]["domain"][1] for i in range(panels - 1))  # room for a title between
    assert all(y.get("showticklabels", True) and y["ticktext"] for y in ys)  # each panel names its candidates
    titles = layout["annotations"][:panels]
    assert [t["y"] for t in titles] == tops and titles[2]["text"].startswith("after top-p<br>kept 2 · mass")
    assert min(font_sizes(fig)) >= (BIG_TEXT if present else 12)
    # the height follows from the panels: one more panel, a taller figure
    unfolded = stage_chart(record, View(present=present, narrow=True), fold=False).to_plotly_json()["layout"]
    assert unfolded["height"] > layout["height"] >= 4 * 10 * 15
    note = layout["annotations"][panels + 1]["text"]  # after the key: wrapped to a phone's width
    assert note.startswith("temperature, min-p: same as the stage") and max(map(len, note.split("<br>"))) <= 40


def test_a_phone_sees_the_ten_likeliest_rows_and_the_chosen_token_off_the_list_keeps_its_row():
    many = {name: [0.5 / 30] * 30 for name in PROBS}
    fig = stage_chart(make_record(many, chosen=25), View(narrow=True))
    labels = fig.layout.yaxis.ticktext
    assert len(labels) == charts.PRESENT_ROWS + 1 and labels[-1].endswith("#26</b>")
