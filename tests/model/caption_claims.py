"""Every filled claim of the scenes' captions, checked on a real model's run (tests/model/test_caption_facts.py on
the embedded model, test_second_model.py on Gemma): each number is the run's own, and each sampler's claim holds."""

from __future__ import annotations

from playground.common.i18n import LANGUAGES, tr
from playground.common.text import escape_html, pct
from playground.lab.replays import Replays, scene_runs
from playground.workshop.caption_facts import token_text
from playground.workshop.scene_bar import caption_markdown
from playground.workshop.scenes import load, scene_paths


def stage(record, name):
    return next(s for s in record.stages if s.name == name)


def row_of(record, fact):
    if fact.pick == "chosen":
        return [t.id for t in record.candidates].index(record.token_id)
    probs = stage(record, fact.rank_at or fact.at).probs
    return probs.index(max(probs))


def claims(scene, records, lang) -> list[str]:
    """What the caption must say of this run, fact by fact (the values as the caption writes them)."""
    out = []
    for fact in scene.facts.values():
        if fact.show == "text":
            out.append(escape_html(records[-1].text))
            continue
        if fact.show in ("mu_low", "mu_high"):
            mus = [r.mirostat_mu for r in records[fact.step - 1:]]
            out.append(f"{(min if fact.show == 'mu_low' else max)(mus):.1f}")
            continue
        record = records[fact.step - 1]
        if fact.show in ("kept", "mass"):
            s = stage(record, fact.at)
            out.append(f"{s.kept_count:,}" if fact.show == "kept" else f"{s.kept_mass:.2f}")
        elif fact.show == "removed":
            names = [s.name for s in record.stages]
            before, after = record.stages[names.index(fact.at) - 1], stage(record, fact.at)
            gone = [i for i, (b, a) in enumerate(zip(before.probs, after.probs)) if b > 0 and a == 0]
            assert gone, f"{scene.id}: {fact.at} removed nothing at step {fact.step}"
            out += [f"{token_text(record, i, lang)} ({pct(before.probs[i])})" for i in gone[:4]]
        elif fact.show == "shift":
            out.append(f"{abs(dict(record.adjusted)[record.candidates[row_of(record, fact)].id]):.2f}")
        else:
            i = row_of(record, fact)
            if fact.show in ("token", "token_p"):
                out.append(token_text(record, i, lang))
            if fact.show in ("p", "token_p"):
                out.append(pct(stage(record, fact.at).probs[i]))
    return out


def lesson_claims(scene_id: str, records) -> None:
    """What each sampler's scene teaches, on this model's run."""
    first = records[0]
    if scene_id == "l13-repetition-penalty":  # the penalty lowers the repeated top token
        top = stage(first, "raw").probs.index(max(stage(first, "raw").probs))
        assert stage(first, "penalties").probs[top] < stage(first, "raw").probs[top]
    if scene_id == "l13-dry":  # DRY moved the top token's logit and lowered it
        top = stage(first, "raw").probs.index(max(stage(first, "raw").probs))
        assert dict(first.adjusted)[first.candidates[top].id] < 0
        assert stage(first, "dry").probs[top] < stage(first, "raw").probs[top]
    if scene_id == "l13-xtc":  # XTC removed tokens of at least 5 %, and what leads now was under them
        names = [s.name for s in first.stages]
        before, after = first.stages[names.index("xtc") - 1], stage(first, "xtc")
        gone = [b for b, a in zip(before.probs, after.probs) if b > 0 and a == 0]
        assert gone and min(gone) >= 0.05 and max(after.probs) > 0
    if scene_id == "l13-no-repeat":  # the banned token has no probability left
        assert 0.0 in stage(first, "no_repeat_ngram").probs


def check_every_scene(service) -> int:
    """Open every scene with facts on `service` in every language: every claim filled and the run's own; returns
    how many claims were checked."""
    scenes = load(scene_paths())
    records_of, checked = scene_runs(service, Replays()), 0
    for scene in (s for s in scenes.scenes if s.facts):
        for lang in LANGUAGES:
            records = records_of(scene, lang)
            assert records, f"{scene.id} ({lang}): no run"
            caption = caption_markdown(scene, scenes, lang, records)
            assert tr(lang, "scenes.fact.missing") not in caption and tr(lang, "scenes.fact.pending") not in caption
            assert "{" not in caption.split("\n\n", 1)[1].replace("{first}", "")
            for claim in claims(scene, records, lang):
                assert claim in caption, f"{scene.id} ({lang}): {claim!r} not in {caption!r}"
                checked += 1
            lesson_claims(scene.id, records)
    return checked
