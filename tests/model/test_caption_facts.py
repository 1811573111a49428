"""The scenes' captions on the embedded model: every number about the model is read from the scene's own run
(caption_facts.py), and each sampler's claim holds on it (Gemma: test_second_model.py)."""

from __future__ import annotations

from .caption_claims import check_every_scene


def test_every_filled_claim_holds_on_the_embedded_model(embedded):
    assert check_every_scene(embedded) >= 20
