"""Scenes and links over the API: every link is absolute (host included), behind a proxy and on a Space too."""

from urllib.parse import parse_qsl, urlsplit

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from playground import limits
from playground.workshop.links import parse_query

from .lab_args import KNOBS_OFF

TOY = {"headers": ["token", "logit"], "data": [["␣Paris", 4], ["␣the", 3.2], ["␣a", 2.7], ["␣Lyon", 2.2], ["␣France", 1.4]]}
ENGINE = {"headers": ["prompt"], "data": [["Hi", 0.5, 0, 1, 0, "hf", "", 8, ""]]}
LAB = [limits.LESSON_PROMPT, False, 0.5, 40, 1.0, 0.0, "", 48, "", "hf", *KNOBS_OFF]  # the lab's controls
COMPARE = [limits.LESSON_PROMPT, "3", 24, {"headers": ["temperature"], "data": [[0.5, 0, 1, 0, "hf"], [1, 0, 1, 0, "hf"]]}]


# iv_kind, iv_block, iv_head, iv_mode, iv_source, iv_steer_prompt, iv_towards, iv_away, iv_steer_block, iv_scale
INTERVENE = ["mlp", 12, 1, "zero", "The capital of Italy is", "I think that this movie is", "I love this. It is wonderful",
             "I hate this. It is terrible", 10, 1.0]


def page_link(client, lang="en", toy=TOY, shift=1.5, fw_block=4, compare=COMPARE, intervene=INTERVENE):
    return client.predict(*LAB, toy, shift, 1.0, ENGINE, "A cat sat", True, fw_block, -1, *compare, *intervene, lang,
                          api_name="/page_link")


def test_a_scene_link_is_absolute_and_in_the_pages_language(client, app_url):
    assert client.predict("l13-top-k", "en", api_name="/scene_link") == f"{app_url}?scene=l13-top-k"
    assert client.predict("l10-lens", "vi", api_name="/scene_link") == f"{app_url}?scene=l10-lens&lang=vi"


def test_the_page_link_carries_every_tabs_inputs_and_parses_back(client, app_url):
    link = page_link(client)
    parts = urlsplit(link)
    assert f"{parts.scheme}://{parts.netloc}/" == app_url
    values, problems = parse_query(dict(parse_qsl(parts.query)))
    assert problems == []
    assert values == {"prompt": limits.LESSON_PROMPT, "temperature": 0.5, "top_k": 40,
                      "toy_logits": [4.0, 3.2, 2.7, 2.2, 1.4], "toy_shift": 1.5,
                      "engine": [["Hi", 0.5, 0, 1, 0, "hf", "", 8, "", 1, 0, 0, ""]], "fw_prompt": "A cat sat", "fw_chat": True}
    # the block travels only from the forward tab (this API session shows the lab)
    assert "fw_block" not in values


def test_behind_a_proxy_links_use_the_forwarded_host_and_scheme(app_url):
    proxied = Client(app_url, verbose=False, headers={"X-Forwarded-Host": "class.example.org",
                                                      "X-Forwarded-Proto": "https"})
    assert proxied.predict("l13-seed", "en", api_name="/scene_link") == "https://class.example.org/?scene=l13-seed"
    assert proxied.predict(*LAB, "en", api_name="/make_link").startswith("https://class.example.org/?prompt=")


def test_on_a_space_links_open_the_spaces_page(client, monkeypatch):
    """The machine is read once per process (hosting.this_machine); here the app under test is told it is a Space."""
    from playground import hosting

    space = hosting.detect({"SPACE_ID": "teacher/next-token", "SPACE_HOST": "teacher-next-token.hf.space"})
    monkeypatch.setattr("playground.common.address.this_machine", lambda: space)
    assert client.predict("l13-seed", "vi", api_name="/scene_link") == (
        "https://huggingface.co/spaces/teacher/next-token?scene=l13-seed&lang=vi")


def test_a_scene_link_needs_a_scene_and_says_so_without_an_error(client):
    assert client.predict("not-a-scene", "en", api_name="/scene_link") == {"__type__": "update"}  # unchanged


def test_opening_a_scene_sets_its_tab_settings_and_caption(client):
    out = client.predict("l13-temperature-05", "vi", api_name="/open_scene")
    caption = next(v for v in out if isinstance(v, str) and v.startswith("**Cảnh"))
    assert "Temperature 0,5" in caption and "96%" in caption
    assert 0.5 in out  # the toy's temperature slider
    assert any(isinstance(v, dict) and v.get("data", [None])[0] == ["␣Paris", 5] for v in out)  # the toy table


def test_opening_an_unknown_scene_names_the_field(client):
    with pytest.raises(AppError, match="scene must be one of l10-tokens, .*, got 'nope'"):
        client.predict("nope", "en", api_name="/open_scene")


def test_on_the_compare_tab_the_page_link_carries_its_inputs_and_a_fresh_page_reads_them_back(app_url):
    client = Client(app_url, verbose=False)  # its own session: opening the scene puts it on the Compare tab
    out = client.predict("l13-compare-temperatures", "en", api_name="/open_scene")
    assert "compare-run" in next(v for v in out if isinstance(v, str) and v.startswith('{"id"'))  # the browser runs it
    table = {"headers": ["temperature"], "data": [[0.5, 0, 1, 0, "hf"], [1.5, 0, 0.9, None, "vllm"], [0, 0, 1, 0, "hf"]]}
    link = page_link(client, compare=["Once upon a time", "", 16, table])
    parts = urlsplit(link)
    assert f"{parts.scheme}://{parts.netloc}/" == app_url
    assert "compare_b=1.5,0,0.9,0,vllm" in parts.query  # readable: commas are not escaped
    values, problems = parse_query(dict(parse_qsl(parts.query, keep_blank_values=True)))
    assert problems == []
    assert {k: v for k, v in values.items() if k == "tab" or k.startswith("compare")} == {
        "tab": "compare", "compare_prompt": "Once upon a time", "compare_seed": "", "compare_max_new": 16,
        "compare_table": [[0.5, 0, 1.0, 0.0, "hf", 1.0, 0.0, 0.0, ""], [1.5, 0, 0.9, 0.0, "vllm", 1.0, 0.0, 0.0, ""],
                          [0.0, 0, 1.0, 0.0, "hf", 1.0, 0.0, 0.0, ""]]}
    # a table Run would refuse (a bad cell) stays out of the link; the tab keeps it to show its own message
    bad = {"headers": ["temperature"], "data": [[0.5, 0, 1, 0, "hf"], [1, 0, 7, 0, "hf"]]}
    link = page_link(client, compare=[limits.LESSON_PROMPT, "3", 24, bad])
    assert "tab=compare" in link and "compare_" not in link
