"""The model service: every tensor of the playground lives here; out come small records.

    from model_service import ModelService, SamplingSettings
    service = ModelService.load()                      # the embedded SmolLM2-135M-Instruct
    for record in service.generate("The capital of France is", SamplingSettings(temperature=0)):
        print(record.piece, record.stage("final").chosen_prob)

`model_service.records.step` imports nothing heavy, so the UI can hold and rebuild records without torch;
the names below load their modules (and torch) on first use.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "EMBEDDED": "models.loading",
    "ModelLoadError": "models.loading",
    "DrawInfo": "records.step",
    "ModelInfo": "records.step",
    "Stage": "records.step",
    "StepRecord": "records.step",
    "Token": "records.step",
    "ORDERS": "records.settings",
    "SamplingSettings": "records.settings",
    "pipeline": "sampling.pipeline",
    "sample": "sampling.pipeline",
    "stage_names": "records.settings",
    "Request": "records.settings",
    "BatchStep": "records.step",
    "Waiting": "records.step",
    "Room": "records.step",
    "RoomRow": "records.step",
    "ModelService": "service",
    "ModelClient": "client",
    "settings_from": "records.settings",
    "request_from": "records.settings",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'model_service' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value
