"""Every sampling knob, one row each: the one place a knob is declared (plain data, no tensors; the page imports it).

A row says what the knob is (its name, the value that means off, the range the API accepts), where it acts (the
stage of the chain that reads it, the orders whose engine lacks it and why), and how the page shows it (the lab's
accordion and control, the slider's range and step, the English name an error uses). Everything else is generated
from the rows: SamplingSettings' fields and checks (settings.py), the sampler's per-row tensors (sampling/pipeline.py),
the lab's controls and their positional order (lab/request.py, lab/tab.py), links and run files (lab/deep_link.py,
lab/export.py), the settings tables' "more samplers" cell (common/tables.py), /stream_records' parameters
(playground/api.py) and the OpenAI API's extra fields (openai_api/schema.py).

Adding a knob: its math (a function in sampling/transforms.py, named as its stage), its row here (appended: the
lab's /generate API and run files list the knobs in row order, so a new one goes last), its stage in ORDERS where
its engine applies it, its label and info in assets/i18n/ (both languages), and docs/sampling.md.

The orders (ORDERS below; sampling/pipeline.py runs them), as pictures:

  "hf" (Hugging Face generate(); the lesson's order):
    raw -> logit_bias -> penalties -> no_repeat_ngram -> min_tokens -> temperature -> top_h -> top_k -> top_p
        -> min_p -> typical_p -> epsilon_cutoff -> eta_cutoff -> final
  "vllm" (vLLM v1):
    raw -> logit_bias -> min_tokens -> penalties -> temperature -> min_p -> top_k -> top_p -> final
  "llama.cpp" (its default chain: cut at T = 1, then reshape; dynamic temperature in the temperature stage):
    raw -> logit_bias -> penalties -> dry -> top_n_sigma -> top_k -> typical_p -> top_p -> min_p -> xtc -> temperature
        -> mirostat -> final       (mirostat on: only logit_bias -> temperature -> mirostat act; settings refuse the rest)
  "custom" (text-generation-webui's sampler priority; llama.cpp's arithmetic for every stage):
    raw -> logit_bias -> penalties -> dry -> the row's own `chain`, in its order -> final
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import limits

# -- the stages and the orders -------------------------------------------------------------------------------------

# The stages that change logits anywhere in the vocabulary (they can reorder the ranking) and read the context:
# every engine applies them first, so the cuts after them rank the adjusted logits. no_repeat_ngram and min_tokens
# ban tokens (their logit becomes -inf): transformers' NoRepeatNGram and MinNewTokensLength processors, vLLM's
# min_tokens; each order lists the ones its engine has, where its engine applies them.
BANS = ("no_repeat_ngram", "min_tokens")  # the adjusters that remove tokens (-inf) rather than move them
MOVERS = ("logit_bias", "penalties", "dry")  # the adjusters that move logits (llama.cpp's, and a custom chain's)
ADJUSTERS = (*MOVERS, *BANS)
ORDERS: dict[str, tuple[str, ...]] = {
    # transformers' generate(): its processors, then its warpers in _get_logits_processor's order
    "hf": ("logit_bias", "penalties", "no_repeat_ngram", "min_tokens", "temperature", "top_h", "top_k", "top_p",
           "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff"),
    "vllm": ("logit_bias", "min_tokens", "penalties", "temperature", "min_p", "top_k", "top_p"),
    # mirostat, when on, replaces the chain between the bias and temperature (settings refuse those knobs then)
    "llama.cpp": (*MOVERS, "top_n_sigma", "top_k", "typical_p", "top_p", "min_p", "xtc", "temperature", "mirostat"),
    "custom": MOVERS,  # then the row's own `chain` (text-generation-webui's "sampler priority")
}
# Each stage as the page names it, in every language (the stage panels' titles, the chain board's tiles); a custom
# chain may order the stages marked True, after the adjusters.
STAGES: dict[str, tuple[str, bool]] = {
    "logit_bias": ("logit bias", False), "penalties": ("penalties", False), "dry": ("DRY", False),
    "no_repeat_ngram": ("no-repeat n-gram", False), "min_tokens": ("min tokens", False),
    "temperature": ("temperature", True), "top_k": ("top-k", True), "top_p": ("top-p", True),
    "min_p": ("min-p", True), "typical_p": ("typical-p", True), "epsilon_cutoff": ("epsilon", True),
    "eta_cutoff": ("eta", True), "top_n_sigma": ("top-n-σ", True), "xtc": ("XTC", True),
    "mirostat": ("mirostat", False), "top_h": ("top-H", True),
}
LESSON_STAGES = ("raw", "temperature", "top_k", "top_p", "min_p", "final")  # the lesson's chain: always drawn


# -- the knobs ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Knob:
    """One sampling knob. `default` is the value that switches it off (or llama.cpp's default, for a knob that
    only shapes another: xtc_threshold, dry_base, mirostat_tau, ...). `low`/`high` (+ `integer`, `low_open`) is the
    range the API accepts; `slider` (low, high, step) the useful part the lab shows, which a link must stay in.
    `stage`: the stage that reads it; `switch`: setting it turns that stage on (a custom chain without the stage
    refuses it). `refused`: order -> why that order's engine does not have it (the knob set away from its default
    there is refused, naming it). `group`: where the lab lays it out ("lesson": the tab's own sliders; "penalties",
    "samplers", "dry_mirostat": the accordions; "order": beside the order). `control`: slider, number, text or
    radio. `label`: the English name an error gives it (None: its own name). `tensor`: the sampler reads it per
    row as a tensor (pipeline.BatchParams). `openai`: the OpenAI API takes it as an extra body field."""

    name: str
    default: object
    stage: str
    group: str
    low: float | None = None
    high: float | None = None
    integer: bool = False
    low_open: bool = False
    slider: tuple[float, float, float] | None = None
    switch: bool = False
    refused: dict[str, str] = field(default_factory=dict)
    control: str = "slider"
    label: str | None = None
    tensor: bool = False
    openai: bool = True

    @property
    def numeric(self) -> bool:
        return self.low is not None

    @property
    def range(self) -> dict:
        """The API's range, as validation.number takes it."""
        return dict(low=self.low, high=self.high, **({"integer": True} if self.integer else {}),
                    **({"low_open": True} if self.low_open else {}))

    @property
    def text(self) -> str:
        """How an error names it: the lab control's English label, or the knob's own name."""
        return self.label or self.name


_HF_ONLY = {order: "only transformers has {}" for order in ("vllm", "llama.cpp")}
_LLAMA_ONLY = {order: "only llama.cpp has {}" for order in ("hf", "vllm")}
_NO_NGRAM = "only transformers has a no-repeat n-gram ban"
_NO_MIN_TOKENS = "llama.cpp has no min_tokens: a logit_bias of -100 on the end token holds it back"
_FOLLOWS_LLAMA = "; a custom chain follows llama.cpp"
_WINDOW = (-1, limits.MAX_NEW_TOKENS + limits.MAX_PROMPT_TOKENS, 1)  # a window of counted tokens: -1 all, 0 none


def _only(engines: dict, what: str) -> dict[str, str]:
    return {order: why.format(what) for order, why in engines.items()}


# The lesson's four, then the rest in the lab's order (the /generate API's and a run file's).
KNOBS: tuple[Knob, ...] = (
    Knob("temperature", 1.0, "temperature", "lesson", 0, limits.MAX_TEMPERATURE, slider=(0.0, 2.0, 0.05), switch=True,
         tensor=True, openai=False),  # 0 = greedy
    Knob("top_k", 0, "top_k", "lesson", 0, limits.MAX_TOP_K, integer=True, slider=(0, 200, 1), switch=True,
         label="top-k", tensor=True, openai=False),  # 0 = off
    Knob("top_p", 1.0, "top_p", "lesson", 0, 1, low_open=True, slider=(0.01, 1.0, 0.01), switch=True, label="top-p",
         tensor=True),  # 1 = off
    Knob("min_p", 0.0, "min_p", "lesson", 0, 1, slider=(0.0, 1.0, 0.01), switch=True, label="min-p", tensor=True),
    # the bias and penalties (every order applies them first), then the bans
    Knob("logit_bias", (), "logit_bias", "penalties", control="text", label="logit bias"),  # (token id, bias) pairs
    Knob("repetition_penalty", 1.0, "penalties", "penalties", 0, limits.MAX_REPETITION_PENALTY, low_open=True,
         slider=(0.5, 2.0, 0.01), label="repetition penalty"),  # 1 = off: a counted token's positive logit / r
    Knob("frequency_penalty", 0.0, "penalties", "penalties", -limits.MAX_FREQUENCY_PENALTY,
         limits.MAX_FREQUENCY_PENALTY, slider=(-limits.MAX_FREQUENCY_PENALTY, limits.MAX_FREQUENCY_PENALTY, 0.05),
         refused={"hf": "transformers has no frequency penalty"}, label="frequency penalty"),  # minus f x count
    Knob("presence_penalty", 0.0, "penalties", "penalties", -limits.MAX_FREQUENCY_PENALTY,
         limits.MAX_FREQUENCY_PENALTY, slider=(-limits.MAX_FREQUENCY_PENALTY, limits.MAX_FREQUENCY_PENALTY, 0.05),
         refused={"hf": "transformers has no presence penalty"}, label="presence penalty"),  # minus p once counted
    Knob("penalty_last_n", limits.DEFAULT_PENALTY_LAST_N, "penalties", "penalties", -1, limits.MAX_PENALTY_LAST_N,
         integer=True, slider=_WINDOW, control="number", label="penalty window"),  # llama.cpp: the last n tokens
    Knob("no_repeat_ngram_size", 0, "no_repeat_ngram", "penalties", 0, limits.MAX_NO_REPEAT_NGRAM, integer=True,
         slider=(0, 8, 1), refused={"vllm": _NO_NGRAM, "llama.cpp": _NO_NGRAM, "custom": _NO_NGRAM + _FOLLOWS_LLAMA},
         label="no-repeat n-gram"),  # 0 = off: ban a token completing an n-gram already in the context
    Knob("min_tokens", 0, "min_tokens", "penalties", 0, limits.MAX_NEW_TOKENS, integer=True, slider=(0, 64, 1),
         refused={"llama.cpp": _NO_MIN_TOKENS, "custom": _NO_MIN_TOKENS + _FOLLOWS_LLAMA},
         label="min tokens"),  # 0 = off: the end tokens are banned until this many tokens are generated
    # the samplers beyond the lesson's
    Knob("typical_p", 1.0, "typical_p", "samplers", 0, 1, low_open=True, slider=(0.01, 1.0, 0.01), switch=True,
         refused={"vllm": "vLLM has no typical sampling"}, label="typical-p", tensor=True),  # 1 = off
    Knob("epsilon_cutoff", 0.0, "epsilon_cutoff", "samplers", 0, limits.MAX_EPSILON_CUTOFF,
         slider=(0.0, 0.05, 0.0005), switch=True, refused=_only(_HF_ONLY, "an epsilon cutoff"),
         label="epsilon cutoff", tensor=True),  # 0 = off: remove tokens below this probability (the top one stays)
    Knob("eta_cutoff", 0.0, "eta_cutoff", "samplers", 0, limits.MAX_EPSILON_CUTOFF, slider=(0.0, 0.05, 0.0005),
         switch=True, refused=_only(_HF_ONLY, "an eta cutoff"), label="eta cutoff",
         tensor=True),  # 0 = off: remove tokens below min(eta, sqrt(eta) exp(-entropy))
    Knob("top_n_sigma", 0.0, "top_n_sigma", "samplers", 0, limits.MAX_TOP_N_SIGMA, slider=(0.0, 5.0, 0.1),
         switch=True, refused=_only(_LLAMA_ONLY, "top-n-sigma"), label="top-n-sigma",
         tensor=True),  # 0 = off: keep logits within n standard deviations of the largest
    Knob("xtc_probability", 0.0, "xtc", "samplers", 0, 1, slider=(0.0, 1.0, 0.05), switch=True,
         refused=_only(_LLAMA_ONLY, "XTC"), label="XTC probability", tensor=True),  # 0 = off: how often XTC cuts
    Knob("xtc_threshold", limits.DEFAULT_XTC_THRESHOLD, "xtc", "samplers", 0, 1, slider=(0.0, 0.5, 0.01),
         label="XTC threshold", tensor=True),  # the tokens at least this probable, all but the last, go
    Knob("dynatemp_range", 0.0, "temperature", "samplers", 0, limits.MAX_TEMPERATURE, slider=(0.0, 2.0, 0.05),
         switch=True, refused=_only(_LLAMA_ONLY, "a dynamic temperature"), label="dynamic temperature range",
         tensor=True),  # 0 = off: the temperature moves within T +- this, with the entropy
    Knob("dynatemp_exponent", 1.0, "temperature", "samplers", 0, limits.MAX_DYNATEMP_EXPONENT, low_open=True,
         slider=(0.1, 4.0, 0.1), label="dynamic temperature exponent", tensor=True),
    # llama.cpp's DRY and mirostat
    Knob("dry_multiplier", 0.0, "dry", "dry_mirostat", 0, limits.MAX_DRY_MULTIPLIER, slider=(0.0, 3.0, 0.05),
         refused=_only(_LLAMA_ONLY, "DRY"), label="DRY multiplier"),  # 0 = off: multiplier x base^(length - allowed)
    Knob("dry_base", limits.DEFAULT_DRY_BASE, "dry", "dry_mirostat", 1, limits.MAX_DRY_BASE, slider=(1.0, 4.0, 0.05),
         label="DRY base"),
    Knob("dry_allowed_length", limits.DEFAULT_DRY_ALLOWED_LENGTH, "dry", "dry_mirostat", 1,
         limits.MAX_DRY_ALLOWED_LENGTH, integer=True, slider=(1, 10, 1), label="DRY allowed length"),
    Knob("dry_penalty_last_n", -1, "dry", "dry_mirostat", -1, limits.MAX_PENALTY_LAST_N, integer=True,
         slider=_WINDOW, control="number", label="DRY window"),  # the last n tokens DRY searches (-1 all, 0 none)
    Knob("dry_sequence_breakers", limits.DEFAULT_DRY_BREAKERS, "dry", "dry_mirostat", control="text",
         label="DRY sequence breakers"),  # a repeat does not run across a token holding one
    Knob("mirostat", 0, "mirostat", "dry_mirostat", 0, 2, integer=True, control="radio",
         refused={**_only(_LLAMA_ONLY, "mirostat"),
                  "custom": "mirostat replaces the whole chain: choose the llama.cpp order"},
         tensor=True),  # 0 = off; 1, 2: mirostat v1, v2 (llama.cpp), in place of the chain's cuts
    Knob("mirostat_tau", limits.DEFAULT_MIROSTAT_TAU, "mirostat", "dry_mirostat", 0, limits.MAX_MIROSTAT_TAU,
         slider=(0.0, 15.0, 0.5), label="mirostat tau"),  # the target surprise, in bits
    Knob("mirostat_eta", limits.DEFAULT_MIROSTAT_ETA, "mirostat", "dry_mirostat", 0, 1, slider=(0.0, 1.0, 0.01),
         label="mirostat eta"),  # how fast mu follows the observed surprise
    Knob("chain", (), "custom", "order", control="text", label="custom chain"),  # order "custom": its stages, in order
    # added after the first links and run files (a shorter run file takes their defaults)
    Knob("top_h", 0.0, "top_h", "samplers", 0, 1, slider=(0.0, 1.0, 0.01), switch=True,
         refused=_only(_HF_ONLY, "top-H"), label="top-H",
         tensor=True),  # 0 = off: keep the head whose entropy stays within top_h x the entropy of the top 100
)
BY_NAME = {knob.name: knob for knob in KNOBS}
NUMERIC = tuple(knob.name for knob in KNOBS if knob.numeric)
TEXT_KNOBS = tuple(knob.name for knob in KNOBS if knob.control == "text")  # typed in a box: the control shows text
LAB_KNOBS = tuple(knob.name for knob in KNOBS if knob.group != "lesson")  # the lab's controls after the lesson's ten
# The stages a custom chain orders, and the knobs that turn each on there (the adjusters always come first).
CHAIN_STAGES = {stage: tuple(k.name for k in KNOBS if k.stage == stage and k.switch)
                for stage, (_, chained) in STAGES.items() if chained}
# What mirostat replaces in llama.cpp's chain: these knobs are refused while it is on, as llama.cpp ignores them.
MIROSTAT_REPLACES = ("repetition_penalty", "frequency_penalty", "presence_penalty", "dry_multiplier", "top_n_sigma",
                     "top_k", "typical_p", "top_p", "min_p", "xtc_probability", "dynatemp_range")
# What an order's engine does not have: order -> {knob: why}.
NOT_IN_ORDER = {order: {k.name: k.refused[order] for k in KNOBS if order in k.refused} for order in ORDERS}
