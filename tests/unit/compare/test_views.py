"""The Compare tab's views: hand-made records with known numbers in, HTML and figure structure out."""

from __future__ import annotations

from dataclasses import replace

from model_service.records.settings import Request, SamplingSettings
from playground.compare.columns import CompareRun, Comparison
from playground.compare.views import columns_html, overlay_figure, settings_text, status_markdown, step_table_html
from tests.unit.lab.test_charts import make_record


def two_columns(u=0.8) -> CompareRun:
    """Column A keeps ' Paris' at step 2; column B (flatter, same u) lands on ' the'."""
    a = [make_record(step=0, u=u), make_record(step=1, chosen=0, u=u)]
    flat = {"raw": [0.5, 0.2, 0.15, 0.1, 0.05], "final": [0.3, 0.25, 0.2, 0.15, 0.1]}
    b = [make_record(step=0, u=u), make_record(flat, step=1, chosen=1, u=u, low=0.3, high=0.55)]
    comparison = Comparison("<i>p</i>", 5, 2, (Request("p", SamplingSettings(temperature=0.5, seed=5)),
                                              Request("p", SamplingSettings(temperature=1.5, top_k=40, seed=5))))
    return CompareRun(comparison, [a, b], done=True, steps=2, batch_sizes=[2, 2])


def test_the_columns_show_their_settings_and_outline_the_first_divergent_step():
    html = columns_html(two_columns())
    assert html.count('class="ntp-col"') == 2 and "T 0.5 · hf" in html and "T 1.5 · top-k 40 · hf" in html
    assert html.count("ntp-div") == 2 + 1  # the style rule, and step 2 in each column
    assert 'class="ntp-ctok ntp-div" data-step="1"' in html
    assert "u=0.800" in html  # the shared u is in each chip's hover


def test_a_visitors_piece_is_escaped():
    run = two_columns()
    run.columns[0][0] = replace(run.columns[0][0], piece="<img src=x>")
    assert "<img src=x>" not in columns_html(run) and "&lt;img" in columns_html(run)


def test_the_status_names_the_step_where_the_columns_part_or_says_they_agree():
    run = two_columns()
    assert "step 2" in status_markdown(run) and "seed **5**" in status_markdown(run)
    run.columns[1] = run.columns[0]
    assert "same tokens" in status_markdown(run)
    assert "bước" in status_markdown(two_columns(), "vi")


def test_the_step_table_shows_one_u_for_every_column():
    table = step_table_html(two_columns(u=0.4321), 1)
    assert table.count("0.4321") == 2 and "Step 2" in table and "␣the" in table and "␣Paris" in table


def test_the_overlay_groups_each_columns_final_distribution_and_puts_the_shared_u_on_every_strip():
    fig = overlay_figure(two_columns(), 1)
    bars = [t for t in fig.data if t.showlegend]
    strips = [t for t in fig.data if t.showlegend is False]
    assert [t.name for t in bars] == ["A", "B"]
    assert list(bars[0].x[:2]) == [0.75, 0.25] and list(bars[1].x[:2]) == [0.3, 0.25]
    assert [set(t.y) for t in strips] == [{"A"}, {"B"}]
    assert sum(strips[1].x) == 1.0 and strips[1].marker.color[1] == "#D55E00"  # B's chosen ' the'
    lines = [s for s in fig.layout.shapes if s.type == "line"]
    assert len(lines) == 1 and lines[0].x0 == 0.8
    assert "Step 2" in fig.layout.title.text
    assert "Bước 2" in overlay_figure(two_columns(), 1, "vi").layout.title.text


def test_no_run_or_a_step_past_every_column_draws_a_placeholder():
    assert not overlay_figure(None, 0).data and not overlay_figure(two_columns(), 9).data


def test_settings_text_names_greedy():
    assert settings_text(SamplingSettings(temperature=0)) == "greedy (T 0) · hf"
