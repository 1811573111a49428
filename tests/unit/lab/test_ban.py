"""Ban this token (playground/lab/ban.py): a clicked candidate joins the logit bias box at -100, the other entries
kept, and a bad box is refused naming it."""

from __future__ import annotations

import pytest

from playground.lab.ban import BAN_JS, banned


def test_a_clicked_token_joins_the_bias_at_minus_100_keeping_the_others():
    assert banned("", 260) == "260:-100"
    assert banned("13:5, 400:-2", "260") == "13:5, 260:-100, 400:-2"
    assert banned("260:3", 260) == "260:-100"  # banning a biased token replaces its bias


def test_a_bad_bias_box_or_id_is_named():
    with pytest.raises(ValueError, match="^logit bias must map token ids to biases"):
        banned("oops", 5)
    with pytest.raises(ValueError, match="^token must be a whole number"):
        banned("", "x")


def test_the_page_script_hooks_the_stage_charts_clicks_into_the_ban_box():
    assert '"#stage-plot .js-plotly-plot"' in BAN_JS and "plotly_click" in BAN_JS and "#ban-token" in BAN_JS
