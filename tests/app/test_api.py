"""The script endpoints that are not tied to one tab."""

from model_service import limits


def test_model_info_names_the_model_the_room_and_the_caps(client, embedded):
    info = client.predict(api_name="/model_info")
    assert info["status"]["ready"] is True
    assert info["model"]["name"] == embedded.info.name
    assert info["model"]["vocab_size"] == embedded.info.vocab_size
    assert info["room"]["max_rows"] == embedded.room().max_rows
    assert info["room"]["queue_size"] == embedded.room().queue_size
    assert info["limits"]["max_new_tokens"] == limits.MAX_NEW_TOKENS
    assert info["limits"]["max_prompt_tokens"] == limits.MAX_PROMPT_TOKENS


def test_model_info_while_loading_reports_progress_not_an_error():
    from model_service.models.switching import LoadingService
    from model_service.records.step import LoadStatus
    from playground.page import build_demo

    loading = LoadingService.__new__(LoadingService)  # a load that never finishes
    loading._service, loading._status = None, LoadStatus(0.4, "reading weights", False)
    demo = build_demo(loading)
    fn = next(f for f in demo.fns.values() if f.api_name == "model_info").fn
    info = fn()
    assert info["status"] == {"fraction": 0.4, "message": "reading weights", "ready": False, "error": None}
    assert info["model"] is None and info["room"] is None


def test_the_page_keeps_no_run_history_in_the_browser(app_url):
    # Gradio 6's page otherwise records every event it sends (each knob move and streamed update, with its inputs
    # and figures) in localStorage, re-writing the whole list each time: ~40 ms of main thread per knob move here
    import httpx

    config = httpx.get(app_url + "config", timeout=60).json()
    assert config["run_history"] is False
