"""An OpenAI-compatible API beside the page, on the app's own port (docs/openai.md): /v1/models,
/v1/completions and /v1/chat/completions, served by the room's scheduler like every learner.

    from openai import OpenAI
    client = OpenAI(base_url="http://127.0.0.1:7860/v1", api_key="-")
    client.completions.create(model="HuggingFaceTB/SmolLM2-135M-Instruct", prompt="The capital of France is",
                              max_tokens=1, temperature=0, logprobs=5)

routes.py: the routes and their streams; schema.py: a request body -> what the service runs; responses.py: the
answers and chunks; logprobs.py: which stage logprobs come from; access.py: who may call; errors.py: OpenAI's
error shape. Named openai_api, not openai: the real `openai` package is the tests' client.
"""

from .access import Access, access_for
from .routes import launch_kwargs, routes

__all__ = ["Access", "access_for", "launch_kwargs", "routes"]
