"""Every default and every limit of the model service, in one place (plain numbers: no torch, no gradio).

The service's: what a request may ask for and what the room of rows holds. The page's own (the lessons'
prompt, the tabs' sizes, follow rooms, the HTTP API's caps) are in playground/limits.py, which reads these too,
so "how long may a run be?" has one answer. The limits protect a room: a shared link is opened
by 30-100 people at once, and no single request may hold the model for more than a few seconds.
"""

from __future__ import annotations

# ---- what a request asks for, when it does not say ------------------------------------------------
DEFAULT_MAX_NEW_TOKENS = 48  # the lab's run length
DEFAULT_TOP_N = 20  # candidates kept per step record (the bars of a stage chart)
SAMPLER_PARAMS_CACHED = 64  # batches of settings whose knob tensors the sampler keeps made (sampling/pipeline.py)
DEFAULT_LM_HEAD_TOP_K = 10  # tokens broken down as ‖h‖·‖w‖·cos
DEFAULT_TRACE_TOP_N = 5  # top logits per position in a forward-pass trace
DEFAULT_PROMPT_TOP_N = 5  # alternatives per prompt position in prompt_logprobs (OpenAI's echo with logprobs)

# ---- limits on one request ----------------------------------------------------------------------------
# Measured on 2 CPU cores with SmolLM2-135M: a 1,024-token prompt prefills in ~1.8 s and traces in ~2.5 s;
# 16,000 tokens held the model for 144 s. Every path (lab, Step, LM head, trace, engine rows, API) checks it.
MAX_PROMPT_TOKENS = 1024
MAX_NEW_TOKENS = 512  # at ~16 tokens/s on that CPU: half a minute, interleaved with everyone else's steps
MAX_TOP_N = 100  # candidates a step record may carry
MAX_TRACE_TOP_N = 20  # top logits per position in a forward-pass trace
MAX_PROMPT_TOP_N = 20  # alternatives per prompt position: 1,024 positions x 20 keep the record ~2 MB as JSON
MAX_STOP_STRINGS = 8
MAX_STOP_CHARS = 64  # per stop string
MAX_BATCH_REQUESTS = 64  # one generate_batch call (the API)
# Sampling one frozen step many times (the lab's "Look inside this step"): the draws are one vectorised
# read of the final distribution's cumulative bar (~1 ms for 10,000 on the CPU); the cost is the one
# forward pass that recomputes the step's logits.
MIN_MANY_DRAWS = 100
MAX_MANY_DRAWS = 10_000
DEFAULT_MANY_DRAWS = 1_000

# The live lab's what-ifs (model_service/engine/kept.py): a lab run keeps each step's raw logits (float32, V x 4
# bytes: 196 KB a step for SmolLM2's 49,152 tokens, 513 KB for Llama-3's 128,256), so that moving a knob after a
# run redraws a step with no forward pass. A page keeps one run, its oldest steps let go past PAGE; the room keeps
# TOTAL, the page that moved a knob longest ago let go first. A step let go is recomputed by one forward pass.
KEPT_LOGITS_PAGE_BYTES = 64 << 20  # SmolLM2: 341 steps (a 48-token run is 9.4 MB); Llama-3: 130 steps
KEPT_LOGITS_TOTAL_BYTES = 1 << 30  # SmolLM2: ~110 pages with a 48-token run each
MAX_KEEP_KEY_CHARS = 64  # the page's name for its kept run
MAX_PATCH_CELLS = 1024  # cells of one patching call (32 a forward pass): the page's grid, its last 1024 // blocks positions
MAX_STEER_TOKENS = 48  # a steered run and its plain twin: a demonstration, outside the room's scheduler
MAX_STEER_SCALE = 16.0  # times the direction (the difference of two streams)
PLAIN_LOGITS_KEPT = 8  # prompts whose own last logits a knock-out keeps for the next (Gemma: 1 MB each)

# A seed is shown, put in links and typed back: every seed must survive a trip through a JavaScript
# number (a float64), so seeds live below 2**53 (fresh ones are drawn there too).
MAX_SEED = 2**53 - 1

# The model a start runs when none is named: the embedded SmolLM2-135M-Instruct (models/catalog.py)
DEFAULT_MODEL = "smollm2"

# ---- limits on the room (the scheduler that owns the model) --------------------------------------------
# Rows sampled in one forward pass: a few on a 2-core CPU (each row still costs its share of the
# step), many on a GPU, where a step of 64 rows costs about what one row costs. Env: NTP_MAX_ROWS.
MAX_ROWS_CPU = 16
MAX_ROWS_GPU = 64
# Requests waiting for a row; past this a caller is told the room is full. Env: NTP_QUEUE_SIZE.
QUEUE_SIZE = 256
# What a host may set them to (--max-rows / NTP_MAX_ROWS, --queue-size / NTP_QUEUE_SIZE; 0 waiting = refuse at once)
MAX_ROWS_CEILING = 1024
QUEUE_SIZE_CEILING = 100_000
# The model's CPU threads a host may ask for (NTP_THREADS)
MAX_THREADS = 1024
# A long prompt is read in chunks, round-robin with other newcomers, within a token budget per step:
# on 2 CPU cores 128 tokens of prefill cost ~0.2 s, so a 1,024-token prompt adds at most ~0.45 s to each of
# four steps instead of stalling every stream for ~1.8 s at once. Chunks start at fixed offsets, so a
# prompt is read the same way whoever else is waiting (seeded runs stay reproducible).
PREFILL_CHUNK_TOKENS = 128
PREFILL_TOKENS_PER_STEP = 256
# Newcomers' first chunks share padded passes grouped by length: a pass costs about this many padded token
# slots more than its slots (the weights are read once per pass). Measured on 2 CPU cores: a one-token pass
# 64 ms, a slot ~3.4 ms; 16 prompts of 3-13 tokens in one pass 699 ms, in two by length 527 ms.
PREFILL_PASS_COST_TOKENS = 24
# The scheduler in a process of its own (model_service/engine/scheduler_process.py) loads its own copy of the model;
# the page waits this long for it. Env / app.py: NTP_SCHEDULER=process|thread|auto (auto: a process on a CPU).
SCHEDULER_PROCESS_START_S = 600.0
SCHEDULER_MODES = ("auto", "process", "thread")
# How much lower than the web process's the scheduler process's CPU priority is, once its model is loaded (os.nice):
# the room's passes take every cycle they get, while a learner's what-if, a page's files and the host's own browser
# need a few ms each, at once. Measured on 2 cores (bench/bench_live.py, a page moving five knobs beside 16 script
# learners generating, three interleaved rounds of 40 moves each): the medians 93-137 ms (mean 115) against 96-170
# (mean 123) at the same priority; the slowest moves unchanged within the noise (312 and 366 ms); the room's rate
# alone and beside 16 learners moving a knob the same (45.6-49.6 and 45.2-48.4 tok/s alone).
SCHEDULER_NICE = 10
# A request with more new tokens than this is "long": long ones may hold at most half the rows, and a
# shorter request behind a long one that would exceed that share goes first.
LONG_REQUEST_TOKENS = 128
# The batch-invariant mode (model_service/engine/invariant.py): a row's logits bit-identical whatever shares its
# forward pass, so a seed replays in any room. Its default per device (--batch-invariant / NTP_BATCH_INVARIANT
# say otherwise), from bench/bench_invariance.py's cost on the room's throughput.
BATCH_INVARIANT_DEFAULT = {"cpu": False, "cuda": False}
# Ray Serve (model_service/deploy/ray_serve.py): requests one replica takes at once (its scheduler queues what exceeds its
# rows, and refuses past QUEUE_SIZE with a clear message, so Serve must not refuse first), and the ongoing
# requests per replica the autoscaler aims at: the rows a CPU replica steps with first records under 2 s.
SERVE_MAX_ONGOING = MAX_ROWS_GPU + QUEUE_SIZE
SERVE_TARGET_ONGOING = MAX_ROWS_CPU
# How long another Python thread may keep the GIL once the scheduler asks for it back (Python's default: 5 ms).
# A forward pass is hundreds of torch ops dispatched from Python; between two ops the scheduler thread must
# take the GIL again, while the web server's event loop holds it for every record it streams (Gradio's
# diff, JSON, SSE: ~9 ms of Python per record). With 16 learners streaming, a 16-row forward pass took
# 270-340 ms in the app against ~170 ms alone; at 0.5 ms it took 207-240 ms (room 36-42 -> 47-56 tok/s).
GIL_SWITCH_INTERVAL_S = 0.0005
# glibc maps a block above its threshold (128 KiB, raised to the largest block freed so far) anew on every
# malloc and unmaps it on free. A batch's KV cache grows by a column a step, so each torch.cat (about 1 MiB per
# layer at 16 rows) asks for more than any freed block and page-faults fresh pages. Blocks up to this size
# stay in the heap and are reused (the process keeps its high-water mark). Isolated 16-row decode at ~80
# tokens of context: torch.cat 31 -> 13 ms a step, the step 193 -> 173 ms.
MALLOC_MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  # glibc's largest allowed value on 64-bit

# ---- ranges of the sampling knobs (beyond the sliders, for the API and links) ---------------------------
MAX_TEMPERATURE = 100.0  # T = 100 already flattens any real distribution to near-uniform
MAX_TOP_K = 1_000_000  # larger than any vocabulary; top_k >= vocab is "off"
MAX_REPETITION_PENALTY = 10.0  # divides a positive logit by up to 10 (1 = off; engines use ~1.05-1.3)
MAX_FREQUENCY_PENALTY = 2.0  # frequency and presence penalties: OpenAI's and vLLM's range, -2 to 2
MAX_PENALTY_LAST_N = 1_000_000  # llama.cpp's window of counted tokens (-1 = the whole context, 0 = none)
DEFAULT_PENALTY_LAST_N = 64  # llama.cpp's default (common/common.h penalty_last_n)
MAX_LOGIT_BIAS = 100.0  # a bias is in [-100, 100], as OpenAI and vLLM take it; -100 is "never this token"
MAX_LOGIT_BIAS_TOKENS = 300  # tokens one request may bias: OpenAI's cap
MAX_EPSILON_CUTOFF = 0.5  # epsilon and eta cutoffs: transformers takes (0, 1); above 0.5 only the top token could stay
MAX_TOP_N_SIGMA = 100.0  # top-n-sigma's n: at 100 standard deviations nothing is ever cut
DEFAULT_XTC_THRESHOLD = 0.1  # llama.cpp's default (common/common.h xtc_threshold)
MAX_DYNATEMP_EXPONENT = 10.0
# DRY ("don't repeat yourself"), llama.cpp's defaults (common/common.h) and this playground's caps
MAX_DRY_MULTIPLIER = 10.0  # 0 = off; llama.cpp's documentation suggests 0.8
DEFAULT_DRY_BASE = 1.75
MAX_DRY_BASE = 10.0  # the penalty grows as base^(repeat - allowed length): at 10 one token more is 10x
DEFAULT_DRY_ALLOWED_LENGTH = 2  # a repeat this long is free; one token longer is penalised
MAX_DRY_ALLOWED_LENGTH = 1_000
DEFAULT_DRY_BREAKERS = ("\n", ":", "\"", "*")  # a repeat does not run across these
MAX_DRY_BREAKERS = 16
MAX_DRY_BREAKER_CHARS = 40  # llama.cpp's cap on a breaker's length
# mirostat (llama.cpp): the target surprise tau in bits and the learning rate eta, its defaults
DEFAULT_MIROSTAT_TAU = 5.0
MAX_MIROSTAT_TAU = 30.0  # bits: above log2 of any vocabulary, mirostat cuts nothing
DEFAULT_MIROSTAT_ETA = 0.1
MAX_MIROSTAT_MU = 1_000.0  # a continued run's mu, as its last record carries it
# transformers' no-repeat n-gram (no_repeat_ngram_size) and vLLM's min_tokens (transformers' min_new_tokens)
MAX_NO_REPEAT_NGRAM = 64  # 0 = off; an n-gram longer than the context bans nothing
MAX_ADJUSTED_SHOWN = 32  # a step record names at most this many tokens whose logit the bias, penalties or DRY moved
# a stage beyond the lesson's is recorded when it moved a shown probability or the entropy by more than this much of
# itself (or changed the kept count): float32 round-off moves them by ~1e-6 of themselves (engine/step.py)
STAGE_SHOWN_CHANGE = 1e-4
MIROSTAT_M = 100  # mirostat v1 estimates the Zipf exponent from this many most probable tokens (llama.cpp's m)

# ---- GPUs (engine/card.py, deploy/zero_gpu.py) ---------------------------------------------------------------
# Rows per step on a GPU are sized for the card: the weights, then every row's KV cache for a full request
# (MAX_PROMPT_TOKENS + MAX_NEW_TOKENS), within this share of the card's memory (the rest: the CUDA context,
# activations, the sampler's (rows, vocab) float32 tensors, fragmentation). Capped by MAX_ROWS_GPU.
CARD_MEMORY_SHARE = 0.85
SAMPLER_TENSORS_PER_ROW = 12  # (vocab,) float32 tensors the sampling pipeline holds per row, at its peak
# ZeroGPU leases the GPU per call (`@spaces.GPU(duration=...)`, shorter = better queue priority). A Generate is
# run in slices of at most this many steps, each its own lease; the duration asked for is sized from the slice.
ZERO_GPU_SLICE_TOKENS = 64
ZERO_GPU_BASE_SECONDS = 10.0  # a fresh worker moves the weights onto the GPU before the first step
ZERO_GPU_SECONDS_PER_TOKEN = 0.1  # generous: an 8B model's bandwidth bound on an H200 slice is under 10 ms a step
ZERO_GPU_TRACE_SECONDS = 20.0  # a trace, one block's attention, an LM-head view: one forward pass each

# The lesson "why the same seed can give another token in a busy room": one step alone and as one row of a room
# of this many (a full CPU room; forward_pass/batch_effect.py)
BATCH_EFFECT_ROWS = MAX_ROWS_CPU

# ---- the weights' precision (models/precision.py), env NTP_PRECISION / --precision --------------------------------
PRECISIONS = ("fp32", "bf16", "int8", "int4")
# fp32 on a CPU keeps the lessons' numbers as the model's arithmetic gives them (and bf16 matmuls were no faster
# there: BENCHMARKS.md, "Precision"); bf16 on a GPU
PRECISION_DEFAULT = {"cpu": "fp32", "cuda": "bf16"}
PRECISION_TOP_N = 5  # the precision check's top tokens, from each side
# the precision check keeps a float32 copy of the model on the CPU: not for models above this (an 8B model's would be
# 32 GB)
PRECISION_REFERENCE_MAX_PARAMETERS = 2_000_000_000
# fp32 on a CPU: a lone learner's one-row products go through numpy's BLAS when, timed at load on the model's own
# layers, it is at least this many times as fast as torch's F.linear (models/row_products.py; 1.9x on this project's
# AMD EPYC). A margin, so a CPU where the two are even keeps torch's and its choice does not flip between starts.
ROW_BLAS_GAIN = 1.25
ROW_TIMING_ROUNDS = 5  # interleaved rounds of that timing (torch, numpy, torch, ...): medians
INT4_GROUP = 32  # int4: a scale and a zero per this many weights along a row (Q4_1's block, the embedded GGUF's)

# ---- the decode step at static shapes (engine/static_decode.py): CUDA graphs per bucket ------------------------
GRAPH_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)  # a batch of n rows runs in the smallest bucket that holds it
GRAPH_MIN_LENGTH = 256  # cache length buckets: powers of two from here
# env NTP_CUDA_GRAPHS. On on CUDA: measured on an H200 (bench/bench_gpu.py (e), BENCHMARKS.md), an 8B model's step
# took 1.7x less time at 1 row and 1.8x less at 64. The CPU has no graphs to replay; ZeroGPU has no torch.compile.
CUDA_GRAPHS_DEFAULT = {"cpu": False, "cuda": True}

# ---- the native decode step (models/native_step.py) -----------------------------------------------------------------
NATIVE_BUILD_TIMEOUT_S = 300  # one compile of native/llama_step.c (1-3 s on this project's 2-core machine)
NATIVE_MIN_CAPACITY = 256  # a row's first KV cache in the native step, in columns; doubled when full
