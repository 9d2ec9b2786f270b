"""Parameter sweeps: `vmap` over a batch, host-side chunks, the batch axis sharded over devices.

(spec dynamics.md §4 "Sweeps"; DESIGN.md "Scale".)

A sweep runs one per-member function (typically a solve, which reports a member that blows
up or stops early in its own status instead of raising) over a batch of parameters, a
pytree whose every leaf has the batch axis in front. Three levels:

1. **vmap** inside one compiled program: no host round trip within a chunk. Under
   `vmap` a `while_loop` (an adaptive ODE solve) runs until the slowest member stops;
   members that stopped are masked, so their results are those of a solo run (unsharded; a sharded program is
   partitioned by XLA and can round differently: a review found blow-up times differing by ~1e-12 relative and a
   step count by 2 with one member a device, the same statuses; a later one, with ``chunk_size=1`` or one member
   a device, step counts differing by up to 10 of 170 and `cov_final` by 3e-5 relative in float64, the same
   statuses and blow-up times within 1e-9: the width-1 program is fused differently; and batches of ``rbg``/``unsafe_rbg`` PRNG keys
   draw differently under `vmap` at each chunk width, as JAX's own ``vmap`` of them does).
2. **Sharding**: the batch axis of each chunk is split across all devices of a 1-D
   :class:`jax.sharding.Mesh` (axis ``"batch"``) with
   :class:`~jax.sharding.NamedSharding` / :class:`~jax.sharding.PartitionSpec`, and the
   vmapped program is compiled with those input and output shardings, so XLA's SPMD
   partitioner gives each device its own members (an adaptive solve's loop condition
   is reduced across devices: all devices step until the chunk's slowest member
   stops, as under `vmap` on one device). The chunk is padded to a multiple of the device count by repeating the last member (a
   valid parameter set, never zeros that might be singular) and the padding is
   stripped. The same call runs on one CPU, several GPUs or a TPU slice.
3. **Chunks**: the batch is cut on the host into chunks of exactly `chunk_size` members
   (the last one, or a batch smaller than `chunk_size`, padded by repeating the last
   member and the padding dropped from the results), so one call compiles one program,
   and every batch size with the same `chunk_size` runs the same program; chunks are
   dispatched one after the other with a tqdm progress bar, the next before the previous
   one is waited for. Given per-member `cost` estimates the members run sorted by cost in
   chunks of similar cost (less lockstep waste), results in the caller's order.

**Memory** is estimated before a chunk runs: the sweep lowers and compiles its chunk program (the
program the chunks then run: no second compile, the persistent cache kept) and takes XLA's estimate
of it, ``Compiled.memory_analysis()``: per device the arguments, outputs and temporaries less the
aliased bytes, plus the outputs of the earlier chunks the sweep holds. On CPU devices the temporaries
count twice: XLA's CPU runtime allocates scratch its estimate leaves out (a `solve_particles` chunk
peaked at up to 2.0x the estimate). A chunk that cannot fit in 80 % of the free memory (the host's
for CPU devices, which share it; ``memory_stats()`` of each accelerator) raises
:class:`~hassejax.errors.MemoryBudgetError` naming `chunk_size` and a chunk size that fits, before any
chunk is copied to a device (a per-member check such as :func:`~hassejax.dynamics.solve_particles`'
sees one member, not the `vmap` width). Below 16 MiB the free memory is not read; where the backend
gives no estimate, or an accelerator no ``memory_stats()``, the chunks run unchecked. With several
processes every process's estimate and free memory are all-gathered and all decide alike.

**Across processes** (after ``jax.distributed.initialize``, one process per host or GPU):
process `p` of `P` runs its share, members ``p, p + P, ...`` padded to ``ceil(B / P)``,
through levels 1-3 on its own devices, and the results are all-gathered, so every process
returns the same full result in batch order (:mod:`hassejax.dynamics._processes`).

No module-level state of the member program: :func:`sweep` builds its jitted runner per call (each call traces
and compiles, or loads from JAX's persistent cache); a :class:`Sweep` you hold keeps its runner, compiled once per
chunk shape. (Two small module-level jitted helpers, which merge the chunks' outputs and put them back in the
caller's order, keep JAX's per-shape cache of their own programs.) :func:`sweep_program` lowers the program for ahead-of-time use.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import PyTree
from tqdm.auto import tqdm

from .._checks import check_memory, device_free_bytes
from .._env import progress_off
from .._memory import host_memory_bytes
from .._xla_flags import correctness_compiler_options, jit_takes_compiler_options, sweep_compiler_options
from ..errors import ParameterError
from . import _processes, _sweep_order
from .attention._base import AbstractAttention

__all__ = ["Sweep", "sweep", "sweep_program", "batch_size"]

BATCH_AXIS = "batch"

_SMALL_BYTES = 16 * 2**20
"""A chunk program XLA estimates below this is run unchecked: reading the free memory costs more than it can save
(as :func:`~hassejax.dynamics.solve_particles`' own check of one member)."""

_FRACTION = 0.8
"""The share of the free memory a chunk may take (:func:`~hassejax._checks.check_memory`'s budget)."""

_CPU_TEMP_FACTOR = 2
"""XLA's temporaries are counted this many times on CPU devices: its CPU runtime allocates scratch beyond its buffer
assignment (measured, the first run of a `solve_particles` chunk of softmax, float64, on 2 cores: peak RSS 1.1-2.0x
XLA's estimate for n = 2000-8000 tokens and 1-8 members, e.g. 3358 MiB against 1651 MiB at n = 3000, 8 members; a
fused softmax-matmul program of temporaries 0 took 300 MiB at n = 3000, 4 members)."""

_NOT_READ = 2**63
"""The free memory a process reports when it did not read it (its chunk is small, or its devices report none)."""


def batch_size(batch_params: PyTree, name: str = "batch_params") -> int:
    """Common leading-axis length of every leaf of a pytree (the batch size of a sweep).

    **Arguments:**

    - `batch_params`: a pytree of arrays, each with the batch axis first.
    - `name`: argument name used in error messages.

    **Returns:** the batch size `B >= 1`.

    **Raises:** :class:`~hassejax.errors.ParameterError` if the pytree has no array leaf,
    a leaf is not an array or has no leading axis, the leading lengths differ, or `B = 0`.

    Source: (derived) spec dynamics.md §4 "Sweeps" (`vmap` over parameters and initial conditions).

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import batch_size
    >>> batch_size({"v": jnp.ones(5), "cov0": jnp.ones((5, 2, 2))})
    5

    ```
    """
    leaves, _ = jax.tree_util.tree_flatten_with_path(batch_params)
    if not leaves:
        raise ParameterError(f"`{name}` must be a pytree with at least one array leaf; got {batch_params!r}.")
    sizes = {}
    for path, leaf in leaves:
        where = jax.tree_util.keystr(path) or "(root)"
        shape = getattr(leaf, "shape", None)
        if shape is None or not hasattr(leaf, "dtype"):
            raise ParameterError(
                f"`{name}`: every leaf must be an array with the batch axis first; leaf {where} is a "
                f"{type(leaf).__name__}. Close over per-sweep constants in `fn` instead"
                + (
                    "; a list of values is a batch once an array (jnp.asarray([...]))."
                    if isinstance(batch_params, (list, tuple)) and where.startswith("[")
                    else "."
                )
            )
        # object, string and datetime arrays have no JAX type (a fresh user: JAX's raw error); PRNG key arrays do
        if getattr(getattr(leaf, "dtype", None), "kind", None) in ("O", "U", "S", "M", "m"):
            raise ParameterError(
                f"`{name}`: every leaf must be an array of numbers or booleans; leaf {where} has dtype "
                f"{leaf.dtype} (e.g. np.array([1.0, 'a'])). Convert it to a numeric array first."
            )
        if len(shape) == 0:
            hint = (
                " A kernel swept as the batch needs every field batched, its defaults too (e.g. `beta=jnp.ones(B)`), "
                "or build the kernel inside `fn` from batched arrays."
                if isinstance(batch_params, AbstractAttention)
                else ""
            )
            raise ParameterError(
                f"`{name}`: every leaf must have a leading batch axis; leaf {where} is a scalar (shape ()).{hint}"
            )
        sizes[where] = int(shape[0])
    distinct = sorted(set(sizes.values()))
    if len(distinct) > 1:
        detail = ", ".join(f"{k}: {v}" for k, v in sizes.items())
        raise ParameterError(f"`{name}`: all leaves must have the same leading (batch) length; got {detail}.")
    if distinct[0] == 0:
        raise ParameterError(f"`{name}`: the batch is empty (leading length 0).")
    return distinct[0]


def _build_runner(
    fn: Callable, devices: tuple | None, compiler_options: Mapping[str, Any] | None = None
) -> tuple[Callable, NamedSharding | None]:
    """The jitted, vmapped per-chunk program of `fn` (sharded over `devices` when given); built per call."""
    batched = jax.vmap(fn)
    platform_name = devices[0].platform if devices else jax.default_backend()
    options = sweep_compiler_options(platform_name) | correctness_compiler_options(platform_name)
    options |= dict(compiler_options or {})  # the caller's win
    opts = {"compiler_options": options} if options else {}
    if devices is None:
        return jax.jit(batched, **opts), None
    mesh = Mesh(np.asarray(devices, dtype=object), (BATCH_AXIS,))
    sharding = NamedSharding(mesh, PartitionSpec(BATCH_AXIS))
    # The batch axis of every input and output leaf is split over the mesh; XLA's SPMD
    # partitioner propagates that through the vmapped program, so each device computes
    # its own members. (Not `shard_map`: equinox/lineax closure conversion, used by
    # diffrax's event root finder, rejects the manual-axis avals inside it.)
    return jax.jit(batched, in_shardings=(sharding,), out_shardings=sharding, **opts), sharding


def _traced(leaf) -> bool:
    """Whether `leaf` is traced by a transformation a sweep cannot run under (jit, grad, ...; a top-level
    ``jax.vmap`` of a sweep runs, its chunks batched once more, but not one inside jit or grad: a review)."""
    while type(leaf).__name__ == "BatchTracer":  # vmap's (not public in JAX): what it batches, e.g. jit(vmap(...))'s
        leaf = leaf.val
    return isinstance(leaf, jax.core.Tracer)


def _itemsize(leaf) -> int:
    """Bytes an entry of `leaf` (typed PRNG keys included, whose dtype NumPy cannot read: a new user's sweep over
    ``jax.random.split(key, B)`` met a raw ``TypeError`` in the memory check)."""
    return int(leaf.dtype.itemsize)


def _check_padding_memory(leaves, total: int, n: int, chunk: int, devs) -> None:
    """Refuse, naming `chunk_size`, a padding of the batch to `total` rows that would not fit, before it is formed (a
    new user: ``chunk_size=10**10`` for 5 members ran out of memory padding them, before the chunk's memory check)."""
    extra = sum((total - n) * math.prod(leaf.shape[1:]) * _itemsize(leaf) for leaf in leaves)
    extra = min(extra, _NOT_READ)  # a count the all-gather takes (uint64; a review: chunk_size=1e16 overflowed)
    free = _NOT_READ
    if extra >= _SMALL_BYTES:
        devices = tuple(devs) if devs else (jax.local_devices()[0],)
        host = any(not isinstance(leaf, jax.Array) for leaf in leaves) or devices[0].platform == "cpu"
        read = host_memory_bytes() if host else _free_bytes(devices)
        free = _NOT_READ if read is None else read
    # every process decides from the same table (the extra bytes are alike, the free memory not: never a hang)
    table = [[int(v) for v in r] for r in _processes.gather_counts([extra, free])]
    failing = next(
        (p for p, (need, room) in enumerate(table) if need >= _SMALL_BYTES and need > _FRACTION * room), None
    )
    if failing is None:
        return
    where = f" on process {failing} of {len(table)}" if len(table) > 1 else ""
    check_memory(
        table[failing][0],
        f"padding the batch of {n} members to {total} rows (chunks of {chunk} members){where}",
        "chunk_size",
        fraction=_FRACTION,
        hint=f"A chunk_size of at most the batch size, {n}, pads it by less than one member a device.",
        available=table[failing][1],
    )


def _pad_rows(leaf, total: int):
    """Pad the leading axis to `total` rows by repeating the last row.

    A host (NumPy) leaf is padded, and later sliced into chunks, on the host; a device array on its own device (leaves
    may be committed to different devices: one program over several would be refused).
    """
    xp = jnp if isinstance(leaf, jax.Array) else np
    extra = total - leaf.shape[0]
    if extra == 0:
        return leaf
    return xp.concatenate([leaf, xp.repeat(leaf[-1:], extra, axis=0)], axis=0)


@functools.partial(jax.jit, static_argnums=1)
def _merge_strip(outputs: tuple, B: int):
    """The chunks' outputs concatenated along the member axis and cut to the `B` real members, one compiled program
    per layout (eagerly: a concatenate and a slice per output leaf, each its own program)."""
    return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs, axis=0)[:B], *outputs)


def _check_compiler_options(options) -> None:
    """Refuse `compiler_options` XLA would refuse, before any program is built: the type here, the
    names and values by compiling a trivial program with them once (a few milliseconds, cached)."""
    scalar = (bool, int, float, str, np.integer, np.floating)
    if (
        not isinstance(options, Mapping)
        or not all(isinstance(k, str) for k in options)
        or not all(isinstance(v, scalar) for v in options.values())
    ):
        raise ParameterError(
            "`compiler_options` must be None or a mapping of XLA option names (str) to values (bool, int, "
            f"float or str), e.g. {{'xla_backend_optimization_level': 3}}; got {options!r}."
        )
    if not jit_takes_compiler_options():
        raise ParameterError(
            f"`compiler_options` needs a JAX whose jax.jit takes compiler_options; this is JAX {jax.__version__}."
        )
    # the value's type is part of the key: True == 1 == 1.0 in Python, not to XLA ('1' is no bool)
    plain = {k: v.item() if isinstance(v, np.generic) else v for k, v in options.items()}
    key = tuple(sorted((k, type(v).__name__, v) for k, v in plain.items()))
    error = _compile_probe(key)
    if error is not None:
        raise ParameterError(f"`compiler_options` {dict(options)!r} were refused by XLA: {error}")


@functools.lru_cache(maxsize=64)
def _compile_probe(options: tuple) -> str | None:
    """XLA's message when it refuses `options` on a trivial program, else None."""

    def probe(x):  # a fresh function: JAX's own caches take True, 1 and 1.0 for one option value
        return x + 1

    try:
        jax.jit(probe, compiler_options={k: v for k, _, v in options}).lower(np.float32(0)).compile()
    except Exception as err:  # XLA's own error types differ between versions (JaxRuntimeError, XlaRuntimeError)
        return f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
    return None


def _check_config(fn, chunk_size, shard, devices, compiler_options=None) -> tuple | None:
    """Validate a sweep's configuration; return the devices to shard over (None: no sharding)."""
    if not callable(fn):
        raise ParameterError(f"`fn` must be callable (the per-member function); got {type(fn).__name__}.")
    if compiler_options is not None:
        _check_compiler_options(compiler_options)
    if chunk_size is not None and (
        isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1
    ):
        raise ParameterError(f"`chunk_size` must be a positive integer or None; got {chunk_size!r}.")
    if not isinstance(shard, (bool, np.bool_)):  # a new user: shard="no" sharded (a truthy string), as progress="no"
        raise ParameterError(f"`shard` must be True or False; got {shard!r:.40}.")
    if devices is not None:  # checked with shard=False too (a review: devices="junk" was ignored there)
        devices = _check_devices(devices)
    if not shard:
        return None
    devs = _processes.sweep_devices(devices)  # jax.devices(); this process's own when there are several
    if not devs:
        raise ParameterError("`devices` must hold at least one device; got an empty sequence.")
    return devs


def _check_devices(devices) -> tuple:
    """`devices` as a tuple; raise :class:`ParameterError` naming `devices` unless it is a sequence (or an iterable,
    read once: a review, an iterator came back "an empty sequence") of distinct ``jax.Device`` (a fresh user: a device
    repeated met a bare ``AssertionError`` inside JAX, a string an ``AttributeError``, a single device or a number a
    ``TypeError``)."""
    want = "a sequence of distinct jax devices (e.g. jax.devices()[:2]), or None for all"
    if isinstance(devices, (str, bytes, jax.Device)) or not hasattr(devices, "__iter__"):
        raise ParameterError(f"`devices` must be {want}; got {type(devices).__name__} {devices!r:.60}.")
    devs = list(devices)
    odd = next((d for d in devs if not isinstance(d, jax.Device)), None)
    if odd is not None:
        raise ParameterError(f"`devices` must be {want}; got an entry {odd!r:.60} ({type(odd).__name__}).")
    twice = next((d for i, d in enumerate(devs) if d in devs[:i]), None)
    if twice is not None:
        raise ParameterError(f"`devices` must be {want}; got {twice} twice.")
    return tuple(devs)


def _layout(B: int, chunk_size: int | None, devs: tuple | None) -> tuple[int, int, int]:
    """(chunk, n_chunks, total): a fixed program width, even for B < chunk_size."""
    ndev = len(devs) if devs is not None else 1
    chunk = B if chunk_size is None else int(chunk_size)
    chunk = math.ceil(chunk / ndev) * ndev
    n_chunks = math.ceil(B / chunk)
    return chunk, n_chunks, n_chunks * chunk


class _Held:
    """The default of :meth:`Sweep.__call__`'s `cost`: the cost the Sweep holds (None there is a cost of its own: none)."""

    def __repr__(self) -> str:
        return "<the held cost>"

    def __reduce__(self) -> str:
        return "_HELD"  # pickled and copied as the module's one sentinel


_HELD = _Held()


class Sweep:
    """A sweep you hold: `fn` vmapped over chunks of a batch, compiled once per chunk shape.

    ``Sweep(fn, chunk_size=...)(batch_params)`` equals ``sweep(fn, batch_params,
    chunk_size=...)`` (same chunking, padding, sharding, results); the object keeps its
    jitted runner, so later calls with chunks of the same shapes and dtypes reuse the
    compiled program (the figures run ~140 solves of a few shapes through a few programs).
    The state lives on the object the caller holds and goes with it.

    **Arguments:** `fn`, `chunk_size`, `shard`, `devices`, `compiler_options` as in :func:`sweep`; `cost` None or a
    callable on each batch (as :func:`sweep`'s; a call may pass its own `cost`, array or
    callable, instead, or ``cost=None`` to run that batch in the caller's order).

    **Raises:** :class:`~hassejax.errors.ParameterError` as :func:`sweep` (on construction for
    the configuration, on call for the batch); :class:`~hassejax.errors.MemoryBudgetError` as :func:`sweep`,
    on call (the estimate of each chunk program is kept, the free memory read at each call).

    Source: (derived) spec dynamics.md §4 "Sweeps".

    **Example:** batches of three and two members, one program:

    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Sweep
    >>> traces = []
    >>> def member(v):
    ...     traces.append(1)  # runs once per trace, not per member
    ...     return {"square": v * v}
    >>> squares = Sweep(member, chunk_size=4)
    >>> [squares(jnp.array(b), progress=False)["square"].tolist() for b in ([1.0, 2.0, 3.0], [4.0, 5.0])]
    [[1.0, 4.0, 9.0], [16.0, 25.0]]
    >>> len(traces)
    1
    """

    def __init__(
        self,
        fn: Callable[[Any], Any],
        *,
        chunk_size: int | None = None,
        cost: Any = None,
        shard: bool = True,
        devices: Sequence[jax.Device] | None = None,
        compiler_options: Mapping[str, Any] | None = None,
    ):
        self._devices = _check_config(fn, chunk_size, shard, devices, compiler_options)
        _sweep_order.check_cost(cost, allow_array=False)
        self.fn = fn
        self.chunk_size = chunk_size
        self.cost = cost
        self._run, self._sharding = _build_runner(fn, self._devices, compiler_options)
        self._estimates = {}  # XLA's memory estimate of each chunk program run so far (_check_chunk_memory)

    def __call__(
        self, batch_params: PyTree, *, cost: Any = _HELD, progress: bool = True, desc: str | None = "sweep"
    ) -> PyTree:
        """Run the held program on every member of `batch_params`; see :func:`sweep`. `cost`: left out, the held one;
        given (an array, a callable or None for the caller's order), it replaces the held one for this call."""
        cost = self.cost if isinstance(cost, _Held) else cost  # (a copy of the sentinel too)
        return _run_all(
            self._run,
            self._sharding,
            self._devices,
            batch_params,
            self.chunk_size,
            cost,
            progress,
            desc,
            self._estimates,
        )


def _run_all(run, sharding, devs, batch_params, chunk_size, cost, progress, desc, estimates):
    """Order by cost, take this process's share, run its chunks, gather, restore the caller's order."""
    if not isinstance(progress, (bool, np.bool_)):  # a fresh user: progress="no" showed the bar (a truthy string)
        raise ParameterError(f"`progress` must be True or False; got {progress!r:.40}.")
    if desc is not None and not isinstance(desc, str):  # a review: desc=5 met tqdm's raw TypeError
        raise ParameterError(f"`desc` must be a string (the progress bar's label) or None; got {desc!r:.40}.")
    B = batch_size(batch_params)
    traced = next((leaf for leaf in jax.tree_util.tree_leaves(batch_params) if _traced(leaf)), None)
    if traced is not None:  # a new user: under jax.jit JAX refused "compiler_options" the caller never passed
        raise ParameterError(
            "`batch_params`: a sweep is a host-level driver (it cuts the batch into chunks, checks memory and compiles "
            f"its own program) and cannot run under a JAX transformation (jit, grad, ...); got a traced leaf "
            f"{traced.aval}. Call it outside, or jax.vmap the per-member function yourself."
        )
    if cost is not None and jax.process_count() > 1:  # the batch checked before its order, each by its name
        _processes.local_share(batch_params, B)
    ordered, perm, planned = _sweep_order.plan(cost, batch_params, B, chunk_size, len(devs) if devs else 1)
    # without a cost every process keeps the caller's order, and local_share names a batch that differs
    if cost is not None:
        _processes.check_order(perm, B)  # nothing with one process
    mine, n = _processes.local_share(ordered, B, check=cost is None)  # (ordered, B) with one process
    chunk, n_chunks, total = _layout(n, planned, devs)
    leaves, treedef = jax.tree_util.tree_flatten(mine)
    leaves = [leaf if isinstance(leaf, jax.Array) else np.asarray(leaf) for leaf in leaves]
    if sharding is None:  # `shard=False`: one device; leaves committed to different ones are named (a new user met
        # JAX's raw "incompatible devices" ValueError)
        placed = {
            str(sorted(map(str, leaf.devices()))) for leaf in leaves if isinstance(leaf, jax.Array) and leaf.committed
        }
        if len(placed) > 1:
            raise ParameterError(
                f"`batch_params`: with shard=False the chunk program runs on one device, but the leaves are committed "
                f"to different devices ({', '.join(sorted(placed))}); jax.device_put them to one device, or pass "
                "shard=True."
            )
    _check_padding_memory(leaves, total, n, chunk, devs)
    leaves = [_pad_rows(leaf, total) for leaf in leaves]
    layout = _ChunkLayout(chunk, n_chunks, n, devs, chunk_size, planned)
    _check_chunk_memory(run, sharding, leaves, treedef, layout, estimates)  # before any chunk reaches a device
    out = _execute(run, sharding, leaves, treedef, n, chunk, n_chunks, total, progress, desc)
    return _sweep_order.restore_order(_processes.gather(out, B), perm)  # gather: out with one process


class _ChunkLayout:
    """What the memory check of a sweep's chunks needs to know of its layout (see :func:`_check_chunk_memory`)."""

    def __init__(self, chunk, n_chunks, members, devs, chunk_size, planned):
        self.chunk, self.n_chunks, self.members = chunk, n_chunks, members  # members: this process's share
        self.devices = tuple(devs) if devs else (jax.local_devices()[0],)  # unsharded: the default device
        self.ndev = len(devs) if devs else 1
        self.chunk_size, self.planned = chunk_size, planned  # the caller's, and after the cost's plan


def _program_bytes(run, sharding, leaves, treedef, chunk) -> dict[str, int] | None:
    """XLA's memory estimate of the chunk program on one device (``Compiled.memory_analysis()``), in bytes by kind;
    None where the backend gives none.

    Lowered from the first chunk's abstract values (sharded: shape, dtype and sharding only, nothing copied to a
    device) and compiled: the program the chunks then run (``jax.jit`` keeps it; loaded from the persistent cache
    where it is there), so nothing is compiled twice.
    """

    def spec(leaf):
        if sharding is None:  # host rows are only looked at; device rows are already on their device
            return leaf[:chunk]
        return jax.ShapeDtypeStruct(
            (chunk, *leaf.shape[1:]), leaf.dtype, sharding=sharding, weak_type=bool(getattr(leaf, "weak_type", False))
        )

    compiled = run.lower(jax.tree_util.tree_unflatten(treedef, [spec(leaf) for leaf in leaves])).compile()
    try:
        stats = compiled.memory_analysis()
    except Exception:  # an estimate the backend cannot give never stops a sweep
        return None
    if isinstance(stats, (list, tuple)):  # one per device in some jaxlib versions: the largest
        stats = [s for s in stats if s is not None]
    else:
        stats = [stats] if stats is not None else []
    kinds = ("argument", "output", "temp", "alias", "generated_code")
    try:
        values = {k: max(int(getattr(st, f"{k}_size_in_bytes", 0) or 0) for st in stats) for k in kinds}
    except (TypeError, ValueError):
        return None
    return values if stats else None


def _free_bytes(devices) -> int | None:
    """Free bytes of the memory a chunk runs in: the host's for CPU devices, else the least of the devices' own
    (``memory_stats()``: ``bytes_limit - bytes_in_use``); None where a device reports none."""
    if devices[0].platform == "cpu":
        return host_memory_bytes()
    free = [device_free_bytes(dev) for dev in devices]
    return None if None in free else max(0, min(free))


def _program_only(est, cpu: bool) -> int:
    """A device's bytes of a chunk program by XLA's estimate: arguments, outputs, temporaries (:data:`_CPU_TEMP_FACTOR`
    times on the CPU) and code, less the aliased bytes."""
    temp = est["temp"] * (_CPU_TEMP_FACTOR if cpu else 1)
    return max(0, est["argument"] + est["output"] + temp + est["generated_code"] - est["alias"])


def _memory_row(est, leaves, layout, estimate_at=None) -> list[int]:
    """This process's `[need, free, suggestion, one]` for the memory check (bytes, bytes, members, bytes).

    `need`: the bytes the chunks take in the tightest memory: per device the chunk program's arguments, outputs and
    temporaries (:data:`_CPU_TEMP_FACTOR` times on the CPU) less the aliased bytes, plus the outputs of the earlier chunks the sweep holds until it merges
    them; times the devices for CPU devices (they share the host's memory). `suggestion`: the largest
    `chunk_size` (a multiple of the device count) that fits by the estimate scaled to fewer members (the bytes
    that do not grow with the chunk, arguments beyond the batch's and code, kept; the results of all this
    device's members counted as held); 0 if not even one member a device fits, whose `one` bytes it reports.
    Where the chunk does not fit and `estimate_at(width)` is given (XLA's estimate of the program at another chunk
    width), the suggestion is checked against the program at that width and, if that one is larger than the
    proportional scaling assumed (memory that does not grow with the chunk: an intermediate the members share),
    taken from the line through both estimates (a review: the scaled suggestion was refused five times in a row).
    """
    chunk, ndev = layout.chunk, layout.ndev
    if est is None:
        return [0, _NOT_READ, chunk, 0]
    m = chunk // ndev  # members a device
    cpu = layout.devices[0].platform == "cpu"
    sharing = ndev if cpu else 1
    program = _program_only(est, cpu)
    need = sharing * (program + (layout.n_chunks - 1) * est["output"])
    if need < _SMALL_BYTES:
        return [need, _NOT_READ, chunk, 0]
    free = _free_bytes(layout.devices)
    if free is None:
        return [0, _NOT_READ, chunk, 0]
    batch_in = sum(m * math.prod(leaf.shape[1:]) * _itemsize(leaf) for leaf in leaves)
    fixed = max(0, est["argument"] - batch_in) + est["generated_code"]
    per_member = max(0, program - fixed) / m
    held_all = math.ceil(layout.members / ndev) * est["output"] / m  # every result of a device, held
    room = _FRACTION * free / sharing - fixed - held_all
    fit = m if per_member == 0 else min(m, max(0, math.floor(room / per_member)))
    one = math.ceil(sharing * (fixed + per_member + held_all))
    if estimate_at is not None and 0 < fit < m and need > _FRACTION * free:
        est2 = estimate_at(fit * ndev)
        if est2 is not None:
            p2 = _program_only(est2, cpu)
            if p2 + held_all > _FRACTION * free / sharing:  # the scaled suggestion would be refused: two-point line
                slope = (program - p2) / (m - fit)
                base = program - slope * m
                fit = 0 if slope <= 0 else min(fit - 1, max(0, math.floor((room + fixed - base) / slope)))
                one = math.ceil(sharing * (base + slope + held_all))
    fit = min(fit, math.ceil(layout.members / ndev))  # never wider than this process's share of the batch
    return [need, free, fit * ndev, one]


def _check_chunk_memory(run, sharding, leaves, treedef, layout, estimates) -> None:
    """Raise :class:`~hassejax.errors.MemoryBudgetError` naming `chunk_size`, on every process alike, if the chunks
    cannot fit in the free memory by XLA's estimate of their program (see :func:`_memory_row`).

    The estimate of a program is kept in `estimates` (a held Sweep's, per chunk shape); the free memory is read
    at each call, and only when the estimate is at least :data:`_SMALL_BYTES`. With several processes every
    process's row is all-gathered (one small all-gather a call) and all decide from the same table.
    """
    key = (
        treedef,
        layout.chunk,
        tuple((leaf.shape[1:], str(leaf.dtype), bool(getattr(leaf, "weak_type", False))) for leaf in leaves),
    )
    if key not in estimates:
        estimates[key] = _program_bytes(run, sharding, leaves, treedef, layout.chunk)

    def estimate_at(width: int):  # XLA's estimate at another chunk width (only where the chunk does not fit)
        return _program_bytes(run, sharding, leaves, treedef, width)

    row = _memory_row(estimates[key], leaves, layout, estimate_at)
    table = [[int(v) for v in r] for r in _processes.gather_counts(row)]
    failing = [p for p, (need, free, *_) in enumerate(table) if need >= _SMALL_BYTES and need > _FRACTION * free]
    if not failing:
        return
    p = failing[0]
    need, free, _, one = table[p]
    fit = min(row[2] for row in table)
    chunk, ndev = layout.chunk, layout.ndev
    if layout.chunk_size is not None:
        what = f"chunk_size={layout.chunk_size}: the program of `fn` vmapped over a chunk of {chunk} members"
    elif layout.planned is not None:
        what = f"chunk_size=None: the program of `fn` vmapped over chunks of {chunk} members (the width `cost` chose)"
    else:
        batch = "batch" if jax.process_count() == 1 else "this process's share of the batch"
        members = "1 member" if chunk == 1 else f"{chunk} members"
        what = f"chunk_size=None: the program of `fn` vmapped over the whole {batch}, {members}, as one chunk"
    cpu = layout.devices[0].platform == "cpu"
    if ndev > 1:
        shared = ", which share the host's memory" if cpu else ""
        what += f" ({chunk // ndev} a device on {ndev} devices{shared})"
    what += " (XLA's estimate of its arguments, outputs and temporaries"
    what += f", the temporaries {_CPU_TEMP_FACTOR}x for the CPU runtime's scratch" if cpu else ""
    what += ", with the results of the earlier chunks held)" if layout.n_chunks > 1 else ")"
    if len(table) > 1:
        what += f" on process {p} of {len(table)}"
    if fit > 0:
        hint = f"A chunk_size of at most {fit} should fit (by XLA's estimates of the program); pass chunk_size={fit}."
    else:
        more = (
            "or fewer devices (CPU devices share the host's memory: shard=False, or devices=jax.devices()[:k])"
            if cpu and ndev > 1
            else "or more devices"
        )
        hint = (
            f"Not even a chunk of one member a device fits (about {one / 2**30:.2f} GiB with the results of all "
            f"members held): make each member smaller (e.g. fewer tokens), sweep fewer members a call, {more}."
        )
    check_memory(need, what, "chunk_size", fraction=_FRACTION, hint=hint, available=free)


def _execute(run, sharding, leaves, treedef, B, chunk, n_chunks, total, progress, desc):
    """Dispatch the padded chunks one after the other (the next before the previous is waited for), merge, strip."""
    outputs = []
    bar = tqdm(total=B, desc=desc, unit="member", disable=(not progress) or n_chunks == 1 or progress_off())
    try:
        pending = None
        for k in range(n_chunks):
            part = [leaf[k * chunk : (k + 1) * chunk] if n_chunks > 1 else leaf for leaf in leaves]
            if sharding is not None:
                part = jax.device_put(part, sharding)
            out = run(jax.tree_util.tree_unflatten(treedef, part))  # dispatched asynchronously
            outputs.append(out)
            if pending is not None:  # wait for the previous chunk while this one runs
                jax.block_until_ready(pending[0])
                bar.update(pending[1])
            pending = (out, min(chunk, B - k * chunk))
        jax.block_until_ready(pending[0])
        bar.update(pending[1])
    finally:
        bar.close()
    if n_chunks == 1 and total == B:
        return outputs[0]
    return _merge_strip(tuple(outputs), B)


def sweep(
    fn: Callable[[Any], Any],
    batch_params: PyTree,
    *,
    chunk_size: int | None = None,
    cost: Any = None,
    progress: bool = True,
    shard: bool = True,
    devices: Sequence[jax.Device] | None = None,
    desc: str | None = "sweep",
    compiler_options: Mapping[str, Any] | None = None,
) -> PyTree:
    """Run `fn` on every member of a batch of parameters (vmap, chunks, device sharding).

    `fn(params) -> out` takes one member (the pytree `batch_params` without its batch
    axis) and returns a pytree of arrays. It must be traceable (jit/vmap-safe). The solvers
    (:func:`~hassejax.dynamics.solve_gaussian`, :func:`~hassejax.dynamics.solve_particles`)
    never raise on a member's outcome: a member that blows up, stops early or turns NaN
    reports it in its `status`, so one bad member never fails the sweep. (Their argument
    checks skip traced values; a value check with ``eqx.error_if`` inside `fn` would still
    abort the whole chunk: keep those outside.)

    **Arguments:**

    - `fn`: the per-member function. Constants shared by all members are closed over
      (``functools.partial``), not put in `batch_params`. Each call compiles one program
      (see the module docstring); nothing is cached between calls (hold a :class:`Sweep`
      to reuse the compiled program).
    - `batch_params`: pytree of arrays with a common leading batch length `B`.
    - `chunk_size`: members per compiled chunk (rounded up to a multiple of the device
      count); the last chunk, or a batch of fewer members, is padded to it, so every call
      with this `chunk_size` runs one program of that width. `None` runs the whole batch as
      one chunk (with a `cost`: chunks of an automatic width). Chunks bound memory and give
      the progress bar something to count; there is no host round trip inside a chunk. A chunk
      that cannot fit in memory is refused before it runs (see **Raises:**).
    - `cost`: per-member cost estimates (e.g. expected solver steps), an array of `B`
      finite numbers >= 0 or a callable ``cost(batch_params)`` returning one (for the softmax
      Gaussian: :func:`softmax_gaussian_cost`). The members then run sorted by cost, so each
      chunk holds members of similar cost and stops early (under `vmap` a chunk steps until
      its slowest member stops), and the results come back in the caller's order, equal to
      the unordered sweep's. With `chunk_size=None` the width is chosen from the costs (the
      fewest of 1, 2, 4, 8, 16 equal chunks of >= 64 members whose estimated lockstep
      efficiency reaches 90 %: :mod:`hassejax.dynamics._sweep_order`).
    - `progress`: show a tqdm bar when there is more than one chunk.
    - `shard`: split each chunk's batch axis across `devices` (all of `jax.devices()` by
      default) with a 1-D mesh; `False` runs on one device: the default device, or the device the leaves are
      committed to (``jax.device_put``; leaves committed to different devices are refused).
    - `devices`: the devices to shard over (default: all of ``jax.devices()``; with several
      processes this process's own, ``jax.local_devices()``, and only those are allowed:
      every process makes the same call with the same `batch_params`, host-local arrays, and
      runs its share of ``ceil(B / P)`` members on them; see the module docstring).
    - `desc`: label of the progress bar (a string, or None for none).
    - `compiler_options`: XLA options for the chunk program only (``jax.jit``'s
      ``compiler_options``), e.g. ``{"xla_backend_optimization_level": 3}`` for a long sweep in
      a process that compiles at level 0 for speed (hassejax's tests, ``reproduce.py --quick``):
      it overrides ``XLA_FLAGS`` for this program and is part of the compilation cache key.
      They go on top of hassejax's own (the caller's value wins a name both set): on the CPU,
      XLA's legacy loop emitters, ``{"xla_cpu_use_fusion_emitters": False}``, which compile a
      sweep in 0.64–1.01× the time (they round differently from XLA's defaults: results agree
      within the solver's tolerance)
      (:func:`hassejax._xla_flags.sweep_compiler_options`); pass
      ``{"xla_cpu_use_fusion_emitters": True}`` for XLA's defaults.

    **Returns:** the pytree of `fn`'s outputs, each leaf with the batch axis `B` in front
    (padding stripped), in batch order, as JAX arrays. With `P` processes every process
    returns this same full pytree (leaves of `B` rows on its default device).

    **Raises:** :class:`~hassejax.errors.ParameterError` for an ill-formed batch (see
    :func:`batch_size`), a traced leaf (a sweep cannot run under ``jax.jit``, ``jax.grad``, ...; under a top-level ``jax.vmap`` it runs), leaves committed
    to different devices with ``shard=False``, a `chunk_size` that is not a positive integer, a `shard` or `progress`
    that is not a bool, a `cost` that is not
    `B` finite numbers >= 0, an empty `devices`, or `compiler_options` that is not a mapping of
    option names to scalars, that XLA refuses (an unknown name, a value of the wrong type: checked
    on a trivial program before anything is built) or given to a JAX whose ``jax.jit`` has none;
    with several processes also, on every process alike (never a hang), for a
    device of another process in `devices`, a leaf that is a global array spread over
    processes, or `batch_params` that differ between the processes (batch size, structure,
    shapes, dtypes or values: build the batch identically, with the same seed, everywhere).
    :class:`~hassejax.errors.MemoryBudgetError` naming `chunk_size` (with `chunk_size=None`, the whole batch as
    one chunk), before any chunk runs, if XLA's estimate of the chunk program (arguments, outputs and
    temporaries a device, with the outputs of the earlier chunks held; on CPU devices the temporaries twice and
    times the devices, which share the host's memory) exceeds 80 % of the free memory; the message gives the largest chunk size that
    fits by the estimate scaled to fewer members (a multiple of the device count, at most the batch), checked
    against XLA's estimate at that width (one more compile, on this path only) and lowered along the line through
    both where memory does not grow with the chunk, or says that not even one member a device fits. Estimates below 16 MiB are not checked, nor programs the backend gives no estimate
    of; with several processes on every process alike (never a hang), naming the process that lacks memory. Also
    naming `chunk_size`, before the batch is padded, where padding it to whole chunks would not fit (a `chunk_size`
    far above the batch size).

    Source: (derived) spec dynamics.md §4 "Sweeps".

    **Example:** softmax with `V = vI`, `A = I`, `Σ0 = I/2` blows up at `t* = 1/v` for `v > 0`
    (spec §3); three members in chunks of two (the last chunk padded, one program):

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax, solve_gaussian, status_names, sweep
    >>> def member(v):
    ...     model = Softmax(V=v * jnp.eye(2), A=jnp.eye(2))
    ...     sol = solve_gaussian(model, jnp.zeros(2), jnp.eye(2) / 2, t1=5.0, rtol=1e-6, atol=1e-6)
    ...     return {"status": sol.status, "t_blowup": sol.t_blowup}
    >>> out = sweep(member, jnp.array([1.0, 2.0, -1.0]), chunk_size=2, progress=False)
    >>> list(status_names(out["status"])), [round(float(t), 3) for t in out["t_blowup"]]
    (['blow_up', 'blow_up', 'completed'], [1.0, 0.5, inf])

    ```

    On several hosts the same script runs once per host, with
    ``jax.distributed.initialize(coordinator_address="host0:1234", num_processes=P,
    process_id=p)`` (no arguments on Cloud TPU or under Slurm) before anything else touches
    JAX; each process then computes its share and gets the whole result. Run as one process,
    the same lines give the one-process result:

    ```python
    >>> import jax
    >>> out = sweep(lambda v: {"square": v * v, "process": jax.process_index()}, jnp.arange(5.0), progress=False)
    >>> jax.process_count(), out["square"].tolist(), out["process"].tolist()  # with 2: [0, 1, 0, 1, 0]
    (1, [0.0, 1.0, 4.0, 9.0, 16.0], [0, 0, 0, 0, 0])

    ```
    """
    devs = _check_config(fn, chunk_size, shard, devices, compiler_options)
    _sweep_order.check_cost(cost)
    run, sharding = _build_runner(fn, devs, compiler_options)
    return _run_all(run, sharding, devs, batch_params, chunk_size, cost, progress, desc, {})


def sweep_program(
    fn: Callable[[Any], Any],
    batch_params: PyTree,
    *,
    chunk_size: int | None = None,
    cost: Any = None,
    shard: bool = True,
    devices: Sequence[jax.Device] | None = None,
    compiler_options: Mapping[str, Any] | None = None,
) -> jax.stages.Lowered:
    """The program :func:`sweep` runs on each chunk, lowered for ahead-of-time use.

    Same chunking, padding and sharding as ``sweep(fn, batch_params, ...)``: the lowered
    computation takes one chunk (the first, padded; with a `cost`, of the sorted batch) and returns its outputs.
    ``sweep_program(...).compile()`` measures the compile time on its own (benchmarks
    report it separately from run times), ``.as_text()`` shows the program and
    ``.compile().cost_analysis()`` XLA's estimate; the compiled program can be called on
    any chunk of the same shape (e.g. many batches through one compile).

    **Arguments:** as :func:`sweep`.

    **Returns:** a :class:`jax.stages.Lowered`.

    **Raises:** as :func:`sweep`, except :class:`~hassejax.errors.MemoryBudgetError`: nothing runs here
    (``.compile().memory_analysis()`` gives the estimate the sweep checks).

    Source: (derived) spec dynamics.md §4 "Sweeps"; JAX's ahead-of-time lowering (:class:`jax.stages.Lowered`).

    **Example:** five members in chunks of four: one program of width 4:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import sweep_program
    >>> compiled = sweep_program(lambda a: a**2, jnp.arange(5.0), chunk_size=4).compile()
    >>> compiled(jnp.arange(4.0)).tolist()
    [0.0, 1.0, 4.0, 9.0]

    ```
    """
    devs = _check_config(fn, chunk_size, shard, devices, compiler_options)
    _sweep_order.check_cost(cost)
    B = batch_size(batch_params)
    batch_params, _, chunk_size = _sweep_order.plan(cost, batch_params, B, chunk_size, len(devs) if devs else 1)
    batch_params, n = _processes.local_share(batch_params, B, check=False)
    chunk, _, total = _layout(n, chunk_size, devs)
    run, sharding = _build_runner(fn, devs, compiler_options)
    leaves, treedef = jax.tree_util.tree_flatten(batch_params)
    part = [_pad_rows(jnp.asarray(leaf), total)[:chunk] for leaf in leaves]
    if sharding is not None:
        part = jax.device_put(part, sharding)
    return run.lower(jax.tree_util.tree_unflatten(treedef, part))
