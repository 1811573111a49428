"""How newcomers' first prompt chunks are grouped into padded passes (model_service/engine/scheduler.py:_buckets)."""

from types import SimpleNamespace

from model_service import limits
from model_service.engine.scheduler import _buckets


def widths(lengths, chunk=limits.PREFILL_CHUNK_TOKENS):
    jobs = [SimpleNamespace(ids=[0] * n) for n in lengths]
    return [[len(job.ids) for job in group] for group in _buckets(jobs, chunk)]


def test_prompts_of_similar_length_share_one_pass():
    # padding 3 -> 5 costs 4 slots; a second pass costs PREFILL_PASS_COST_TOKENS (24)
    assert widths([5, 3, 4, 5]) == [[3, 4, 5, 5]]


def test_the_bench_rooms_prompts_split_where_padding_costs_more_than_a_pass():
    # SmolLM2's token counts of bench_room.py's eight prompts, twice: one pass pads 16 rows to 13 (232 with
    # its fixed cost); two passes (<= 7, then 9 and 13) cost 24 + 12 x 7 + 24 + 4 x 13 = 184
    lengths = [13, 6, 9, 4, 4, 3, 6, 7] * 2
    assert widths(lengths) == [[3, 3, 4, 4, 4, 4, 6, 6, 6, 6, 7, 7], [9, 9, 13, 13]]


def test_a_long_prompt_counts_as_one_chunk():
    # its first chunk is what is read now; two chunk-sized rows share a pass
    assert widths([500, 300, 2], chunk=128) == [[2], [500, 300]]  # sorted by chunk: a tie keeps arrival order
