"""The decode step at static shapes (engine/static_decode.py) computes what the eager runner.Decoder computes,
through a room's life (rows joining with prompts of other lengths, rows leaving, buckets outgrown), and it traces
as one graph per bucket: torch.compile(backend="aot_eager", fullgraph=True) on a CPU, no graph break and no
recompile within a bucket over 50 steps (what CUDA graphs need on a GPU)."""

from __future__ import annotations

import pytest
import torch

from model_service import limits
from model_service.engine.runner import Decoder
from model_service.engine.static_decode import StaticDecoder, bucket, lengths, uses_graphs

from ..conftest import tiny_llama


@pytest.fixture(scope="module")
def model():
    return tiny_llama()


def prompt(n: int, seed: int) -> list[int]:
    return torch.randint(2, 250, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def newcomer(model, tokens):
    """A newcomer's prompt read eagerly in its own cache, as the scheduler does; its first logits."""
    decoder = Decoder(model)
    return decoder, decoder.prefill([tokens])


class OnCard:
    """A model as uses_graphs sees it: only its device and its batch-invariant mode are read."""

    def __init__(self, device: str, invariant: bool = False):
        self.device, self.ntp_batch_invariant = torch.device(device), invariant


def test_graphs_are_the_default_on_a_card_only_and_never_on_zero_gpu_or_in_invariant_mode(monkeypatch):
    monkeypatch.delenv("NTP_CUDA_GRAPHS", raising=False)
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    assert uses_graphs(OnCard("cuda")) and not uses_graphs(OnCard("cpu")) and not uses_graphs(None)
    assert not uses_graphs(OnCard("cuda", invariant=True))
    monkeypatch.setenv("NTP_CUDA_GRAPHS", "false")
    assert not uses_graphs(OnCard("cuda"))
    monkeypatch.setenv("NTP_CUDA_GRAPHS", "true")
    assert not uses_graphs(OnCard("cpu"))  # no graphs to replay on a CPU, whatever the variable says
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    assert not uses_graphs(OnCard("cuda"))


def test_buckets():
    assert [bucket(n, limits.GRAPH_BATCH_BUCKETS) for n in (1, 3, 16, 17, 64, 70)] == [1, 4, 16, 32, 64, 70]
    assert [lengths(n) for n in (1, 256, 257, 1000)] == [256, 256, 512, 1024]


@pytest.mark.parametrize("backend", [None, "aot_eager"])
def test_static_steps_equal_eager_steps_as_rows_join_and_leave(model, backend, monkeypatch):
    monkeypatch.setattr(limits, "GRAPH_MIN_LENGTH", 16)  # small buckets: the run outgrows two of them
    eager, static = Decoder(model), StaticDecoder(model, backend=backend)
    prompts = {0: prompt(5, 0), 1: prompt(11, 1), 2: prompt(3, 2), 3: prompt(9, 3)}
    joins = {0: [0, 1], 4: [2], 9: [3]}  # step -> the rows that join before it
    leaves = {7: [0], 12: [1]}  # step -> the rows (by name) that leave after it
    names: list[int] = []
    nexts: dict[int, int] = {}
    for step in range(20):
        for name in joins.get(step, []):
            a, first = newcomer(model, prompts[name])
            b, _ = newcomer(model, prompts[name])
            eager.join(a)
            static.join(b)
            names.append(name)
            nexts[name] = int(first.argmax())
        tokens = [nexts[name] for name in names]
        want, got = eager.step(tokens), static.step(tokens)
        torch.testing.assert_close(got, want, atol=2e-4, rtol=0)
        assert got.argmax(dim=-1).tolist() == want.argmax(dim=-1).tolist()
        for name, row in zip(names, got):
            nexts[name] = int(row.argmax())
        if step in leaves:
            keep = [i for i, name in enumerate(names) if name not in leaves[step]]
            eager.keep(keep)
            static.keep(keep)
            names = [names[i] for i in keep]
        assert static.rows == eager.rows and static.width == eager.mask.shape[1]  # trimmed alike
    assert (static.slots, static.length) == (4, 32)  # grew from (2, 16): a third row, a wider batch


def test_the_decode_step_traces_once_per_bucket_with_no_graph_break(model):
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    static = StaticDecoder(model, backend="aot_eager")
    for name, n in enumerate((7, 4, 6)):  # three rows: the bucket of 4 slots, 256 columns
        decoder, first = newcomer(model, prompt(n, name))
        static.join(decoder)
    tokens = [1, 2, 3]
    for _ in range(50):
        tokens = static.step(tokens).argmax(dim=-1).tolist()
    assert (static.slots, static.length) == (4, 256)
    assert dict(counters["graph_break"]) == {}
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])  # traced once, never again in 50 steps


def test_a_room_on_the_static_step_draws_what_the_eager_room_draws(monkeypatch):
    """The scheduler with the static step (its backend off: the same buffers, run eagerly): seeded requests of
    different lengths, joining a running batch and leaving it, get the tokens the eager room gives them."""
    import threading

    from model_service import ModelService, SamplingSettings
    from model_service.engine.scheduler import Scheduler

    from ..conftest import byte_tokenizer

    def room(static: bool) -> dict[int, list[int]]:
        if static:
            monkeypatch.setattr(Scheduler, "_batch_decoder", lambda self: StaticDecoder(self.loaded.model, self._pad))
        service = ModelService(tiny_llama(), byte_tokenizer())
        out: dict[int, list[int]] = {}

        def one(i):
            settings = SamplingSettings(temperature=0.9, top_p=0.95, seed=i)
            out[i] = [r.token_id for r in service.generate("x" * (3 + 4 * i), settings, 6 + 3 * i, ignore_eos=True)]

        threads = [threading.Thread(target=one, args=(i,)) for i in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if static:
            assert isinstance(service._scheduler._decoder, StaticDecoder)
        service.close()
        monkeypatch.undo()
        return out

    assert room(static=True) == room(static=False)


def test_warming_traces_every_batch_bucket_up_to_the_rooms_rows_then_a_room_runs_on_them(model):
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    static = StaticDecoder(model, backend="aot_eager")
    assert static.warm(3) == [(1, 256), (2, 256), (4, 256)]
    traced = counters["stats"]["unique_graphs"]
    eager = Decoder(model)
    for name, n in enumerate((7, 4, 6)):
        static.join(newcomer(model, prompt(n, name))[0])
        eager.join(newcomer(model, prompt(n, name))[0])
    tokens = [1, 2, 3]
    for _ in range(5):
        want, got = eager.step(tokens), static.step(tokens)
        torch.testing.assert_close(got, want, atol=2e-4, rtol=0)
        tokens = want.argmax(dim=-1).tolist()
    assert traced == 3 and counters["stats"]["unique_graphs"] == 3  # the room's steps traced nothing new


@pytest.mark.parametrize("fails_in", ["warm", "step"])
def test_when_the_static_step_fails_the_room_goes_on_eagerly_and_says_why(monkeypatch, capsys, fails_in):
    from model_service import ModelService, SamplingSettings
    from model_service.engine import scheduler as room

    from ..conftest import byte_tokenizer

    class Failing(StaticDecoder):
        def __init__(self, model, pad_id=0, backend=None):
            super().__init__(model, pad_id, backend=None)  # the CPU has no cudagraphs backend

        def warm(self, rows):
            if fails_in == "warm":
                raise RuntimeError("capture failed")
            return super().warm(rows)

        def step(self, tokens):
            if fails_in == "step":
                raise RuntimeError("replay failed")
            return super().step(tokens)

    monkeypatch.setattr(room, "uses_graphs", lambda model: True)
    monkeypatch.setattr(room, "StaticDecoder", Failing)
    service = ModelService(tiny_llama(), byte_tokenizer())
    settings = SamplingSettings(seed=3)
    if fails_in == "step":  # the rows of the failed step get its error; the room goes on without graphs
        with pytest.raises(RuntimeError, match="replay failed"):
            list(service.generate("first", settings, 4, ignore_eos=True))
    tokens = [r.token_id for r in service.generate("after", settings, 4, ignore_eos=True)]
    assert len(tokens) == 4 and service._scheduler.graphs is False
    assert isinstance(service._scheduler._decoder, Decoder)
    assert "the room's CUDA graphs are off" in capsys.readouterr().err
    service.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the room's CUDA graphs are a card's")
def test_on_a_card_the_rooms_cuda_graphs_draw_the_eager_rooms_tokens(monkeypatch):
    """The default on a GPU (limits.CUDA_GRAPHS_DEFAULT): a room of four learners, prompts of other lengths, greedy
    and seeded, draws on the captured graphs the tokens it draws eagerly, and never falls back, also when other
    compiles ran in this process before and when a second room's thread captures again (torch 2.11 asserted there:
    static_decode.cudagraph_state_in_this_thread)."""
    import threading

    from model_service import ModelService, SamplingSettings

    from ..conftest import byte_tokenizer

    asks = [("The capital of France is", SamplingSettings(temperature=0.0)),
            ("Once upon a time", SamplingSettings(temperature=1.0, seed=7)),
            ("a", SamplingSettings(temperature=0.8, top_p=0.9, seed=11)),
            ("Hello, world! Hello again,", SamplingSettings(temperature=1.2, top_k=20, seed=3))]

    def room(graphs: bool) -> list[list[int]]:
        monkeypatch.setenv("NTP_CUDA_GRAPHS", "true" if graphs else "false")
        service = ModelService(tiny_llama().to("cuda"), byte_tokenizer(), max_rows=4)
        out: dict[int, list[int]] = {}

        def one(i):
            text, settings = asks[i]
            out[i] = [r.token_id for r in service.generate(text, settings, 40, ignore_eos=True)]

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(asks))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert service._scheduler.graphs is graphs  # no fallback: every step ran on the graphs
        assert isinstance(service._scheduler._decoder, StaticDecoder) is graphs
        service.close()
        return [out[i] for i in range(len(asks))]

    eager, graphs = room(False), room(True)
    assert graphs == eager and all(len(tokens) == 40 for tokens in graphs)
    assert room(True) == eager  # a second room (as after a model switch): a new thread, still on its graphs
