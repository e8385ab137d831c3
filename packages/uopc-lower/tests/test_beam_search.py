"""The beam search's logic, with measurements made up here (no backend, no clock): which candidates it
times, what it keeps, when it stops. Its candidates' values, and a search run through a backend, are
checked in test_interpret.py; on the C backend, in uopc-backend-c's test_searched_opts.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hypothesis import given
from hypothesis import strategies as st

from uopc.ir import UOp, dtypes
from uopc.lower import Kernel, Opts, actions, beam_search, choose_opts, rangeify


def matmul_kernel(gemm: Callable[[int, int, int], UOp]) -> Kernel:
    value = gemm(16, 32, 16)
    return Kernel("r_16_16", rangeify([(UOp.buffer(2, value.size, value.scalar_dtype), value)]))


def made_up(cost: Callable[[Opts], float | None], timed: list[Opts]) -> Callable[[Sequence[Opts]], list[float | None]]:
    """A measurement that looks each candidate's time up in `cost` and records what it was asked."""

    def measure(candidates: Sequence[Opts]) -> list[float | None]:
        timed.extend(candidates)
        return [cost(c) for c in candidates]

    return measure


def tile_cost(opts: Opts) -> float:
    """Fastest at an 8 x 2 tile, threaded, two steps from the heuristic's 4 x 4; unroll makes it slower."""
    up = opts.upcast
    return abs(up.get(0, 1) - 8) + abs(up.get(1, 1) - 2) + (0 if opts.thread is not None else 5) + len(opts.unroll)


def test_the_beam_walks_one_change_at_a_time_to_the_fastest(gemm: Callable[[int, int, int], UOp]) -> None:
    kernel = matmul_kernel(gemm)
    kernel = Kernel(kernel.name, kernel.ast, Opts(upcast={0: 4, 1: 4}, thread=0))
    timed: list[Opts] = []
    assert beam_search(kernel, 2, made_up(tile_cost, timed)) == Opts(upcast={0: 8, 1: 2}, thread=0)
    assert timed[:2] == [kernel.opts, Opts()]  # the heuristic's choice and none are the first candidates
    keys = [o.key() for o in timed]
    assert len(keys) == len(set(keys))  # nothing is timed twice


def test_a_candidate_that_failed_is_never_the_winner(gemm: Callable[[int, int, int], UOp]) -> None:
    kernel = matmul_kernel(gemm)
    failing = made_up(lambda o: None if o.thread is not None else tile_cost(o), [])
    assert beam_search(Kernel(kernel.name, kernel.ast, Opts(thread=0)), 3, failing).thread is None


def test_when_nothing_can_be_timed_the_kernel_keeps_its_opts(gemm: Callable[[int, int, int], UOp]) -> None:
    kernel = matmul_kernel(gemm)
    timed: list[Opts] = []
    assert beam_search(kernel, 2, made_up(lambda o: None, timed)) == kernel.opts
    assert timed == [kernel.opts]  # Opts() is the kernel's own here, and the search stopped after it


def test_the_search_stops_when_a_step_finds_nothing_faster(gemm: Callable[[int, int, int], UOp]) -> None:
    kernel = matmul_kernel(gemm)
    timed: list[Opts] = []
    beam_search(kernel, 1, made_up(lambda o: 1.0, timed))  # all alike: one step of neighbours, then stop
    assert {o.key() for o in timed} == {o.key() for o in [Opts(), *actions(kernel.ast, Opts())]}


def test_actions_change_one_field_and_respect_the_tile_limit(gemm: Callable[[int, int, int], UOp]) -> None:
    kernel = matmul_kernel(gemm).ast
    start = choose_opts(kernel)
    for opts in actions(kernel, start):
        fields = ("upcast", "unroll", "thread", "vector")
        changed = [name for name in fields if getattr(opts, name) != getattr(start, name)]
        assert len(changed) == 1, opts
        assert all(n > 1 for n in [*opts.upcast.values(), *opts.unroll.values()])


@given(
    st.dictionaries(st.integers(0, 5), st.integers(2, 8), max_size=3),
    st.dictionaries(st.integers(0, 5), st.integers(2, 8), max_size=2),
    st.none() | st.integers(0, 5),
    st.none() | st.tuples(st.integers(0, 5), st.sampled_from([4, 8, 16])),
)
def test_opts_survive_their_json(
    upcast: dict[int, int], unroll: dict[int, int], thread: int | None, vector: tuple[int, int] | None
) -> None:
    opts = Opts(upcast=upcast, unroll=unroll, thread=thread, vector=vector)
    assert Opts.from_json(opts.to_json()) == opts


def test_an_int_gemm_is_searched_with_int_lanes_left_out(gemm: Callable[[int, int, int], UOp]) -> None:
    value = gemm(16, 16, 16)
    assert value.scalar_dtype is dtypes.int32
    kernel = rangeify([(UOp.buffer(2, value.size, value.scalar_dtype), value)])
    assert all(o.vector is None for o in actions(kernel, Opts()))  # vectors hold float32 only
