"""The lab's charts as the page's view draws them (playground/lab/view.py, charts.folded, figures.for_view):
panels that change nothing folded into one note, a log zoom, big text, dark ink."""

from __future__ import annotations

import json

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
    assert len(fig.data) == 4 and titles[2].startswith("after top-p<br>kept 2<br>mass")  # a line per fact
    assert "temperature, min-p: same as the stage before (nothing removed)" in titles
    assert len(charts.stage_figure(record).data) == 6  # the lab's normal view keeps every panel
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


def test_big_text_raises_every_font_and_the_chart_with_it():
    record = make_record(step=0)
    for fig, big in ((charts.stage_figure(record), stage_chart(record, View(present=True))),
                     (charts.draw_figure(record), draw_chart(record, View(present=True))),
                     (charts.run_figure([record, make_record(step=1)]), run_chart([record, make_record(step=1)], 1,
                                                                                  View(present=True)))):
        assert min(font_sizes(fig.to_plotly_json())) < BIG_TEXT <= min(font_sizes(big.to_plotly_json()))
        assert big.layout.height > fig.layout.height
    assert for_view(charts.draw_figure(record)) is not None


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
    assert light.to_json() == charts.stage_figure(make_record()).to_json()  # the normal view is untouched
