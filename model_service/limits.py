"""Every default and every limit of the playground, in one place (plain numbers: no torch, no gradio).

The UI's sliders, the deep links, the API signatures, the CLI and every help text read them from
here, so "how long may a run be?" has one answer. The limits protect a room: a shared link is opened
by 30-100 people at once, and no single request may hold the model for more than a few seconds.
"""

from __future__ import annotations

# ---- what a request asks for, when it does not say ------------------------------------------------
LESSON_PROMPT = "The capital of France is"  # lessons 10 and 13 both start from it
LESSON_PROMPT_VI = "Thủ đô của Pháp là"  # the same prompt, for a page in Vietnamese
DEFAULT_MAX_NEW_TOKENS = 48  # the lab's run length
DEFAULT_ENGINE_MAX_NEW_TOKENS = 32  # an engine row's (eight rows side by side stay readable)
DEFAULT_TOP_N = 20  # candidates kept per step record (the bars of a stage chart)
DEFAULT_LM_HEAD_TOP_K = 10  # tokens broken down as ‖h‖·‖w‖·cos
DEFAULT_TRACE_TOP_N = 5  # top logits per position in a forward-pass trace

# ---- limits on one request ----------------------------------------------------------------------------
# Measured on 2 CPU cores with SmolLM2-135M: a 1,024-token prompt prefills in ~1.8 s and traces in ~2.5 s;
# 16,000 tokens held the model for 144 s. Every path (lab, Step, LM head, trace, engine rows, API) checks it.
MAX_PROMPT_TOKENS = 1024
MAX_NEW_TOKENS = 512  # at ~16 tokens/s on that CPU: half a minute, interleaved with everyone else's steps
MAX_TOP_N = 100  # candidates a step record may carry
MAX_TRACE_TOP_N = 20  # top logits per position in a forward-pass trace
MAX_STOP_STRINGS = 8
MAX_STOP_CHARS = 64  # per stop string
MAX_BATCH_REQUESTS = 64  # one generate_batch call (the API)
MAX_ENGINE_ROWS = 8  # the Engine tab's table

# A seed is shown, put in links and typed back: every seed must survive a trip through a JavaScript
# number (a float64), so seeds live below 2**53 (fresh ones are drawn there too).
MAX_SEED = 2**53 - 1

# ---- limits on the room (the scheduler that owns the model) --------------------------------------------
# Rows sampled in one forward pass: a few on a 2-core CPU (each row still costs its share of the
# step), many on a GPU, where a step of 64 rows costs about what one row costs. Env: NTP_MAX_ROWS.
MAX_ROWS_CPU = 16
MAX_ROWS_GPU = 64
# Requests waiting for a row; past this a caller is told the room is full. Env: NTP_QUEUE_SIZE.
QUEUE_SIZE = 256
# A long prompt is read in chunks, round-robin with other newcomers, within a token budget per step:
# on 2 CPU cores 128 tokens of prefill cost ~0.2 s, so a 1,024-token prompt adds at most ~0.45 s to each of
# four steps instead of stalling every stream for ~1.8 s at once. Chunks start at fixed offsets, so a
# prompt is read the same way whoever else is waiting (seeded runs stay reproducible).
PREFILL_CHUNK_TOKENS = 128
PREFILL_TOKENS_PER_STEP = 256
# A request with more new tokens than this is "long": long ones may hold at most half the rows, and a
# shorter request behind a long one that would exceed that share goes first.
LONG_REQUEST_TOKENS = 128
# Gradio's own queue in front of the event handlers (each waiting browser event holds a slot).
GRADIO_QUEUE_SIZE = 512
GRADIO_THREADS = 256  # handler threads: a streaming learner's handler mostly waits on the scheduler

# ---- ranges of the sampling knobs (beyond the sliders, for the API and links) ---------------------------
MAX_TEMPERATURE = 100.0  # T = 100 already flattens any real distribution to near-uniform
MAX_TOP_K = 1_000_000  # larger than any vocabulary; top_k >= vocab is "off"
