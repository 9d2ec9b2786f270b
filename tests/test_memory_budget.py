"""Memory honesty (issue 10): estimate before allocating, empty batches give empty results.

Every huge input here is a zero-stride ``np.broadcast_to`` view (no memory), so each test
fails fast if an entry point copies, allocates or compiles before estimating: a copy of a
300,000 x 300,000 mask needs 84 GiB.
"""

import importlib

import numpy as np
import pytest

import hassejax._checks
import hassejax.cli
from hassejax.cli import main
from hassejax.errors import MaskError, MemoryBudgetError
from hassejax.masks import and_masks, from_additive_bias, from_blocked, from_mask_mod, or_masks
from hassejax.order import (
    HasseDiagram,
    classes,
    convergence_depth,
    cover_matrix,
    flow_summary,
    layer_adjacency,
    longest_chain,
    quotient_order,
    reachability,
    width,
)
from hassejax.tasks import (
    Task,
    Token,
    audit,
    autoregressive,
    block_diffusion_task,
    block_generation,
    block_two_stream_mask,
    butterfly,
    butterfly_mask,
    reached_tokens,
    sparsify,
    xlnet_two_stream_task,
)

N = 300_000
_REAL_AVAILABLE = hassejax._checks.available_memory_bytes


@pytest.fixture(autouse=True)
def at_most_64_gib(monkeypatch):
    """Report at most 64 GiB free, so that no test allocates on a machine with terabytes."""
    monkeypatch.setattr(hassejax._checks, "available_memory_bytes", lambda: min(_REAL_AVAILABLE(), 64 * 2**30))


BIG = np.broadcast_to(np.array(True), (N, N))  # zero strides: costs nothing
BIG_PREFIX = np.broadcast_to(np.arange(N) < 1024, (N, N))  # prefix keys only: one row, 300 kB


def _budget_error(call, name: str, *fragments: str) -> str:
    """Run `call`; it must raise MemoryBudgetError naming `name` and containing the fragments."""
    with pytest.raises(MemoryBudgetError) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(f"`{name}`"), msg
    assert "GiB" in msg and "available" in msg, msg
    for fragment in fragments:
        assert fragment in msg, msg
    return msg


# ----------------------------------------------------------------- fault 1: order entry points


@pytest.mark.parametrize("mask", [BIG, BIG_PREFIX], ids=["ones", "prefix"])
@pytest.mark.parametrize(
    "call",
    [
        lambda m: reachability(m),
        lambda m: reachability(m, 3),
        lambda m: reachability(m, 1),
        lambda m: reachability(m, method="matmul"),
        lambda m: reachability(m, 2, method="bitpacked"),
        lambda m: convergence_depth(m),
        lambda m: layer_adjacency(m),
        lambda m: HasseDiagram.from_mask(m),
        lambda m: HasseDiagram.from_mask(m, num_layers=2),
    ],
    ids=["limit", "L3", "L1", "matmul", "bitpacked", "depth", "adjacency", "hasse", "hasse_L2"],
)
def test_huge_zero_stride_mask_raises_before_copying(mask, call):
    msg = _budget_error(lambda: call(mask), "mask", f"n = {N}", "IntervalMask")
    # the estimate and the free memory, both in GiB
    assert msg.count("GiB") >= 2


def test_huge_preorder_raises_before_copying():
    _budget_error(lambda: HasseDiagram.from_reachability(BIG), "reach", f"n = {N}")
    _budget_error(lambda: HasseDiagram.from_reachability(BIG, check=False), "reach", f"n = {N}")


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: classes(BIG), "reach"),
        (lambda: classes(BIG, check=False), "reach"),
        (lambda: quotient_order(BIG, np.zeros(N, np.int32), 1), "reach"),
        (lambda: cover_matrix(BIG), "order"),
        (lambda: longest_chain(BIG), "relation"),
        (lambda: width(BIG), "order"),
    ],
    ids=["classes", "classes_unchecked", "quotient_order", "cover_matrix", "longest_chain", "width"],
)
def test_huge_poset_inputs_raise_before_copying(call, name):
    _budget_error(call, name, f"n = {N}")


def test_huge_layer_masks_raise_before_copying():
    _budget_error(lambda: reachability(None, layer_masks=[BIG, BIG_PREFIX]), "layer_masks", "2 layer masks", f"n = {N}")
    stacked = np.broadcast_to(np.array(True), (3, N, N))
    _budget_error(lambda: reachability(None, layer_masks=stacked), "layer_masks", "3 layer masks", f"n = {N}")


def test_huge_batch_of_small_masks_raises():
    batch = np.broadcast_to(np.array(True), (10**7, 64, 64))  # 41 GB as a dense stack
    _budget_error(lambda: reachability(batch), "mask", "n = 64", "batch 10000000")
    _budget_error(lambda: convergence_depth(batch), "mask", "n = 64")


class _NoCopy:
    """Stands in for jax.numpy inside hassejax._checks only: counts (and refuses) device copies."""

    copies = 0

    @classmethod
    def asarray(cls, *args, **kwargs):
        cls.copies += 1
        raise AssertionError("as_mask copied the mask before the memory estimate")


def test_estimate_runs_before_the_device_copy(monkeypatch):
    """The check sits between validation and ``jnp.asarray`` in ``as_mask``."""
    monkeypatch.setattr(hassejax._checks, "jnp", _NoCopy)
    monkeypatch.setattr(_NoCopy, "copies", 0)
    # budget 80 kB: the two input copies alone (131 kB) exceed it, whatever the route
    monkeypatch.setattr(hassejax._checks, "available_memory_bytes", lambda: 100_000)
    small = np.tril(np.ones((256, 256), bool))
    for call in (lambda: reachability(small), lambda: convergence_depth(small), lambda: HasseDiagram.from_mask(small)):
        _budget_error(call, "mask", "n = 256")
    assert _NoCopy.copies == 0


def test_bad_masks_are_still_mask_errors_first(no_typecheck):
    """Validation (dtype, squareness) comes before the memory estimate."""
    with pytest.raises(MaskError, match="dtype bool"):
        reachability(np.broadcast_to(np.array(1.0), (N, N)))
    with pytest.raises(MaskError, match="square"):
        convergence_depth(np.broadcast_to(np.array(True), (N, N + 1)))


# ----------------------------------------------------------------- fault 3: empty batches


@pytest.mark.parametrize("method", ["auto", "matmul", "bitpacked"])
@pytest.mark.parametrize("num_layers", [None, 1, 3])
@pytest.mark.parametrize("shape", [(0, 4, 4), (2, 0, 5, 5), (0, 1, 3, 3)])
def test_empty_batch_reachability(method, num_layers, shape):
    r = reachability(np.zeros(shape, bool), num_layers, method=method)
    assert r.shape == shape and r.dtype == np.bool_


@pytest.mark.parametrize("method", ["auto", "matmul", "bitpacked"])
@pytest.mark.parametrize(
    "layer_masks, shape",
    [
        (np.zeros((3, 0, 4, 4), bool), (0, 4, 4)),
        ([np.zeros((0, 4, 4), bool)] * 2, (0, 4, 4)),
        (np.zeros((2, 2, 0, 4, 4), bool), (2, 0, 4, 4)),
        ([np.zeros((0, 4, 4), bool)], (0, 4, 4)),
    ],
    ids=["stacked", "sequence", "inner_batch", "one_layer"],
)
def test_empty_batch_layer_masks(method, layer_masks, shape):
    r = reachability(None, layer_masks=layer_masks, method=method)
    assert r.shape == shape and r.dtype == np.bool_


def test_empty_layer_axis_is_a_mask_error():
    with pytest.raises(MaskError, match="`layer_masks` must hold at least one mask"):
        reachability(None, layer_masks=np.zeros((0, 4, 4), bool))


@pytest.mark.parametrize("shape, out", [((0, 4, 4), (0,)), ((3, 0, 4, 4), (3, 0)), ((0, 2, 2), (0,))])
def test_empty_batch_convergence_depth_and_adjacency(shape, out):
    d = convergence_depth(np.zeros(shape, bool))
    assert d.shape == out and d.dtype == np.int32
    a = layer_adjacency(np.zeros(shape, bool))
    assert a.shape == shape and a.dtype == np.bool_


# ----------------------------------------------------------------- fault 2: task families


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda: butterfly(N).merge(), "butterfly family with n = 300000"),
        (lambda: autoregressive(N).merge(), "autoregressive family with n = 300000"),
        (lambda: block_generation(N, 1000).merge(), "block_generation family with n = 300000"),
        (lambda: butterfly_mask(N), "butterfly_mask with n = 300000"),
        (lambda: block_two_stream_mask(N, 1000), "block_two_stream_mask with n = 300000"),
        (lambda: block_diffusion_task(N, 100), "600000 slots"),
    ],
    ids=[
        "butterfly",
        "autoregressive",
        "block_generation",
        "butterfly_mask",
        "block_two_stream_mask",
        "block_diffusion",
    ],
)
def test_huge_task_families_raise_naming_n(call, fragment):
    _budget_error(call, "n", fragment)


def test_huge_xlnet_task_raises_naming_permutation():
    _budget_error(lambda: xlnet_two_stream_task(list(range(N))), "permutation", "600000 slots")


def test_huge_task_mask_raises_before_copying(monkeypatch):
    n = 30_000  # 0.9 GB a copy, against a 1 GiB machine (fewer Python tokens than N: faster)
    monkeypatch.setattr(hassejax._checks, "available_memory_bytes", lambda: 2**30)
    monkeypatch.setattr(hassejax._checks, "jnp", _NoCopy)
    monkeypatch.setattr(_NoCopy, "copies", 0)
    inputs = [Token("w", i) for i in range(n)]
    _budget_error(lambda: Task(inputs, np.broadcast_to(np.array(True), (n, n))), "mask", f"{n} slots")
    assert _NoCopy.copies == 0


def test_merge_sparsify_audit_dense_estimate_before_allocating(monkeypatch):
    """With a tiny budget each step stops at its own estimate, naming its argument."""
    family = butterfly(22)  # 22 tasks of 22 slots, 64 merged slots; built while memory is plentiful
    task = family.tasks[0]
    merged = family.merge()
    # budget 24 kB: the tasks' closures fit (about 17 kB each), the merged task's 10 arrays
    # of 64 x 64 (41 kB) do not, nor the closure of the merged mask (74 kB)
    monkeypatch.setattr(hassejax._checks, "available_memory_bytes", lambda: 30_000)
    _budget_error(family.merge, "tasks", "merged task", "64 slots")
    for call in (merged.dense, merged.is_dense, merged.structure, lambda: sparsify(merged), lambda: audit(merged)):
        _budget_error(call, "mask", "n = 64")
    # a 22-slot task's closure fits, its reached-token sets (at 1 MB a dependent pair) do not
    monkeypatch.setattr(importlib.import_module("hassejax.tasks.audit"), "_PAIR_BYTES", 10**6)
    _budget_error(lambda: reached_tokens(task), "task", "dependent pairs")


# ----------------------------------------------------------------- converters


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: from_additive_bias(np.broadcast_to(np.float32(0.0), (N, N))), "bias"),
        (lambda: from_additive_bias(np.broadcast_to(np.float32(-np.inf), (4, N // 4, N))), "bias"),
        (lambda: from_blocked(np.broadcast_to(np.int8(0), (N, N))), "blocked"),
        (lambda: from_blocked(np.broadcast_to(np.array(False), (N, N))), "blocked"),
        (lambda: from_mask_mod(lambda b, h, q, k: q >= k, N), "n"),
        (lambda: from_mask_mod(lambda b, h, q, k: q >= k, 8, n_kv=N * N), "n"),
    ],
    ids=["bias", "bias_batched", "blocked_int", "blocked_bool", "mask_mod", "mask_mod_rectangular"],
)
def test_huge_converter_inputs_raise_before_copying(call, name):
    _budget_error(call, name, "GiB")


@pytest.mark.parametrize("combine", [and_masks, or_masks])
def test_huge_combinations_raise_before_copying(combine):
    _budget_error(lambda: combine(BIG, BIG_PREFIX), "masks", "2 masks of shape (300000, 300000)")


def test_converter_estimate_counts_the_input_dtype(monkeypatch):
    """A float64 bias costs its 8-byte copy too: 1000 x 1000 needs 12 MB, over a 10 MB budget."""
    monkeypatch.setattr(hassejax._checks, "available_memory_bytes", lambda: 12_500_000)
    _budget_error(lambda: from_additive_bias(np.zeros((1000, 1000))), "bias", "(1000, 1000)")
    from_blocked(np.zeros((1000, 1000), np.int8))  # 5 MB: fits


# ----------------------------------------------------------------- command line


def _cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_mask_over_the_budget_is_one_line(capsys):
    # 300000 rows of 100001 key runs: over a TiB in interval form, estimated before building
    rc, out, err = _cli(capsys, "analyze", "dilated(n=300000, window=100000, dilation=2)")
    assert rc == 2 and out == ""
    assert err.startswith("hassejax: error: ") and err.count("\n") == 1, err
    assert "GiB" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "exc",
    [MemoryError("Unable to allocate 83.8 GiB for an array"), RuntimeError("RESOURCE_EXHAUSTED: Out of memory")],
    ids=["numpy", "xla"],
)
def test_cli_raw_out_of_memory_is_one_line(capsys, monkeypatch, exc):
    def boom(*args, **kwargs):
        raise exc

    monkeypatch.setattr(importlib.import_module("hassejax.cli._analyze"), "analyze", boom)
    rc, out, err = _cli(capsys, "analyze", "causal(n=8)")
    assert rc == 2 and out == ""
    assert err.startswith("hassejax: error: out of memory") and err.count("\n") == 1, err
    assert "memory budget" in err and str(exc) in err


def test_cli_other_runtime_errors_are_not_hidden(monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(importlib.import_module("hassejax.cli._analyze"), "analyze", boom)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["analyze", "causal(n=8)"])


def test_long_interval_mask_errors_say_what_to_do_instead():
    """Review: densifying a 1M-token IntervalMask, or tiling it with 1 × 1 blocks, was refused with "a mask with fewer
    key runs a row", which cannot help: a dense mask is n² whatever its runs, and the tile grid shrinks with the
    block. Each error now names the way out."""
    from hassejax.kernels import tile_stats
    from hassejax.masks import from_spec

    iv = from_spec("sliding_window(n=1048576, left=4096)", form="intervals")
    for call in (iv.to_dense, lambda: flow_summary(iv, method="matmul"), lambda: reachability((iv, iv))):
        with pytest.raises(MemoryBudgetError, match=r"n² entries whatever its runs: keep the IntervalMask") as err:
            call()
        assert "fewer key runs" not in str(err.value)
    with pytest.raises(MemoryBudgetError, match=r"tile grid .* use a larger `block_size`"):
        tile_stats(iv, block_size=1)


def test_particles_too_many_for_their_pair_arrays_are_refused_naming_x0():
    """Review: 300,000 tokens went straight to XLA (RESOURCE_EXHAUSTED asking for 2.9 TB, 32 bytes a pair in float64);
    now the n × n weights of a velocity evaluation are estimated first and the error names `x0`."""
    import jax.numpy as jnp

    from hassejax.dynamics import Softmax, solve_particles

    model = Softmax(V=jnp.eye(2), A=jnp.eye(2))
    with pytest.raises(MemoryBudgetError, match=r"`x0`: the particle system of n = 300000 tokens .*\(solve_gaussian\)"):
        solve_particles(model, np.zeros((300_000, 2)), t1=0.1)


def test_dense_constructors_name_their_size_arguments():
    """A fresh user: ``causal(10**9)`` was refused naming `causal`, where the structured constructors name `n`; every
    dense constructor names the argument that sets the size (before anything is allocated)."""
    from hassejax import masks

    cases = [
        (lambda: masks.causal(10**9), r"^`n`: causal's mask of shape \(1000000000, 1000000000\)"),
        (lambda: masks.sliding_window(10**9, 4), r"^`n`: sliding_window's mask"),
        (lambda: masks.block_diffusion(10**9, 4), r"^`n`: block_diffusion's mask of shape \(2000000000,"),
        (lambda: masks.causal_bottom_right(10**9, 10**9), r"^`n_q` and `n_k`: causal_bottom_right's mask"),
        (lambda: masks.natten_2d(10**5, 10**5, 3, 3), r"^`height` and `width`: natten_2d's mask"),
        (lambda: masks.document([10**9]), r"^`segments`: document's mask"),
    ]
    for build, match in cases:
        with pytest.raises(MemoryBudgetError, match=match):
            build()
