"""The scenes' kept runs (playground/lab/replays.py) on the tiny random Llama: a kept run is the live run, only a
request its settings determine is kept, and a new model (another epoch) keeps none of the old one's."""

from __future__ import annotations

from playground.lab.replays import Replays, replayable, scene_request, scene_requests
from playground.lab.request import parse_request
from playground.workshop.scenes import load, scene_paths

SEEDED = parse_request("abc", False, 0.8, 0, 1, 0, "3", 6, "", "hf")
GREEDY = parse_request("abc", False, 0, 0, 1, 0, "", 5, "", "hf")
FRESH = parse_request("abc", False, 0.8, 0, 1, 0, "", 5, "", "hf")  # fresh randomness: every run its own


def live(service, request):
    return [r.token_id for r in service.generate(request.prompt, request.settings, request.max_new_tokens,
                                                 request.stop, request.chat)]


def test_a_kept_run_is_the_live_run_and_only_determined_requests_are_kept(tiny_service, monkeypatch):
    replays = Replays()
    replays.warm(tiny_service, [SEEDED, GREEDY, FRESH]).join(timeout=300)
    assert [r.token_id for r in replays.get(tiny_service, SEEDED)] == live(tiny_service, SEEDED)
    assert [r.token_id for r in replays.get(tiny_service, GREEDY)] == live(tiny_service, GREEDY)
    assert replays.get(tiny_service, FRESH) is None and not replayable(FRESH)
    monkeypatch.setattr(tiny_service, "epoch", tiny_service.epoch + 1)  # the host switched the model
    assert replays.get(tiny_service, SEEDED) is None


def test_a_kept_runs_logits_are_kept_too_so_its_what_ifs_take_no_forward_pass(tiny_service):
    replays = Replays()
    replays.warm(tiny_service, [SEEDED]).join(timeout=300)
    name = replays.kept_as(tiny_service, SEEDED)
    assert name.startswith("replay:") and name != replays.kept_as(tiny_service, GREEDY)
    tokens = [r.token_id for r in replays.get(tiny_service, SEEDED)]
    settings = SEEDED.settings.with_seed(3)
    for step in (0, 3):
        what = tiny_service.what_if(SEEDED.prompt, settings, SEEDED.max_new_tokens, continue_from=tokens[:step],
                                    keep=name)
        assert what.logits_from == "kept" and what.record.token_id == tokens[step]  # the run's own settings: its token


def test_the_oldest_kept_run_makes_way(tiny_service):
    replays = Replays(limit=1)
    replays.warm(tiny_service, [SEEDED, GREEDY]).join(timeout=300)
    assert replays.get(tiny_service, SEEDED) is None and replays.get(tiny_service, GREEDY) is not None


def test_every_lab_scene_that_runs_makes_the_request_its_page_would_send():
    scenes = load(scene_paths())
    top_k = scene_request(scenes.get("l13-top-k").query, "vi")
    assert top_k.prompt == "Thủ đô của Pháp là" and top_k.settings.top_k == 5 and top_k.settings.seed == 1
    assert top_k.settings.xtc_probability == 0 and top_k.max_new_tokens == 1  # what the scene leaves out: default
    requests = scene_requests(scenes.scenes, ("en", "vi"))
    assert len(requests) == len(set(requests)) and all(replayable(r) for r in requests)
    assert scene_request(scenes.get("l13-seed").query, "en") not in requests  # its point is the live run
