"""Token chips: parsed back with html.parser, so escaping and attributes are checked as a browser sees them."""

from __future__ import annotations

from dataclasses import replace
from html.parser import HTMLParser

from plotly.colors import sample_colorscale, unlabel_rgb

from model_service.records.step import DrawInfo, Stage, StepRecord
from model_service.records.utf8 import incomplete_tail
from playground.common.colours import NO_DATA, prob_colour, text_colour
from playground.lab.chips import chip_title, chips_prefix, new_chips, token_chips_html


def rec(piece: str, p: float | None = 0.5, *, step: int = 0, token_id: int = 3575, rank: int = 0,
        special: bool = False, final: bool = True) -> StepRecord:
    stages = ()
    if p is not None:
        names = ("raw", "final") if final else ("raw",)
        stages = tuple(Stage(n, (p,), 1, 1.0, 0.0, p if n == "final" else p / 2) for n in names)
    return StepRecord(
        step=step, token_id=token_id, piece=piece, special=special, text="", candidates=(), stages=stages,
        chosen_rank=rank, draw=DrawInfo(0.1, rank, 0.0, 1.0), seed=0, forward_ms=1.0, sampling_ms=0.1,
    )


class Chips(HTMLParser):
    """Collects each chip's attributes, its text, and what follows it (for <br>s)."""

    def __init__(self):
        super().__init__()
        self.chips: list[dict] = []
        self.depth = 0  # span nesting inside the current chip
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if tag == "span" and "ntp-chip" in (attrs.get("class") or "").split():
            self.chips.append({**attrs, "text": "", "breaks": 0})
            self.depth = 1
        elif tag == "span" and self.depth:
            self.depth += 1
        elif tag == "br" and self.chips:
            self.chips[-1]["breaks"] += 1

    def handle_endtag(self, tag):
        if tag == "span" and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.chips[-1]["text"] += data


def parse(html: str) -> Chips:
    parser = Chips()
    parser.feed(html)
    return parser


def style_of(chip: dict) -> dict:
    return dict(part.split(":", 1) for part in chip["style"].split(";") if part)


def luminance(colour: str) -> float:
    from playground.common.colours import _luminance

    return _luminance(colour)


def test_one_chip_per_step_in_order_with_step_attribute():
    records = [rec("The", step=0), rec(" capital", step=1), rec("<|im_end|>", step=2, special=True)]
    chips = parse(token_chips_html(records)).chips
    assert [c["text"] for c in chips] == ["The", "␣capital", "⟨|im_end|⟩"]
    assert [c["data-step"] for c in chips] == ["0", "1", "2"]
    assert "ntp-special" in chips[2]["class"].split()
    assert "ntp-special" not in chips[0]["class"].split()


def test_script_is_escaped_in_text_and_title():
    html = token_chips_html([rec("<script>alert('x')</script>")])
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    (chip,) = parse(html).chips
    assert chip["text"] == "<script>alert('x')</script>"
    assert chip["title"].startswith("id 3575 · '<script>alert('x')</script>'")
    (chip,) = parse(token_chips_html([rec('" onmouseover="alert(1)')])).chips
    assert "onmouseover" not in chip and "onmouseover=\"alert(1)'" in chip["title"]


def test_title_text():
    # the factory gives raw = p / 2 and final = p
    assert chip_title(rec(" Paris", 1.54)) == "id 3575 · ' Paris' · p=0.77 (log p -0.26) · 1.54 (log p 0.43) after the pipeline · rank 1"
    (chip,) = parse(token_chips_html([rec(" Paris", 1.545078, rank=2)])).chips
    assert chip["title"] == "id 3575 · ' Paris' · p=0.77 (log p -0.26) · 1.55 (log p 0.44) after the pipeline · rank 3"
    assert chip_title(rec("x", 0.0068, final=False)) == "id 3575 · 'x' · p=0.0034 (log p -5.68) · rank 1"
    assert chip_title(rec("\n", None)) == "id 3575 · '\\n' · rank 1"  # capture off: no p


def test_colour_is_the_models_raw_probability():
    # greedy makes "final" 1.0 for every token; the raw probability is what tells tokens apart
    (with_final,) = parse(token_chips_html([rec("a", 0.8)])).chips
    (raw_only,) = parse(token_chips_html([rec("a", 0.8, final=False)])).chips
    (nothing,) = parse(token_chips_html([rec("a", None)])).chips
    assert style_of(with_final)["background"] == prob_colour(0.4)  # raw's chosen_prob in the factory is p / 2
    assert style_of(raw_only)["background"] == prob_colour(0.4)
    assert style_of(nothing)["background"] == NO_DATA


def hex_of(rgb: str) -> str:
    return "#" + "".join(f"{round(c):02x}" for c in unlabel_rgb(rgb))


def test_colour_scale_is_plotlys_cividis_monotonic_and_clamped():
    # one ramp for chips and heatmaps: Plotly's own Cividis, sampled
    for p in (0, 0.25, 0.5, 0.77, 1):
        assert prob_colour(p) == hex_of(sample_colorscale("Cividis", [p])[0])
    assert prob_colour(0) == "#00224e" and prob_colour(1) == "#fee838"
    assert prob_colour(-1) == prob_colour(0) and prob_colour(2) == prob_colour(1)
    lums = [luminance(prob_colour(i / 50)) for i in range(51)]
    assert all(a < b for a, b in zip(lums, lums[1:]))
    assert len(set(prob_colour(i / 50) for i in range(51))) > 40  # interpolated, not stepped
    chips = parse(token_chips_html([rec("a", p) for p in (0.05, 0.3, 0.6, 0.95)])).chips
    chip_lums = [luminance(style_of(c)["background"]) for c in chips]
    assert chip_lums == sorted(chip_lums)


def test_text_colour_contrasts_with_background():
    assert text_colour(prob_colour(0.0)) == "#ffffff"
    assert text_colour(prob_colour(1.0)) == "#000000"
    chips = parse(token_chips_html([rec("a", 0.02), rec("b", 0.98)])).chips
    assert [style_of(c)["color"] for c in chips] == ["#ffffff", "#000000"]


def test_newline_shows_a_mark_then_breaks_the_line():
    chips = parse(token_chips_html([rec("Hi"), rec("\n"), rec(".\n\n"), rec("<eos>", special=True)])).chips
    assert [c["text"] for c in chips] == ["Hi", "↵", ".↵↵", "⟨eos⟩"]
    assert [c["breaks"] for c in chips] == [0, 1, 2, 0]


def test_edge_spaces_are_visible():
    chips = parse(token_chips_html([rec(" Paris"), rec("  "), rec("end "), rec("a b")])).chips
    assert [c["text"] for c in chips] == ["␣Paris", "␣␣", "end␣", "a b"]
    assert '<span class="ntp-ws">␣</span>Paris' in token_chips_html([rec(" Paris")])


def test_selected_chip_is_outlined():
    records = [rec("a"), rec("b"), rec("c")]
    chips = parse(token_chips_html(records, selected=1)).chips
    assert ["ntp-selected" in c["class"].split() for c in chips] == [False, True, False]
    assert not any("ntp-selected" in c["class"] for c in parse(token_chips_html(records)).chips)


def test_legend_and_self_contained_styles():
    html = token_chips_html([rec("a")])
    assert "probability of the chosen token" in html and "linear-gradient" in html
    assert html.count("<style>") == 1
    style = html[html.index("<style>"): html.index("</style>")]
    classes = [w[1:].split("{")[0] for w in style.split() if w.startswith(".")]
    assert classes and all(c.startswith("ntp-") for c in classes)


def test_no_records_gives_a_placeholder():
    html = token_chips_html([])
    assert parse(html).chips == [] and "No tokens yet" in html


def test_streaming_html_only_grows_so_gradio_sends_appends():
    records = [rec(c, 0.5) for c in ["a", " b", "\n", "c"]]
    html_so_far = [token_chips_html(records[: n + 1]) for n in range(len(records))]
    for before, after in zip(html_so_far, html_so_far[1:]):
        assert after.startswith(before)


def test_built_chip_by_chip_it_is_the_same_html():
    records = [rec(c, 0.3 + 0.1 * i) for i, c in enumerate(["a", " b", "\n", "<c>"])]
    html, start = chips_prefix(), 0
    for n in range(1, len(records) + 1):
        more, start = new_chips(records[:n], start)
        html += more
    assert start == len(records) and html == token_chips_html(records)


def test_vietnamese_hover_text_legend_and_placeholder():
    record = replace(rec(" Paris", 1.54), stop_reason="eos")
    assert chip_title(record, "vi") == "ID 3575 · ' Paris' · p=0.77 (log p -0.26) · 1.54 (log p 0.43) sau pipeline · hạng 1 · dừng: eos"
    chip = parse(token_chips_html([record], lang="vi")).chips[0]
    assert chip["title"] == chip_title(record, "vi") and chip["text"] == "␣Paris"
    assert "xác suất model gán cho token được chọn" in token_chips_html([record], lang="vi")
    assert "Chưa có token nào." in token_chips_html([], lang="vi")
    assert "probability" not in token_chips_html([record], lang="vi")


def test_english_stays_the_default():
    record = rec(" Paris", 1.54)
    assert chip_title(record) == chip_title(record, "en") == "id 3575 · ' Paris' · p=0.77 (log p -0.26) · 1.54 (log p 0.43) after the pipeline · rank 1"
    assert token_chips_html([record]) == token_chips_html([record], lang="en")
    assert "the model's probability of the chosen token" in token_chips_html([record])


# ---- tokens that hold part of a character -----------------------------------------------------------

THU_DO = [("Th", b"Th"), ("\\xe1\\xbb", b"\xe1\xbb"), ("\\xa7", b"\xa7"), (" \\xc4", b" \xc4"), ("\\x91", b"\x91"), ("ô", "ô".encode())]


def byte_records(pieces=THU_DO) -> list[StepRecord]:
    """A run that writes "Thủ đô" as SmolLM2 does: each record carries its bytes and what was pending."""
    records, pending = [], b""
    for step, (piece, data) in enumerate(pieces):
        split = piece.encode() != data
        records.append(replace(rec(piece, 0.5, step=step), bytes_hex=data.hex() if split else "", pending_hex=pending.hex()))
        pending = incomplete_tail(pending + data)
    return records


def test_a_split_character_shows_as_the_character_with_its_bytes_in_the_title():
    chips = parse(token_chips_html(byte_records())).chips
    assert [c["text"] for c in chips] == ["Th", "ủ1–2/3", "ủ3/3", "␣đ1/2", "đ2/2", "ô"]
    assert all("\\x" not in c["text"] for c in chips)
    assert "bytes 1–2 of 3 of ủ: \\xe1\\xbb" in chips[1]["title"]
    assert "'ủ'" in chips[1]["title"] and chips[1]["title"].startswith("id 3575 · ")
    assert '<sub class="ntp-part">1–2/3</sub>' in token_chips_html(byte_records())


def test_streaming_holds_a_split_character_until_it_is_complete():
    records = byte_records()
    html, start, sent = chips_prefix(), 0, []
    for n in range(1, len(records) + 1):
        more, start = new_chips(records[:n], start)
        html += more
        sent.append(start)
    # "Th" goes at once; e1 bb waits for a7; " c4" waits for 91; "ô" goes at once
    assert sent == [1, 1, 3, 3, 5, 6]
    assert html == token_chips_html(records)
    # a run that ends half-way through a character: the last chip shows what it could become
    more, start = new_chips(records[:2], 1, final=True)
    (chip,) = parse(more).chips
    assert chip["text"] == "Ề…1–2/3" and start == 2


def test_a_split_characters_title_in_vietnamese():
    chips = parse(token_chips_html(byte_records(), lang="vi")).chips
    assert [c["text"] for c in chips] == ["Th", "ủ1–2/3", "ủ3/3", "␣đ1/2", "đ2/2", "ô"]
    assert "byte thứ 1–2 trong 3 byte của ủ: \\xe1\\xbb" in chips[1]["title"]
    assert chips[1]["title"].startswith("ID 3575 · ") and "bytes" not in chips[1]["title"]


def test_the_chips_carry_both_colours_and_the_toggle_picks_one():
    record = rec(" Paris", 0.9)  # raw 0.45, final 0.9
    chip = parse(token_chips_html([record])).chips[0]
    style = chip["style"]
    assert f"background:{prob_colour(0.45)}" in style and f"--ntp-final:{prob_colour(0.9)}" in style
    assert f"--ntp-final-ink:{text_colour(prob_colour(0.9))}" in style
    html = token_chips_html([record])
    assert ".ntp-final-probs .ntp-chip{background:var(--ntp-final)" in html  # the page's class picks final
    assert 'class="ntp-when-final"' in html and 'class="ntp-when-raw"' in html  # the legend says which


def test_the_selected_steps_moved_logits_underline_the_earlier_chips_they_hit():
    records = [rec(" the", step=0, token_id=5), rec(" cat", step=1, token_id=6), rec(" the", step=2, token_id=5),
               replace(rec(" mat", step=3, token_id=7), adjusted=((5, -1.25), (99, -0.5)))]
    chips = parse(token_chips_html(records)).chips  # the last step is shown: its penalties hit " the" twice
    hit = [c for c in chips if "ntp-hit" in c["class"].split()]
    assert [c["data-step"] for c in hit] == ["0", "2"]
    assert hit[0]["title"].endswith("moved its logit by -1.25")
    assert "Underlined:" in token_chips_html(records)
    # another step selected: its own moves (none here), so nothing is underlined
    assert not [c for c in parse(token_chips_html(records, selected=2)).chips if "ntp-hit" in c["class"].split()]
