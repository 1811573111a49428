"""The torch-free contract between the model service and everything that shows or carries its results.

    step.py        StepRecord (one generated token: candidates, every stage, the draw, timings), BatchStep,
                   ModelInfo, Room, Waiting, ManyDraws: small frozen dataclasses with to_dict()
    trace.py       the forward pass's records (lesson 10): shapes, embedding rows, residual, attention, lens
    settings.py    SamplingSettings (one request's knobs) and Request; settings_from / request_from read JSON
    validation.py  one validator per kind of input; every message names its field (InputError carries a key)
    wire.py        records and errors as JSON and back, for every process boundary
    utf8.py        a token's bytes read as characters in context ("ủ", not \\xe1\\xbb)

The page imports from here, never torch.
"""
