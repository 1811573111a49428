import json
import re

import pytest

from playground.common.i18n import LANGUAGES
from playground.workshop.links import TABS, parse_query
from playground.workshop.scenes import BUILT_IN, SCENES_DIR, SceneError, SceneList, load, parse_file, scene_paths

GOOD = {"id": "my-scene", "tab": "lab", "settings": {"temperature": 0.5, "chat": False, "seed": "3"},
        "title": {"en": "Mine", "vi": "Của tôi"}, "caption": {"en": "A caption.", "vi": "Một chú thích."}}


def a_file(*scenes):
    return {"lesson": {"en": "My lesson", "vi": "Bài của tôi"}, "scenes": list(scenes)}


@pytest.fixture(scope="module")
def lessons():
    return load(scene_paths(""))


def test_the_scenes_follow_the_lessons_sections_then_the_samplers_beyond_them(lessons):
    ids, labels = lessons.ids(), {scene: label for label, scene in lessons.choices("en")}
    assert ids[:7] == ["l10-tokens", "l10-embedding", "l10-blocks", "l10-attention", "l10-logits", "l10-cost",
                       "l10-lens"]
    # Lesson 13: LM head, softmax, greedy or sample, temperature, cut the tail (and its order), the engine
    assert ids[7:25] == ["l13-lm-head", "l13-softmax", "l13-shift", "l13-temperature-0", "l13-greedy-loop",
                         "l13-temperature-05", "l13-temperature-15", "l13-top-k", "l13-top-p-confident",
                         "l13-top-p-unsure", "l13-min-p", "l13-order-hf", "l13-order-llamacpp", "l13-engine",
                         "l13-stops", "l13-seed", "l13-busy-room", "l13-compare-temperatures"]
    # good material after the lesson, not inside it (their ids, and so every link to them, stay as they were)
    assert ids[25:] == ["l13-repetition-penalty", "l13-xtc", "l13-dry", "l13-no-repeat", "l13-mirostat",
                         "fp-who-pushed-it-up", "fp-knock-out", "fp-patch", "fp-steer"]
    assert labels["l13-xtc"].startswith("Beyond the lesson") and labels["l13-top-k"].startswith("Lesson 13")
    assert {scene: label for label, scene in lessons.choices("vi")}["l13-xtc"].startswith("Ngoài bài học")


def test_every_scene_has_a_tab_valid_settings_and_text_in_every_language(lessons):
    for scene in lessons.scenes:
        assert scene.tab in TABS
        assert parse_query(dict(scene.query))[1] == []
        for lang in LANGUAGES:
            assert scene.text("title", lang) and len(scene.text("caption", lang)) > 60


def test_the_captions_carry_the_lessons_numbers(lessons):
    """The toy's scenes quote the lesson's figures; the page computes them from the same asset."""
    from playground.softmax.toy import load_toy, softmax_table

    _, tokens, logits = load_toy()
    for scene_id, temperature, shown in (("l13-softmax", 1, "74%"), ("l13-temperature-05", 0.5, "96%"),
                                         ("l13-temperature-15", 1.5, "57%")):
        scene = lessons.get(scene_id)
        assert float(scene.query["toy_temperature"]) == temperature
        assert f"{softmax_table(logits, temperature=temperature, tokens=tokens)['rows'][0]['prob']:.0%}" == shown
        assert shown in scene.text("caption", "en") and shown in scene.text("caption", "vi")
    assert "200.9" in lessons.get("l13-softmax").text("caption", "en")
    assert "200,9" in lessons.get("l13-softmax").text("caption", "vi")


def test_stepping_through_scenes_clamps_at_the_ends(lessons):
    assert lessons.step(None, 1).id == "l10-tokens"
    assert lessons.step("l10-tokens", -1).id == "l10-tokens"
    assert lessons.step("l10-tokens", 1).id == "l10-embedding"
    assert lessons.step("l13-compare-temperatures", 1).id == "l13-repetition-penalty"  # on to the samplers beyond
    assert lessons.step("l13-mirostat", 1).id == "fp-who-pushed-it-up"  # on to the interventions
    assert lessons.step("fp-steer", 1).id == "fp-steer"
    assert lessons.get("nope") is None


def test_a_run_true_is_the_tabs_button(lessons):
    assert lessons.get("l13-temperature-0").run == "generate"
    assert lessons.get("l13-engine").run == "engine-run"
    assert lessons.get("l13-compare-temperatures").run == "compare-run"
    assert lessons.get("l13-greedy-loop").run == "greedy-loop"
    assert lessons.get("l10-tokens").run is None


@pytest.mark.parametrize("change, message", [
    ({"id": "Bad Id"}, "scene 1: field 'id' must be lowercase"),
    ({"tab": "settings"}, "scene 1 ('my-scene'): field 'tab' must be one of lab, softmax, engine, compare, forward"),
    ({"settings": {"temperature": 9}}, "('my-scene'): field 'settings': temperature must be a number between 0 and 2"),
    ({"settings": {"colour": "red"}}, "field 'settings': unknown setting 'colour'"),
    ({"settings": {"tab": "engine"}}, "field 'settings': tab 'engine' is not the scene's tab 'lab'"),
    ({"settings": {"seed": [1]}}, "field 'settings': seed must be text, a number or true/false"),
    ({"caption": {"en": "only English"}}, "field 'caption' must give non-empty text for each language (en, vi)"),
    ({"title": "Mine"}, "field 'title' must give non-empty text"),
    ({"run": "yes please"}, "field 'run' must be true, false or a button's element id"),
    ({"focus": "<b>"}, "field 'focus' must be an element id"),
    ({"tab": "compare", "settings": {"compare_b": [1, 0, 7, 0, "hf"]}},
     "field 'settings': compare_b: top-p must be a number between 0 and 1 (0 excluded), got '7'"),
    ({"tab": "compare", "settings": {"compare_c": [1, 0]}}, "field 'settings': compare_c must be 5 to 9 settings"),
    ({"tab": "compare", "settings": {"compare_b": [1, 0, 1, 0, "hf", 1, 0.4]}},
     "field 'settings': compare_b: frequency penalty is not part of the hf order"),
    ({"tab": "compare", "settings": {"compare_columns": 2, "compare_c": [1, 0, 1, 0, "hf"]}},
     "field 'settings': compare_c is ignored: compare_columns gives 2 columns"),
    ({"tab": "compare", "settings": {"compare_seed": "x"}}, "field 'settings': compare_seed must be a whole number"),
    ({"tab": "compare", "settings": {"compare_max_new": 0}}, "field 'settings': compare_max_new must be a whole number"),
    ({"colour": "red"}, "unknown field 'colour'"),
])
def test_a_bad_scene_is_named_with_its_field(change, message):
    with pytest.raises(SceneError) as error:
        parse_file(a_file({**GOOD, **change}), "mine.json")
    assert str(error.value).startswith("mine.json: scene 1") and message in str(error.value)


def test_a_bad_file_says_what_a_scene_file_is():
    with pytest.raises(SceneError, match="mine.json: a scene file is an object with a non-empty list 'scenes'"):
        parse_file({"scenes": []}, "mine.json")
    with pytest.raises(SceneError, match="mine.json: field 'lesson' must give non-empty text"):
        parse_file({"scenes": [GOOD]}, "mine.json")


def test_a_hosts_file_comes_after_the_lessons_and_ids_stay_unique(tmp_path):
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps(a_file(GOOD)), encoding="utf-8")
    scenes = load(scene_paths(str(mine)))
    assert scenes.ids()[-1] == "my-scene" and scenes.get("my-scene").label("vi") == "Bài của tôi · Của tôi"
    clash = tmp_path / "clash.json"
    clash.write_text(json.dumps(a_file({**GOOD, "id": "l13-seed"})), encoding="utf-8")
    with pytest.raises(SceneError, match="scene id 'l13-seed' is already used in .*lesson13.json"):
        load(scene_paths(str(clash)))
    with pytest.raises(SceneError, match="not JSON"):
        (tmp_path / "broken.json").write_text("{", encoding="utf-8")
        load([tmp_path / "broken.json"])
    with pytest.raises(SceneError, match="cannot read the scene file"):
        load([tmp_path / "missing.json"])


def test_the_built_in_files_exist():
    assert all((SCENES_DIR / name).is_file() for name in BUILT_IN)


def test_the_docs_example_scene_file_loads():
    import re

    from tests.conftest import ROOT

    doc = (ROOT / "docs" / "scenes.md").read_text(encoding="utf-8")
    example = re.search(r"```json\n(\{\"lesson\".*?)```", doc, re.S).group(1)
    scenes = parse_file(json.loads(example), "docs/scenes.md")
    assert [s.id for s in scenes] == ["warmup-hot"] and scenes[0].run == "generate"


def test_a_bad_host_file_stops_app_start_with_the_scene_named(tmp_path, monkeypatch):
    import app

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(a_file({**GOOD, "settings": {"top_p": 0}})), encoding="utf-8")
    monkeypatch.setenv("NTP_SCENES", str(bad))
    args = app.parse_args([])
    with pytest.raises(SystemExit, match=r"error: .*bad.json: scene 1 \('my-scene'\): field 'settings': top_p"):
        app.build(args)


def test_a_compare_scene_sets_the_tabs_inputs_as_a_link_would(lessons):
    scene = lessons.get("l13-compare-temperatures")
    values, problems = parse_query(dict(scene.query))
    assert problems == [] and scene.tab == "compare"
    assert values == {"compare_prompt": "The capital of France is", "compare_seed": "3", "compare_max_new": 16,
                      "compare_table": [[0.5, 0, 1.0, 0.0, "hf", 1.0, 0.0, 0.0, ""],
                                        [1.0, 0, 1.0, 0.0, "hf", 1.0, 0.0, 0.0, ""]]}
    assert "T 0.5" in scene.text("caption", "en") and "T 0,5" in scene.text("caption", "vi")
    blank_cells = parse_file(a_file({**GOOD, "tab": "compare", "settings": {"compare_c": [0.7, None, "", None, "vllm"]}}),
                             "mine.json")[0]
    assert blank_cells.query == {"compare_c": "0.7,,,,vllm"} and parse_query(dict(blank_cells.query))[1] == []


def test_a_language_switch_relabels_the_scene_bar_in_the_browser_from_every_scenes_texts(lessons):
    from playground.workshop.scene_bar import caption_markdown, relabel_js

    host = parse_file(a_file({**GOOD, "title": {"en": "<b>Mine</b>", "vi": "Của tôi"}}), "mine.json")
    script = relabel_js(lessons)
    texts = json.loads(re.search(r"const texts = (\{.*?\});\n", script).group(1))
    assert set(texts) == set(LANGUAGES)
    for code in LANGUAGES:
        assert texts[code]["choices"] == [list(c) for c in lessons.choices(code)]
        assert texts[code]["captions"] == {s.id: caption_markdown(s, lessons, code) for s in lessons.scenes}
    assert texts["vi"]["captions"]["l10-embedding"].startswith("**Cảnh 2/34 · Bài 10 · Embedding**")
    mine = relabel_js(SceneList(tuple(host)))
    assert "<" not in mine and "&lt;b&gt;Mine&lt;/b&gt;" in mine  # a host's markup: escaped text, in a JSON string
