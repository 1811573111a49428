"""The custom chain's board (playground/lab/chain_board.py): it draws the chain box's text as stages in order, each
with its moves, then the stages left out; unknown words are left for Generate to refuse."""

from __future__ import annotations

import re

from model_service.records.settings import CHAIN_STAGES, parse_chain
from playground.lab.chain_board import STAGE_LABELS, board_html, stages_in


def chain_of(markup: str) -> list[str]:
    row = markup.split('class="ntp-board ntp-chain"')[1].split('class="ntp-board ntp-unused"')[0]
    return re.findall(r'<span class="ntp-stage" draggable="true" data-stage="(\w+)"', row)


def test_the_board_reads_the_box_as_the_settings_read_it():
    for text in ("top_k, min_p, temperature", "top-k > min-p -> temperature", "TOP_K→min_p;temperature"):
        assert stages_in(text) == list(parse_chain("chain", text)) == ["top_k", "min_p", "temperature"]
    assert stages_in("top_k, beam, top_k, xtc") == ["top_k", "xtc"]  # what it can draw; Generate names "beam"
    assert stages_in("") == stages_in(None) == []


def test_the_chain_in_order_then_the_others_each_once():
    markup = board_html("xtc, top_k, temperature")
    assert chain_of(markup) == ["xtc", "top_k", "temperature"]
    unused = re.findall(r'data-op="add" data-stage="(\w+)"', markup)
    assert unused == [s for s in CHAIN_STAGES if s not in ("xtc", "top_k", "temperature")]
    # the first cannot move earlier, the last cannot move later; every one can leave
    assert 'data-op="left" data-stage="xtc" title="move XTC earlier" aria-label="move XTC earlier" disabled' in markup
    assert 'data-op="right" data-stage="temperature" title="move temperature later" ' \
           'aria-label="move temperature later" disabled' in markup
    assert len(re.findall(r'data-op="remove"', markup)) == 3 and "1. XTC" in markup and "3. temperature" in markup


def test_an_empty_chain_says_how_to_start_in_both_languages():
    assert chain_of(board_html("")) == [] and "No stage yet" in board_html("")
    vi = board_html("", "vi")
    assert "Chưa có bước nào" in vi and f'title="thêm {STAGE_LABELS["top_p"]} vào cuối chuỗi"' in vi


def test_a_visitors_text_never_reaches_the_markup():
    markup = board_html('<img src=x onerror=alert(1)>, top_k, "><script>')
    assert "<img" not in markup and "<script" not in markup.replace("<style>", "") and chain_of(markup) == ["top_k"]
