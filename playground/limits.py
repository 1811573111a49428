"""The page's defaults and limits, in one place (plain numbers: no torch, no gradio).

The service's own (a request's length, the room's rows, the knobs' ranges) live in model_service/limits.py and
are read here as well, so a page module asks one `limits` for both; what only the page knows (the lessons'
prompt, the tabs' sizes, run files, the follow rooms, the HTTP API's caps, Gradio's queue) is declared below.
"""

from __future__ import annotations

from model_service.limits import *  # noqa: F403 - the service's limits, which every page module also reads
from model_service.limits import DEFAULT_TOP_N

# ---- what the page asks for, when a visitor does not say -------------------------------------------------------
LESSON_PROMPT = "The capital of France is"  # lessons 10 and 13 both start from it
LESSON_PROMPT_VI = "Thủ đô của Pháp là"  # the same prompt, for a page in Vietnamese
# the interventions' second prompt, patched into the lesson's: as many tokens as it on both offline models
PATCH_SOURCE, PATCH_SOURCE_VI = "The capital of Italy is", "Thủ đô của Mỹ là"
# steering: the prompt it runs, the two prompts whose streams' difference is the direction, where, how many tokens
STEER_PROMPT, STEER_PROMPT_VI = "I think that this movie is", "Tôi nghĩ bộ phim này"
STEER_TOWARDS, STEER_TOWARDS_VI = "I love this. It is wonderful", "Tôi yêu nó. Nó thật tuyệt vời"
STEER_AWAY, STEER_AWAY_VI = "I hate this. It is terrible", "Tôi ghét nó. Nó thật tệ hại"
STEER_BLOCK, STEER_TOKENS, STEER_SLIDER = 10, 20, 4.0  # (SmolLM2: block 10 at scale 1 turns "great" to "wonderful")
DEFAULT_ENGINE_MAX_NEW_TOKENS = 32  # an engine row's (eight rows side by side stay readable)
MAX_ENGINE_ROWS = 8  # the Engine tab's table
MAX_RUN_FILE_BYTES = 8_000_000  # an imported run (JSON): a 512-step run is ~1.5 MB; the upload route allows this much
DEFAULT_PORT = 7860  # the port the page serves on unless told (--port, NTP_PORT)

# ---- the web server -------------------------------------------------------------------------------------------
GRADIO_QUEUE_SIZE = 512  # Gradio's own queue in front of the event handlers (each waiting browser event holds a slot)
GRADIO_THREADS = 256  # handler threads: a streaming learner's handler mostly waits on the scheduler

# ---- the OpenAI-compatible API beside the page (playground/openai_api/, docs/openai.md) ------------------------
# Each request joins the room's scheduler like a learner (the service's caps hold); these are the API's own.
API_MAX_TEMPERATURE = 2.0  # OpenAI's range (0-2), the lab's slider's too; the service itself takes up to MAX_TEMPERATURE
API_MAX_CHOICES = 4  # n: completions of one request, each a row of the room's batch
API_MAX_TOP_LOGPROBS = DEFAULT_TOP_N  # top_logprobs (chat) / logprobs (completions): OpenAI's chat cap; each step record carries this many
API_COMPLETION_MAX_TOKENS = 16  # max_tokens of a completion that does not say (OpenAI's default)
API_CHAT_MAX_TOKENS = 256  # of a chat completion that does not say (OpenAI: the context's rest; a room caps it)
API_MAX_BODY_BYTES = 262_144  # a request's JSON: a MAX_PROMPT_TOKENS prompt is a few kilobytes
API_THREADS = 256  # threads that wait on the service for API requests (apart from Gradio's handler threads)

# ---- the host's model picker (playground/header.py) -------------------------------------------------------------
# How often an open page asks whether the host switched the model (seconds). Each tick is one tiny event
# with no model work; 100 learners at 5 s is 20 events a second through Gradio.
MODEL_WATCH_SECONDS = 5.0
# A wrong host key waits this long before its answer, so guessing the key through the API is slow.
HOST_KEY_DELAY_SECONDS = 1.0

# ---- following the host (playground/workshop/follow_rooms.py, playground/workshop/follow/) -----------------------------
# A room code: short enough to read aloud and type on a phone, from letters and digits no one confuses
# (no 0/O, 1/I/L, 5/S, 2/Z, 8/B, U/V). 23 symbols, 5 places: ~6 million codes for at most MAX_FOLLOW_ROOMS rooms.
FOLLOW_CODE_ALPHABET = "34679ACDEFGHJKMNPQRTWXY"
FOLLOW_CODE_LENGTH = 5
MAX_FOLLOW_ROOMS = 64  # open rooms on one server; an idle one expires first
FOLLOW_ROOM_IDLE_SECONDS = 3 * 3600  # a room no one published to for this long is closed (a workshop's lunch break fits)
# How often a follower's stream looks at its room (seconds). A look is a comparison of two integers on the event
# loop; the measured cost and delay are in BENCHMARKS.md ("Following the host").
FOLLOW_POLL_SECONDS = 0.2
HOST_PUBLISH_SECONDS = 0.5  # how often the host's page sends its tab, settings and step while a room is open
# A published state (every tab's link fields, follow_rooms.state_chars) longer than this is refused, naming the size. A
# room carries the whole page as a link would: the engine table's JSON (a link's limit, links.MAX_ENGINE_JSON, 8000)
# and up to three prompts (lab, forward, compare; MAX_PROMPT_TOKENS of ~4-6 characters each) plus a few hundred
# characters of settings: ~27,000 at most, so 4096 (the lab alone) became 32 KiB. MAX_FOLLOW_ROOMS of them is 2 MiB.
MAX_FOLLOW_STATE_CHARS = 32_768

# ---- the tabs' own limits (each module names its use; the number lives here) -------------------------------------
TOY_MAX_ABS_LOGIT = 1e6  # a logit beyond this is a typo, not a lesson (playground/softmax/toy.py)
MAX_FORCED_STEPS = 16  # forced steps in one path (a link stays short; a tree of a lesson is a few branches) (playground/lab/branches.py)
MAX_BRANCHES = 12  # branches kept in one tree; the oldest forced ones make way (playground/lab/branches.py)
LINK_MAX_BLOCK = 1000  # a link's block must be a whole number; the model's own depth is checked when it traces (playground/workshop/links.py)
LINK_MAX_ENGINE_JSON = 8000  # characters: the table's JSON in a link (playground/workshop/links.py)
MAX_SCENES = 200  # playground/workshop/scenes.py
SCENE_REPLAYS = 64  # the scenes' lab runs kept to show again at once, both languages (playground/lab/replays.py)
SCENE_BATCHES = 16  # the Engine and Compare scenes' batches kept likewise (playground/common/kept_batches.py)
SCENE_INTERVENTIONS = 16  # the interventions' scenes' results kept likewise (playground/forward/kept_interventions.py)
COMPARE_MAX_NEW_TOKENS = 24  # four columns side by side stay readable (playground/compare/columns.py)
FORWARD_MAX_CHIPS = 256  # playground/forward/text.py
FORWARD_DEFAULT_BLOCKS = 30  # the slider's range until the first trace tells the real depth (playground/forward/components.py)
# A draw whose u lies closer than this to an edge of its token's interval is marked as a knife's edge (and a greedy
# step whose top two logits are closer than this): a row's logits moved by up to ~1e-4 between alone and batched
# on 2 CPU cores (float32 GEMMs take other kernels for other batch sizes), which can move an edge by about as much
# (playground/lab/run.py)
KNIFE_EDGE_MARGIN = 1e-4
# Sweep T (playground/lab/sweep.py): the step on screen redrawn at each of these temperatures, the lesson's 0.1 to 2
SWEEP_TEMPERATURES = tuple(round(0.1 * k, 1) for k in range(1, 21))
