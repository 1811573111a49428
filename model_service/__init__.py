"""The model service: every tensor of the playground lives here; out come small records.

    from model_service import ModelService, SamplingSettings
    service = ModelService.load()                      # the embedded SmolLM2-135M-Instruct
    for record in service.generate("The capital of France is", SamplingSettings(temperature=0)):
        print(record.piece, record.stage("final").chosen_prob)
"""

from .loading import EMBEDDED, ModelLoadError
from .records import DrawInfo, ModelInfo, Stage, StepRecord, Token
from .sampling import ORDERS, SamplingSettings, pipeline, sample, stage_names
from .service import ModelService, PlaygroundService, as_settings

__all__ = [
    "EMBEDDED",
    "ORDERS",
    "DrawInfo",
    "ModelInfo",
    "ModelLoadError",
    "ModelService",
    "PlaygroundService",
    "SamplingSettings",
    "Stage",
    "StepRecord",
    "Token",
    "as_settings",
    "pipeline",
    "sample",
    "stage_names",
]
