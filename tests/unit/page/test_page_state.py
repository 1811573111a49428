import gradio as gr

from playground import limits
from playground.workshop.page_state import PageState


def a_page():
    with gr.Blocks():
        with gr.Tabs() as tabs:
            with gr.Tab("Lab", id="lab") as lab_tab:
                prompt, temperature = gr.Textbox(), gr.Slider(0, 2)
            with gr.Tab("Softmax", id="softmax") as softmax_tab:
                toy = gr.Dataframe()
            with gr.Tab("Engine", id="engine") as engine_tab:
                engine = gr.Dataframe()
        fields = {"prompt": prompt, "temperature": temperature, "toy_logits": toy, "engine": engine}
        state = PageState(fields, tabs, {"lab": lab_tab, "softmax": softmax_tab, "engine": engine_tab})
    return state, fields


def test_a_query_becomes_updates_of_the_components_it_names():
    state, f = a_page()
    updates, problems = state.apply_state({"tab": "softmax", "temperature": "0.5", "toy_logits": "1,2,3,4,5",
                                           "colour": "red"}, "vi")
    assert updates[state.tab] == "softmax" and updates[state.tabs].selected == "softmax"
    assert updates[f["temperature"]] == 0.5
    assert updates[f["toy_logits"]] == [["␣Paris", 1.0], ["␣the", 2.0], ["␣a", 3.0], ["␣Lyon", 4.0], ["␣France", 5.0]]
    assert f["prompt"] not in updates
    assert len(problems) == 1 and "'colour'" in problems[0]


def test_a_scenes_lesson_prompt_follows_the_pages_language_and_the_engine_table_gets_its_headers():
    state, f = a_page()
    query = {"prompt": limits.LESSON_PROMPT, "engine": '[["Hi", 1]]'}
    updates, _ = state.apply_state(query, "vi", lesson_follows_language=True)  # a scene
    assert updates[f["prompt"]] == limits.LESSON_PROMPT_VI
    assert updates[f["engine"]]["data"][0][:2] == ["Hi", 1] and updates[f["engine"]]["headers"][5] == "thứ tự"
    updates, _ = state.apply_state({"prompt": "Once upon a time"}, "vi", lesson_follows_language=True)
    assert updates[f["prompt"]] == "Once upon a time"


def test_a_links_prompt_stays_as_the_host_wrote_it():
    state, f = a_page()
    updates, _ = state.apply_state({"prompt": limits.LESSON_PROMPT}, "vi")  # a Vietnamese link naming the English
    assert updates[f["prompt"]] == limits.LESSON_PROMPT


def test_current_state_reads_raw_values_back_into_link_fields():
    state, _ = a_page()
    toy = {"headers": ["token", "logit"], "data": [["␣Paris", 4], ["␣the", 3.2], ["␣a", 2.7], ["␣Lyon", 2.2],
                                                    ["␣France", 1.4]]}
    values = state.current_state("softmax", "hi", 0.5, toy, {"data": [["Hi", 1]]})
    assert values["tab"] == "softmax" and values["temperature"] == 0.5 and values["toy_logits"] == [4, 3.2, 2.7, 2.2, 1.4]
    assert values["engine"][0][:2] == ["Hi", 1]
    renamed = {**toy, "data": [["␣Rome", 4]] + toy["data"][1:]}  # a link carries logits only: renamed tokens drop it
    assert state.current_state("nowhere", "hi", 1, renamed, None)["toy_logits"] is None
    assert state.current_state("nowhere", "hi", 1, toy, None)["tab"] == "lab"


def a_compare_page():
    with gr.Blocks():
        with gr.Tabs() as tabs:
            with gr.Tab("Lab", id="lab") as lab_tab:
                prompt = gr.Textbox()
            with gr.Tab("Compare", id="compare") as compare_tab:
                c_prompt, seed, max_new, table = gr.Textbox(), gr.Textbox(), gr.Slider(1, 512), gr.Dataframe()
        fields = {"prompt": prompt, "compare_prompt": c_prompt, "compare_seed": seed, "compare_max_new": max_new,
                  "compare_table": table}
        state = PageState(fields, tabs, {"lab": lab_tab, "compare": compare_tab})
    return state, fields


def test_a_compare_link_sets_the_tab_its_prompt_seed_length_and_table_with_headers_in_the_pages_language():
    state, f = a_compare_page()
    query = {"tab": "compare", "compare_prompt": limits.LESSON_PROMPT, "compare_seed": "42", "compare_max_new": "16",
             "compare_c": "1.5,0,0.9,0,vllm"}
    updates, problems = state.apply_state(query, "vi", lesson_follows_language=True)  # a scene
    assert problems == [] and updates[state.tab] == "compare"
    assert updates[f["compare_prompt"]] == limits.LESSON_PROMPT_VI
    assert (updates[f["compare_seed"]], updates[f["compare_max_new"]]) == ("42", 16)
    table = updates[f["compare_table"]]
    off = [1.0, 0.0, 0.0, ""]  # a five-cell column (a link from before the penalties) has them off, and no other sampler
    assert table["data"] == [[0.5, 0, 1.0, 0.0, "hf", *off], [1.0, 0, 1.0, 0.0, "hf", *off], [1.5, 0, 0.9, 0.0, "vllm", *off]]
    assert table["headers"] == ["temperature", "top-k", "top-p", "min-p", "thứ tự", "repetition penalty",
                                "frequency penalty", "presence penalty", "bộ lấy mẫu khác (tên=giá trị …)"]


def test_current_state_reads_the_compare_tab_as_run_would_take_it():
    state, _ = a_compare_page()
    table = {"headers": ["temperature"], "data": [[0.5, 0, 1, 0, "hf", 1.2, 0, 0], [None, "", 0.9, None, " VLLM ", "", 0.5],
                                                  [None] * 8, [None] * 5]}
    values = state.current_state("compare", "hi", "A cat", " 7 ", 16.0, table)
    assert values == {"tab": "compare", "prompt": "hi", "compare_prompt": "A cat", "compare_seed": "7", "compare_max_new": 16,
                      "compare_table": [[0.5, 0, 1.0, 0.0, "hf", 1.2, 0.0, 0.0, ""],
                                        [1.0, 0, 0.9, 0.0, "vllm", 1.0, 0.5, 0.0, ""]]}
    # what Run would refuse stays out of the link (the tab's own message says why when Run is pressed)
    bad = {"data": [[0.5, 0, 1, 0, "hf"], [1, 0, 7, 0, "hf"]]}
    values = state.current_state("compare", "hi", "A cat", "x", 0, bad)
    assert values["compare_seed"] is values["compare_max_new"] is values["compare_table"] is None
    assert state.current_state("compare", "hi", "A cat", "", 24, {"data": [[1, 0, 1, 0, "hf"]]})["compare_table"] is None
    hf_frequency = {"data": [[0.5, 0, 1, 0, "hf"], [1, 0, 1, 0, "hf", 1, 0.5, 0]]}  # transformers has none
    assert state.current_state("compare", "hi", "A cat", "", 24, hf_frequency)["compare_table"] is None


def test_a_scene_is_the_whole_page_every_field_it_leaves_out_back_at_its_default():
    from playground.workshop.links import DEFAULTS

    state, f = a_page()
    updates, _ = state.apply_state({"tab": "softmax", "toy_shift": "5"}, "vi", lesson_follows_language=True, whole=True)
    assert updates[f["temperature"]] == DEFAULTS["temperature"]  # the scene before's 0.5 does not stay
    assert updates[f["prompt"]] == limits.LESSON_PROMPT_VI  # the lesson's, in the page's language
    assert updates[f["toy_logits"]] == [["␣Paris", 5.0], ["␣the", 3.2], ["␣a", 2.7], ["␣Lyon", 2.2], ["␣France", 1.4]]
    assert updates[f["engine"]]["data"][0][0] == limits.LESSON_PROMPT  # the tab's own example table
    named, _ = state.apply_state({"temperature": "0.5"}, "en", whole=True)
    assert named[f["temperature"]] == 0.5  # what it names wins
    assert f["toy_logits"] not in state.apply_state({"temperature": "0.5"}, "en")[0]  # a link sets what it names
