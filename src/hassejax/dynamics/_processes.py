"""Sweeps across processes: each process's share of the members, and the gather of the results.

Under JAX's multi-controller runtime (``jax.distributed.initialize``; one Python process per
host, or per GPU, each addressing its own local devices) every process calls :func:`sweep`
with the same batch of `B` members. With `P = jax.process_count()` processes, process `p`
takes the members ``p, p + P, p + 2P, ...`` (a stride, not a contiguous block: a sweep over a
parameter grid usually has its cost rising along the grid, and a stride gives every process
the same mix of cheap and expensive members), padded by repeating the last member to
``ceil(B / P)`` members, so every process runs the same number of members. It runs them on
its own devices (the sweep's vmap, chunks and sharding over ``jax.local_devices()``); the
results are gathered across processes (:func:`jax.experimental.multihost_utils.process_allgather`,
an all-gather over the global devices, gloo on CPU) and put back in the caller's member
order, so every process returns the same full result.

With one process (``jax.process_count() == 1``, the default without
``jax.distributed.initialize``) nothing here runs: :func:`local_share` and :func:`gather`
return their input unchanged and the sweep's default devices stay ``jax.devices()``.

Source: (derived) JAX's multi-process guide (docs.jax.dev, "Multi-host and multi-process").
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PyTree

from ..errors import ParameterError

__all__ = ["sweep_devices", "share_indices", "local_share", "gather", "gather_counts"]


def sweep_devices(devices: Sequence[jax.Device] | None) -> tuple:
    """The devices a sweep shards over: `devices`, or by default all devices of this process.

    With one process the default is ``jax.devices()`` (as before); with several it is
    ``jax.local_devices()``, and every given device must belong to this process.

    **Raises:** :class:`~hassejax.errors.ParameterError` in a multi-process run if a device of
    `devices` belongs to another process.

    **Example:**

    >>> import jax
    >>> from hassejax.dynamics._processes import sweep_devices
    >>> sweep_devices(None) == tuple(jax.devices())
    True
    """
    if jax.process_count() == 1:
        return tuple(jax.devices() if devices is None else devices)
    devs = tuple(jax.local_devices() if devices is None else devices)
    here = jax.process_index()
    foreign = [d for d in devs if d.process_index != here]
    if foreign:
        raise ParameterError(
            f"`devices`: in a run of {jax.process_count()} processes each process shards its share of the "
            f"members over its own devices (jax.local_devices(), the default); got {len(foreign)} device(s) of "
            f"other processes, e.g. {foreign[0]} of process {foreign[0].process_index} (this is process {here})."
        )
    return devs


def share_indices(B: int, process_index: int, process_count: int) -> np.ndarray:
    """Members of a batch of `B` that process `process_index` of `process_count` runs.

    The stride ``p, p + P, ...``, padded to ``ceil(B / P)`` entries by repeating the last
    member ``B - 1``.

    **Returns:** int64 array of shape ``(ceil(B / P),)``.

    **Example:** eleven members over two processes (process 1 repeats member 10 once):

    >>> from hassejax.dynamics._processes import share_indices
    >>> share_indices(11, 0, 2).tolist(), share_indices(11, 1, 2).tolist()
    ([0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9, 10])
    """
    per = math.ceil(B / process_count)
    return np.minimum(process_index + process_count * np.arange(per, dtype=np.int64), B - 1)


def _fingerprint(batch_params: PyTree, B: int) -> np.ndarray:
    """(B, crc32 of the tree structure, shapes and dtypes, crc32 of the values) as uint32."""
    leaves, treedef = jax.tree_util.tree_flatten(batch_params)
    layout = str(treedef) + "".join(f"|{leaf.shape}{leaf.dtype}" for leaf in leaves)
    values = 0
    for leaf in leaves:
        values = zlib.crc32(np.ascontiguousarray(leaf).tobytes(), values)
    return np.array([B, zlib.crc32(layout.encode()), values], dtype=np.uint32)


def _gathered_odd_one(fingerprint: np.ndarray) -> tuple[np.ndarray, int | None]:
    """Every process's `fingerprint` (all-gathered: the same table on every process) and the first process whose
    fingerprint differs from process 0's, or None."""
    from jax.experimental.multihost_utils import process_allgather

    table = np.asarray(process_allgather(fingerprint))
    return table, next((p for p in range(table.shape[0]) if not np.array_equal(table[p], table[0])), None)


def gather_counts(values: Sequence[int]) -> np.ndarray:
    """Every process's row of counts (integers in ``[0, 2**64)``, e.g. bytes): a ``(P, k)`` uint64 table, the same
    on every process, for a decision every process makes alike (a sweep's memory check: never one process
    raising while another waits in the next collective).

    Sent exactly, each count as two uint32 words: without ``jax_enable_x64`` JAX would cut an int64 to int32.
    With one process the row alone (``(1, k)``, nothing gathered); with several every process must call it
    (a collective).

    **Example:**

    >>> from hassejax.dynamics._processes import gather_counts
    >>> gather_counts([3, 2**40]).tolist()
    [[3, 1099511627776]]
    """
    row = np.asarray(values, dtype=np.uint64).ravel()
    if jax.process_count() == 1:
        return row[None]
    words = np.stack([row >> np.uint64(32), row & np.uint64(0xFFFFFFFF)], axis=-1).astype(np.uint32).ravel()
    table, _ = _gathered_odd_one(words)
    table = np.asarray(table).astype(np.uint64).reshape(table.shape[0], -1, 2)
    return (table[..., 0] << np.uint64(32)) | table[..., 1]


def _check_same_everywhere(batch_params: PyTree, B: int) -> None:
    """Raise on every process alike if the processes were given different batches."""
    table, p = _gathered_odd_one(_fingerprint(batch_params, B))  # (P, 3)
    if p is not None:
        what = ["the batch size B", "the tree structure, shapes or dtypes", "the values"]
        differs = next(w for w, a, b in zip(what, table[0], table[p]) if a != b)
        raise ParameterError(
            f"`batch_params` must be the same on every process of a multi-process sweep; process {p} differs "
            f"from process 0 in {differs} (B: {int(table[p][0])} vs {int(table[0][0])}). Build the batch "
            "identically on every process (same seed), not per process."
        )


def check_order(perm: np.ndarray | None, B: int) -> None:
    """Raise :class:`~hassejax.errors.ParameterError` naming `cost`, on every process alike, if the processes
    ordered the members differently (their `cost` differs). Call it after the batch itself was found equal
    (:func:`local_share` on the caller's batch): a sweep's share of a process is taken in the cost order, so a
    differing order was reported as a differing batch (review). Nothing to check with one process."""
    if jax.process_count() == 1:
        return
    order = np.arange(B) if perm is None else np.asarray(perm)
    _, p = _gathered_odd_one(np.array([zlib.crc32(order.astype(np.int64).tobytes())], np.uint32))
    if p is not None:
        raise ParameterError(
            f"`cost` must be the same on every process of a multi-process sweep: process {p} orders the members "
            "differently from process 0 (the batch itself is the same). Compute the cost from the batch, or "
            "identically on every process, not per process."
        )


def local_share(batch_params: PyTree, B: int, *, check: bool = True) -> tuple[PyTree, int]:
    """This process's members of a batch of `B`: (the batch restricted to them, their number).

    With one process: ``(batch_params, B)`` unchanged. With `P` processes: every leaf
    indexed by :func:`share_indices` (leading length ``ceil(B / P)``, host NumPy arrays; typed PRNG keys as JAX key
    arrays of the same implementation),
    after checking (one small all-gather; `check`) that every process holds the same batch.

    **Raises:** :class:`~hassejax.errors.ParameterError`, on every process alike, if a leaf
    is a global array spread over processes, or the processes' batches differ in size,
    structure, shapes, dtypes or values.

    **Example:**

    >>> import numpy as np
    >>> from hassejax.dynamics._processes import local_share
    >>> local_share({"v": np.arange(3.0)}, 3)
    ({'v': array([0., 1., 2.])}, 3)
    """
    if jax.process_count() == 1:
        return batch_params, B
    leaves, treedef = jax.tree_util.tree_flatten(batch_params)
    for leaf in leaves:
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            raise ParameterError(
                "`batch_params`: in a multi-process sweep every process passes the whole batch as host-local "
                f"arrays (NumPy or arrays of its own devices); got a global array of shape {leaf.shape} spread "
                "over several processes."
            )
    # typed PRNG keys as their key data on the host, wrapped again for the share (a new user: NumPy cannot hold
    # `key<fry>` arrays, and a two-process sweep over jax.random.split(key, B) met JAX's raw TypeError)
    impls = [jax.random.key_impl(leaf) if _is_key(leaf) else None for leaf in leaves]
    leaves = [np.asarray(jax.random.key_data(leaf) if impl is not None else leaf) for leaf, impl in zip(leaves, impls)]
    if check:
        _check_same_everywhere(jax.tree_util.tree_unflatten(treedef, leaves), B)
    idx = share_indices(B, jax.process_index(), jax.process_count())
    share = [
        leaf[idx] if impl is None else jax.random.wrap_key_data(leaf[idx], impl=impl)
        for leaf, impl in zip(leaves, impls)
    ]
    return jax.tree_util.tree_unflatten(treedef, share), len(idx)


def _is_key(leaf) -> bool:
    """Whether `leaf` is an array of typed PRNG keys (``jax.random.key``)."""
    return isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def gather(local_out: PyTree, B: int) -> PyTree:
    """Every process's results, gathered on every process, in the caller's member order.

    With one process: `local_out` unchanged. With `P` processes each leaf of `local_out` has
    ``ceil(B / P)`` rows (this process's share, see :func:`share_indices`); the result's leaves
    have `B` rows, member `i` from process ``i % P``, as JAX arrays on the default device.
    Every process must call it (a collective).

    **Example:**

    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics._processes import gather
    >>> gather({"y": jnp.arange(3)}, 3)["y"].tolist()
    [0, 1, 2]
    """
    if jax.process_count() == 1:
        return local_out
    from jax.experimental.multihost_utils import process_allgather

    def interleave(stacked):  # (P, per, ...) -> (per * P, ...) in member order -> the first B
        stacked = np.asarray(stacked)
        rows = np.swapaxes(stacked, 0, 1).reshape((stacked.shape[0] * stacked.shape[1],) + stacked.shape[2:])
        return jnp.asarray(rows[:B])

    return jax.tree_util.tree_map(interleave, process_allgather(local_out, tiled=False))
