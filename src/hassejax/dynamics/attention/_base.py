"""The abstract attention kernel and the shared parts of the bilinear kernels (spec dynamics.md §1–§2).

An attention kernel is an :class:`equinox.Module` (a pytree: ``jit``, ``vmap`` and the
solvers take it as it is) that holds its own parameters and gives

- :meth:`AbstractAttention.velocity`: the particle velocity field `Γ_μ(x_i)` of spec §1,
  `μ = (1/n) Σ_j δ_{y_j}` the empirical measure of the keys (the queries themselves by
  default, `j = i` included);
- :meth:`AbstractAttention.weights`: the `(m, n)` matrix `W` with `Γ_μ(x_i) = V Σ_j W_ij y_j`,
  for the kernels of that form (all single-head ones);
- :meth:`AbstractAttention.gaussian_affine`: the affine map `Γ_μ(x) = Mx + c` on
  `μ = N(α, Σ)` (spec §2), for the kernels that preserve Gaussians; the others raise.

A new kernel is one subclass: fields for its parameters, :attr:`~AbstractAttention.d`, and
either :meth:`~AbstractAttention.weights` with :meth:`~AbstractAttention.value` (the default
velocity is then `(W y) Vᵀ`) or its own :meth:`~AbstractAttention.velocity`.
:class:`AbstractBilinearAttention` holds what the kernels with logits `β yᵀAx`, `A = KᵀQ`
share (softmax, L2, Sinkhorn, sigmoid, linear).

Time-dependent parameters: every array parameter may instead be a callable `t ↦ array`
(e.g. a small :class:`equinox.Module`) or a :class:`~hassejax.dynamics.PiecewiseConstant`
(one value per layer); the kernels evaluate them at the `t` they are called with.
Construction checks shapes only (statically, so it works on tracers) and accepts leading
batch axes, so a batch of kernels can be built once and ``vmap`` ped over; the solvers call
:meth:`~AbstractAttention.check_unbatched`.
"""

from __future__ import annotations

import abc
import dataclasses
import dis
import inspect
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..._softmax import masked_softmax
from ...errors import ParameterError
from ..params import (
    MatrixParam,
    PiecewiseConstant,
    ProjParam,
    ScalarParam,
    TimeParam,
    _as_param,
    _concrete_layers,
    _shape_of,
    resolve,
)
from ._shapes import (
    Factor,
    GaussianMap,
    GrowthBound,
    KeyMask,
    Keys,
    Matrix,
    Mean,
    Queries,
    SizeScale,
    Time,
    Velocities,
    Weights,
)

__all__ = ["AbstractAttention", "AbstractBilinearAttention", "TimeParam", "check_model"]


def check_queries(x, keys, mask, d: int) -> None:
    """Raise :class:`ParameterError` unless `x` is `(m, d)`, `keys` `(n, d)` and `mask` `(m, n)`."""
    if x.ndim != 2 or x.shape[-1] != d:
        raise ParameterError(f"`x` must have shape (m, d) with d = {d}; got shape {x.shape}.")
    if keys is not None and (keys.ndim != 2 or keys.shape[-1] != d):
        raise ParameterError(f"`keys` must have shape (n, d) with d = {d}; got shape {keys.shape}.")
    n = x.shape[0] if keys is None else keys.shape[0]
    if mask is not None and mask.shape != (x.shape[0], n):
        raise ParameterError(
            f"`mask` must have shape (m, n) = ({x.shape[0]}, {n}) (queries, keys); got shape {mask.shape}."
        )


def softmax_weights(logits: Weights, mask: KeyMask | None) -> Weights:
    """Row softmax over the allowed keys (:func:`hassejax.nn.masked_softmax`: an empty row is all zeros)."""
    if mask is None:
        return jax.nn.softmax(logits, axis=-1)
    return masked_softmax(logits, mask)


def mean_weights(raw: Weights, mask: KeyMask | None) -> Weights:
    """`raw_ij / n_i` on the allowed keys, `n_i` their number (`n` without a mask), 0 elsewhere."""
    if mask is None:
        return raw / raw.shape[-1]
    count = jnp.sum(mask, axis=-1, keepdims=True)
    return jnp.where(mask, raw, 0.0) / jnp.maximum(count, 1)


def scalar_param(value: Any, name: str, owner: str, *, positive: bool = False) -> Any:
    """A scalar parameter (array, callable of `t`, leading batch axes allowed), checked > 0 when concrete and `positive`."""
    value = _as_param(value, name)
    layers = _concrete_layers(value) if positive else None  # NumPy: under an outer jit, jnp would trace
    if layers is not None and not bool(np.all(layers[1][0] > 0)):
        shown = f"layer values {np.asarray(value.values).tolist()}" if isinstance(value, PiecewiseConstant) else value
        raise ParameterError(f"`{name}` of {owner} must be > 0; got {shown}.")
    return value


def bilinear_params(V, A, Q, K, beta, owner: str, *, need_qk: bool = False) -> tuple[Any, Any, Any, Any, Any]:
    """Convert and shape-check `(V, A, Q, K, beta)`: `V` `(d, d)`; `A` `(d, d)` or `Q`, `K` `(k, d)`.

    **Raises:** :class:`ParameterError` naming the field when `V` is not square, neither or
    both of `A` and `(Q, K)` are given (or `A` at all when `need_qk`), only one of `Q`, `K`
    is given, or shapes disagree.
    """
    V, A, Q, K = (_as_param(v, n) for v, n in ((V, "V"), (A, "A"), (Q, "Q"), (K, "K")))
    beta = scalar_param(beta, "beta", owner)
    v = _shape_of(V, "V")
    if len(v) < 2 or v[-1] != v[-2] or v[-1] < 1:
        raise ParameterError(f"`V` of {owner} must have shape (d, d) (square, d >= 1); got shape {v}.")
    d = v[-1]
    has_qk = Q is not None or K is not None
    if need_qk and (A is not None or Q is None or K is None):
        raise ParameterError(
            f"{owner} needs `Q` and `K` (k, d) (its logits are not a function of A = KᵀQ alone"
            f"{'; it takes no `A`: its field A is always None' if A is not None else ''}); got "
            f"{'A' if A is not None else 'no A'}, {'Q' if Q is not None else 'no Q'}, {'K' if K is not None else 'no K'}."
        )
    if A is None and not has_qk:
        raise ParameterError(
            f"{owner}: give the interaction matrix `A` (d, d) or both `Q` and `K` (k, d); got neither."
        )
    if A is not None and has_qk:
        raise ParameterError(f"{owner}: give either `A` or (`Q`, `K`), not both (A = KᵀQ would be ambiguous).")
    if has_qk:
        if Q is None or K is None:
            raise ParameterError(
                f"{owner}: `Q` and `K` must be given together; `{'K' if K is None else 'Q'}` is missing."
            )
        q, k = _shape_of(Q, "Q"), _shape_of(K, "K")
        if len(q) < 2 or q[-1] != d:
            raise ParameterError(f"`Q` of {owner} must have shape (k, d) with d = {d} (from V); got shape {q}.")
        if len(k) < 2 or k[-2:] != q[-2:]:
            raise ParameterError(f"`K` of {owner} must have the shape of `Q`, (k, d) = {q[-2:]}; got shape {k}.")
    else:
        a = _shape_of(A, "A")
        if len(a) < 2 or a[-2:] != (d, d):
            raise ParameterError(f"`A` of {owner} must have shape (d, d) = ({d}, {d}) (d from V); got shape {a}.")
    return V, A, Q, K, beta


def check_model(model: Any, name: str = "model") -> None:
    """Raise :class:`ParameterError` naming `name` unless `model` is an attention kernel (:class:`AbstractAttention`).

    **Raises:** :class:`~hassejax.errors.ParameterError` naming `name` when `model` is not an
    :class:`AbstractAttention` (its only effect; it returns None).

    Source: (derived), no paper: the argument check at the public door (DESIGN.md "Principles"), for the kernels of
    spec dynamics.md §1.

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax
    >>> from hassejax.dynamics.attention import check_model
    >>> check_model(Softmax(V=jnp.eye(2), A=jnp.eye(2)))  # an attention kernel: nothing happens
    >>> check_model(jnp.eye(2), "kernel")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hassejax.errors.ParameterError: `kernel` must be an attention kernel (an AbstractAttention such as ...); got ...

    ```
    """
    if not isinstance(model, AbstractAttention):
        raise ParameterError(
            f"`{name}` must be an attention kernel (an AbstractAttention such as Softmax(V=..., A=...)); "
            f"got {type(model).__name__}."
        )


_OPAQUE_NAMES = frozenset({"locals", "vars", "eval", "exec"})
"""Names whose use lets a function read its arguments without naming them: such a function is not judged."""


def reads_argument(fn, arg: str) -> bool | None:
    """Whether the plain Python function `fn` reads its parameter `arg` anywhere in its body (a load of the name, or a
    closure over it); None when that cannot be told from its code: no Python code object (a builtin, a ``jax.jit``
    wrapper), no parameter of that name (``*args``, ``**kwargs``), or a use of ``locals``/``vars``/``eval``/``exec``.

    Static (the bytecode, nothing is called): it never misreads a function that uses the argument as one that does not.
    """
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    named = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    if arg not in named:
        return None
    if arg in code.co_cellvars:  # read by an inner function
        return True
    for ins in dis.get_instructions(code):
        if not ins.opname.startswith("LOAD"):
            # Python 3.13 fuses a store and a load into STORE_FAST_LOAD_FAST (store, load): its load is a read (a
            # store alone, `mask = None` or `del mask`, is not)
            if ins.opname == "STORE_FAST_LOAD_FAST" and isinstance(ins.argval, tuple) and ins.argval[1:2] == (arg,):
                return True
            continue
        if ins.argval == arg or (isinstance(ins.argval, tuple) and arg in ins.argval):  # LOAD_FAST_LOAD_FAST (3.13)
            return True
        if ins.argval in _OPAQUE_NAMES:
            return None
    return False


def mask_method(kernel: AbstractAttention) -> str:
    """The method of `kernel`'s class that receives the mask of a :meth:`~AbstractAttention.velocity` call: its own
    ``velocity``, else (the default velocity passes it on) ``weights``, else (the bilinear kernels' weights pass it
    on) ``normalise``."""
    cls = type(kernel)
    if cls.velocity is not AbstractAttention.velocity:
        return "velocity"
    if isinstance(kernel, AbstractBilinearAttention) and cls.weights is AbstractBilinearAttention.weights:
        return "normalise"
    return "weights"


def check_reads_mask(kernel: AbstractAttention, name: str = "kernel") -> None:
    """Raise :class:`ParameterError` naming `name` if the method of `kernel` that receives the mask
    (:func:`mask_method`) is a user's function that never reads its `mask` argument (:func:`reads_argument`): under
    :class:`Masked` such a kernel ran unmasked, with no error (a fresh-user review). Methods of the library, functions
    whose use of the argument cannot be told from their code, and a ``velocity`` that reads neither `keys` nor `mask`
    (it may not couple the tokens at all, `Γ(x_i) = f(x_i)`, which no mask changes) pass."""
    method = mask_method(kernel)
    fn = getattr(type(kernel), method)
    if getattr(inspect.unwrap(fn), "__module__", "").startswith("hassejax."):
        return
    if method == "velocity" and reads_argument(fn, "keys") is not True:
        return
    if reads_argument(fn, "mask") is False:
        raise ParameterError(
            f"`{name}` ({type(kernel).__name__}): its `{method}` never reads its `mask` argument, so under a mask "
            f"(Masked) it would run unmasked. Apply the mask there (True = may attend; e.g. softmax over the allowed "
            f"keys, hassejax.nn.masked_softmax), or solve without Masked."
        )


def check_velocity_field(model: AbstractAttention, name: str = "model") -> None:
    """Raise :class:`ParameterError` naming `name` if `model`'s class defines no velocity field: neither
    :meth:`~AbstractAttention.velocity` nor :meth:`~AbstractAttention.weights` with :meth:`~AbstractAttention.value`
    (the particle solves need one; a kernel used only by the Gaussian solve may have :meth:`gaussian_affine`
    alone). The heads of a :class:`~hassejax.dynamics.MultiHead` and the kernel of a
    :class:`~hassejax.dynamics.Masked` are checked first, by their names (``model.heads[0]``, ``model.kernel``): a head
    without a velocity field was told only "has no single weight matrix W" (a fresh-user review)."""
    for i, head in enumerate(getattr(model, "heads", ())):
        check_velocity_field(head, f"{name}.heads[{i}]")
    inner = getattr(model, "kernel", None)
    if isinstance(inner, AbstractAttention):
        check_velocity_field(inner, f"{name}.kernel")
    cls = type(model)
    if cls.velocity is AbstractAttention.velocity:  # the default velocity needs weights and value
        missing = [m for m in ("weights", "value") if getattr(cls, m) is getattr(AbstractAttention, m)]
        if missing:
            raise ParameterError(
                f"`{name}` ({cls.__name__}) defines no velocity field: a kernel overrides `velocity(t, x, keys, "
                f"mask)`, or `weights(t, x, keys, mask)` and `value(t)` (the default velocity is then (W y) Vᵀ); "
                f"{cls.__name__} lacks {' and '.join(f'`{m}`' for m in missing)}."
            )


_SIGNATURE_HINT = (
    " (a kernel's velocity takes (t, x, keys=None, mask=None): the Masked and MultiHead wrappers pass keys and mask)"
)


_TRACED_HINT = (
    " (the solve traces the kernel under jax.jit, its fields and the state as arrays: write the method with jax.numpy "
    "operations, not NumPy or Python conversions of them)"
)


def check_output_shapes(
    call,
    expected: tuple[tuple[int, ...], ...],
    what: str,
    hint: str = "",
    dtype=None,
    args: tuple = (),
    batch_hint: str = "",
) -> None:
    """Raise :class:`ParameterError` unless `call()` returns arrays of the `expected` shapes (a tuple of them, or one
    array for one shape), and of `dtype` when given (the state's, exactly: a wider output failed inside the solver, a
    narrower one, e.g. float32 or int32 in a float64 solve, was stored in it and lost digits, an integer one all of
    its fraction); `what` names the method and its inputs in the message.

    Traced abstractly (:func:`jax.eval_shape`: nothing is computed), before a solve: a user's kernel whose
    :meth:`~AbstractAttention.gaussian_affine` or :meth:`~AbstractAttention.velocity` returned another shape met
    a raw ``dot_general`` or broadcasting error deep inside the solver (a fresh-user review). An error the method
    raises on inputs of the right shapes is re-raised as a :class:`ParameterError` naming it (the original chained).
    `hint`, if given, ends the message of a failed call or a wrong shape; a call that fails with a ``TypeError``
    about its arguments gets the velocity's signature as the hint instead (a fresh-user check: `velocity(self, t,
    x)` under :class:`Masked` was told about batch axes). An output of another dtype than the state's failed inside
    the solver (``buffer.at[i].set``: "value must have a dtype that can be promoted", or "cond branches must have
    equal output types"; a fresh-user check: ``jnp.ones(shape)`` is float64 under ``jax_enable_x64`` in a float32
    solve). With `args`, `call(*args)` is traced with the arrays among `args` abstract, as the solve's
    :func:`equinox.filter_jit` traces the kernel and the state (:func:`equinox.filter_eval_shape`): a method that
    converts them with NumPy passed a check over concrete values and failed inside diffrax (a fresh-user review); it
    is named here, with a hint to use ``jax.numpy``. `batch_hint` ends the message of a failed call, or of one
    array with more axes than expected (a batch axis of the kernel's fields), not of another wrong shape (a fresh-user
    review: a `weights` of shape ``(n,)`` was told about batch axes).
    """
    import equinox as eqx

    from ...errors import HassejaxError

    try:
        out = eqx.filter_eval_shape(call, *args) if args else jax.eval_shape(call)
    except HassejaxError:
        raise
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        if isinstance(err, TypeError) and ("positional argument" in first or "keyword argument" in first):
            hint = _SIGNATURE_HINT
        elif isinstance(err, (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError)):
            hint = _TRACED_HINT
        raise ParameterError(
            f"{what} failed on inputs of the shapes it must take ({type(err).__name__}: {first}){hint or batch_hint}"
        ) from err
    several = isinstance(out, (tuple, list))
    leaves = tuple(out) if several else (out,)
    shapes = tuple(tuple(x.shape) if hasattr(x, "shape") else type(x).__name__ for x in leaves)
    if len(expected) == 1:  # one array, not a 1-tuple (the solver would multiply the tuple)
        if several or shapes != expected:
            got = f"a {type(out).__name__} of shapes {shapes}" if several else str(shapes[0])
            extra = not several and isinstance(shapes[0], tuple) and len(shapes[0]) > len(expected[0])
            raise ParameterError(
                f"{what} must return an array of shape {expected[0]}; got {got}.{hint}{batch_hint if extra else ''}"
            )
    elif not several or shapes != expected:
        got = str(shapes) if several else f"one array of shape {shapes[0]}"
        raise ParameterError(f"{what} must return arrays of shapes {expected}; got {got}.{hint}")
    if dtype is not None:  # a wider output fails in the solver; a narrower one (float32, int32 in a float64 solve)
        # was stored in the state's dtype: a silent wrong answer (an int32 velocity ended `completed`, 1.2 off)
        got = [jnp.dtype(x.dtype) for x in leaves]
        if any(g != jnp.dtype(dtype) for g in got):
            raise ParameterError(
                f"{what} must return arrays of the state's dtype {jnp.dtype(dtype).name} (keep the dtype of its "
                f"inputs: e.g. jnp.ones(shape, dtype=x.dtype), or .astype(x.dtype)); got "
                f"{', '.join(g.name for g in got)}."
            )


def _not_gaussian(kernel, name: str) -> ParameterError:
    return ParameterError(
        f"`{name}` ({type(kernel).__name__}) does not preserve Gaussians (spec §2): its velocity is not affine "
        "on N(α, Σ), so there is no moment ODE; solve the particles instead (solve_particles)."
    )


def gaussian_map_owner(cls: type) -> type:
    """The class whose Gaussian map `cls` uses: the first class of its method resolution order that defines one of
    ``cls._gaussian_map_methods`` (``gaussian_affine`` and what the built-in map is built from, e.g. softmax's
    ``bilinear_map``)."""
    names = cls._gaussian_map_methods
    return next((c for c in cls.__mro__ if any(m in vars(c) for m in names)), AbstractAttention)


def changed_kernel_methods(kernel: AbstractAttention) -> list[str]:
    """The methods that define the kernel (``_gaussian_kernel_methods`` of the class whose Gaussian map it uses,
    :func:`gaussian_map_owner`) that `kernel`'s class overrides below that class: the map was derived for another
    kernel then. Empty for the built-in kernels and for a subclass that overrides the map as well."""
    cls = type(kernel)
    owner = gaussian_map_owner(cls)
    methods = getattr(owner, "_gaussian_kernel_methods", None) or cls._gaussian_kernel_methods  # a mixin has none
    if all(getattr(owner, m, None) in (None, getattr(AbstractAttention, m, None)) for m in methods):
        # the map's class has no kernel of its own (a plain mixin, or a user's base whose subclasses define it): the
        # map was written for the kernel of the class nearest above `cls` in the hierarchy that defines one
        below = cls.__mro__[: cls.__mro__.index(owner)]
        owner = next((c for c in reversed(below) if any(m in vars(c) for m in methods)), cls)
    return [m for m in methods if getattr(cls, m, None) is not getattr(owner, m, None)]


def check_map_of_kernel(kernel: AbstractAttention, name: str = "model") -> None:
    """Raise :class:`ParameterError` naming `name` if `kernel`'s class changed the kernel its inherited Gaussian map
    was derived for (:func:`changed_kernel_methods`): that map solves another ODE (a fresh-user check: a
    :class:`Softmax` subclass with `velocity = −x`, which contracts, or with ReLU weights, which has no Gaussian map,
    blew up at softmax's `t* = 1` in ``solve_gaussian``)."""
    changed = changed_kernel_methods(kernel)
    if changed:
        cls, owner = type(kernel), gaussian_map_owner(type(kernel))
        listed = ", ".join(f"`{m}`" for m in changed)
        raise ParameterError(
            f"`{name}` ({cls.__name__}) overrides {listed} of {owner.__name__}, whose Gaussian map (gaussian_affine) "
            f"was derived for {owner.__name__}'s own kernel: the changed kernel need not preserve Gaussians (spec "
            f"§2), and {owner.__name__}'s map would solve another ODE. Solve the particles (solve_particles); if the "
            f"changed kernel has a Gaussian map, override `gaussian_affine` in {cls.__name__} too (or re-declare "
            f"`gaussian_affine = {owner.__name__}.gaussian_affine` in its class body where the map is unchanged)."
        )


ROW_BLOCK_ENTRIES = 1 << 18
"""Entries of `W` a block of queries holds in the default velocity of a row-wise kernel
(:attr:`AbstractAttention._row_wise`), 2 MiB at float64, for a `W` of more than :data:`ROW_BLOCKED_FROM` entries
(smaller ones are one block). Measured on the 2-core CI machine (float64 softmax, `d = 2`): at `n = 4096` one block
took 55 ms with both cores free and 33 ms on one core, blocks of 64 queries 26 and 28 ms; at `n = 2048` 13 and 8.3 ms
against 8.3 and 7.6 ms (blocks of 128), equal to the bit in these measurements; at `n = 1024` (one block) 1.3 and
2.2 ms."""

ROW_BLOCKED_FROM = 1 << 21
"""The size of `W` (entries) above which the default velocity of a row-wise kernel runs in blocks of queries."""


def query_block(m: int, n: int) -> int | None:
    """Queries per block for an `(m, n)` weight matrix, or None for one block (at most :data:`ROW_BLOCKED_FROM`
    entries)."""
    if m * n <= ROW_BLOCKED_FROM:
        return None
    return max(1, ROW_BLOCK_ENTRIES // n)


def rows_separate(kernel: AbstractAttention) -> bool:
    """True if `kernel`'s weights are row-wise: the class nearest in its method resolution order that sets
    :attr:`~AbstractAttention._row_wise` sets it True, and `kernel`'s class takes ``weights``, ``normalise`` and
    ``logits`` from that class (a subclass that changes one of them may couple the rows, e.g. weights normalised over
    the whole matrix)."""
    cls = type(kernel)
    owner = next(c for c in cls.__mro__ if "_row_wise" in vars(c))
    return bool(owner._row_wise) and all(
        getattr(cls, m, None) is getattr(owner, m, None) for m in ("weights", "normalise", "logits")
    )


class AbstractAttention(eqx.Module):
    """An attention kernel: its parameters, its particle velocity field and, where it has one, its Gaussian map.

    Conventions (spec dynamics.md §1): tokens `x ∈ R^d`; the keys `y_1..y_n` define the
    empirical measure `μ = (1/n) Σ_j δ_{y_j}`; masks are Boolean `(m, n)`, row = query,
    column = key, True = may attend. Parameters may depend on depth `t` (arrays, callables
    `t ↦ array`, :class:`~hassejax.dynamics.PiecewiseConstant`); methods take `t` first, as a
    diffrax vector field does.

    Subclasses set :attr:`d` and either :meth:`weights` and :meth:`value` or
    :meth:`velocity`, honouring `mask` (False = may not attend: :class:`Masked` passes its
    mask there, so a kernel that ignores it is not masked; :class:`Masked` refuses a kernel whose method that
    receives the mask never reads it, :meth:`check_maskable`); kernels that preserve Gaussians (spec §2) override
    :meth:`gaussian_affine`. `_ranks` (a class variable) maps each array field to its unbatched rank (used by
    :meth:`check_unbatched`: with it, a solve given a batched kernel says so; without it, it meets the batch axis
    as a shape error in the kernel's own code, or, where the batch axis broadcasts, solves another kernel
    unflagged: a fresh user's temperature of shape `(d,)` in a kernel written for a scalar). A subclass that adds
    fields adds their ranks, ``_ranks = MappingProxyType({**Softmax._ranks, "tau": 0})`` (the example of
    :class:`AbstractBilinearAttention`).

    Writing a kernel (a fresh-user review met each of these):

    - Store numbers as arrays (``beta: jax.Array`` set from ``jnp.asarray(beta)``): the solvers jit the kernel as
      a pytree, and a Python ``float`` field is a static part of it, so every new value compiles the solve again
      (seconds each).
    - The particle solve's size event watches the spread `(1/n) Σ_i ‖x_i − x̄‖²` unless
      :meth:`gaussian_second_moment` is True, then the second moment `(1/n) Σ_i ‖x_i‖²`. Tokens that blow up
      together (one token, identical tokens, a cluster escaping as a whole) keep their spread near 0: a kernel
      whose velocity can carry the whole measure to infinity in finite time (linear, ReLU attention) returns
      True there, or such a blow-up ends ``max_steps_reached`` or ``dt_min_reached`` instead of ``blow_up``.
    - :meth:`velocity` must accept `keys` and `mask` (the :class:`Masked` and :class:`MultiHead` wrappers pass
      them) and keep the dtype of `x`.
    - A blow-up is told from a divergence by the decade test on the size (:class:`~hassejax.dynamics.Status`):
      it reads a size growing like `(t* − t)^(−k)` as ``blow_up`` for `k ≲ 1.8` only. A velocity of degree 2 in the
      tokens (tokens growing like `1/(t* − t)`, the size like `(t* − t)^(−2)`) reads ``diverge`` with
      `growth_exponent` near 1.5; read `t_final` and `growth_exponent` for such a kernel.

    **Example:** a kernel defined in a few lines (uniform attention, `Γ(x_i) = V ȳ`):

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import AbstractAttention
    >>> class Uniform(AbstractAttention):
    ...     V: jnp.ndarray
    ...     @property
    ...     def d(self):
    ...         return self.V.shape[-1]
    ...     def weights(self, t, x, keys=None, mask=None):
    ...         y = x if keys is None else keys
    ...         allowed = jnp.ones((x.shape[0], y.shape[0]), x.dtype) if mask is None else mask.astype(x.dtype)
    ...         return allowed / jnp.maximum(allowed.sum(axis=1, keepdims=True), 1.0)
    ...     def value(self, t):
    ...         return self.V
    >>> x = jnp.array([[1.0, 0.0], [0.0, 3.0]])
    >>> Uniform(2.0 * jnp.eye(2)).velocity(0.0, x).tolist()
    [[1.0, 3.0], [1.0, 3.0]]
    >>> Uniform(2.0 * jnp.eye(2)).velocity(0.0, x, mask=jnp.tril(jnp.ones((2, 2), bool))).tolist()
    [[2.0, 0.0], [1.0, 3.0]]

    ```
    """

    _ranks: ClassVar[Mapping[str, int]] = MappingProxyType({})

    _gaussian_map_methods: ClassVar[tuple[str, ...]] = ("gaussian_affine",)
    """The methods that define the Gaussian map: a class that defines one of them owns its map."""

    _gaussian_kernel_methods: ClassVar[tuple[str, ...]] = ("velocity", "weights")
    """The methods that define the kernel a class's Gaussian map was derived for: a subclass that overrides one of
    them, and none of :attr:`_gaussian_map_methods`, is refused by :meth:`check_gaussian`."""

    _row_wise: ClassVar[bool] = False
    """True in a class whose :meth:`weights` are row-wise: row `i` of `W` depends on the query `x_i`, the keys and
    row `i` of the mask only, and is cheap to compute for a block of queries (softmax, L2, sigmoid, linear). The
    default :meth:`velocity` may then run a large `W` in blocks of queries (:data:`ROW_BLOCK_ENTRIES`), which gives
    the same velocities up to rounding. Sinkhorn does not set it: its weights take a potential solved from all the
    keys by Sinkhorn's iterations, which each block would solve again. It holds for the class that sets it: a
    subclass that overrides ``weights``, ``normalise`` or ``logits`` without setting it again gets the one-block
    velocity."""

    @property
    @abc.abstractmethod
    def d(self) -> int:
        """Token dimension `d`."""

    def weights(self, t: Time, x: Queries, keys: Keys | None = None, mask: KeyMask | None = None) -> Weights:
        """The `(m, n)` matrix `W` with `Γ_μ(x_i) = V Σ_j W_ij y_j` (`keys` None: `y = x`).

        **Raises:** :class:`~hassejax.errors.ParameterError` for a kernel without that form
        (e.g. :class:`MultiHead`).
        """
        raise ParameterError(
            f"{type(self).__name__} has no single weight matrix W (Γ(x_i) = V Σ_j W_ij y_j); use `velocity`. (A "
            "new kernel overrides `velocity`, or `weights` and `value`.)"
        )

    def value(self, t: Time) -> Matrix:
        """The value matrix `V(t)` of the form `Γ_μ(x_i) = V Σ_j W_ij y_j`.

        **Raises:** :class:`~hassejax.errors.ParameterError` for a kernel without that form.
        """
        raise ParameterError(
            f"{type(self).__name__} has no single value matrix V; use `velocity`. (A new kernel overrides "
            "`velocity`, or `weights` and `value`.)"
        )

    def velocity(self, t: Time, x: Queries, keys: Keys | None = None, mask: KeyMask | None = None) -> Velocities:
        """`Γ_μ(x_i)` for every query `x_i`, `μ` the empirical measure of `keys` (default: `x`).

        Default: `(W y) V(t)ᵀ` from :meth:`weights` and :meth:`value`.

        **Arguments:** `t` depth; `x` `(m, d)` queries; `keys` `(n, d)` or None (`y = x`);
        `mask` `(m, n)` Boolean (True = query `i` may attend to key `j`) or None.

        **Returns:** `(m, d)` velocities.

        **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that do not match `d`, and
        for weights that are not floating or narrower than `x` (integer weights truncate).
        """
        check_queries(x, keys, mask, self.d)
        y = x if keys is None else keys
        block = query_block(x.shape[0], y.shape[0]) if rows_separate(self) else None
        if block is None:
            wy = self._weighted_keys(t, x, y, mask)
        else:  # blocks of queries (``jax.lax.map``): each block's weights stay in the cache (:data:`ROW_BLOCK_ENTRIES`)
            m, pad = x.shape[0], -x.shape[0] % block
            xb = jnp.pad(x, ((0, pad), (0, 0))).reshape(-1, block, x.shape[1])
            if mask is None:
                wy = jax.lax.map(lambda q: self._weighted_keys(t, q, y, None), xb)
            else:  # the padded queries attend to nothing (an empty row: weights 0) and are cut off
                mb = jnp.pad(mask, ((0, pad), (0, 0))).reshape(-1, block, mask.shape[1])
                wy = jax.lax.map(lambda qm: self._weighted_keys(t, qm[0], y, qm[1]), (xb, mb))
            wy = wy.reshape(-1, y.shape[1])[:m]
        return wy @ jnp.asarray(self.value(t)).T

    def _weighted_keys(self, t: Time, x: Queries, y: Keys, mask: KeyMask | None) -> Queries:
        """`W y` for the queries `x` (the weights checked floating and at least as wide as `x`)."""
        w = self.weights(t, x, y, mask)
        w_dtype = jnp.result_type(w)
        if not jnp.issubdtype(w_dtype, jnp.inexact) or jnp.promote_types(w_dtype, x.dtype) != w_dtype:
            # narrower than the queries: int32 weights truncated to 0 and nothing moved, `completed` (a fresh user)
            raise ParameterError(
                f"{type(self).__name__}.weights must return floating weights at least as wide as x ({x.dtype.name}: "
                f"keep the dtype of x, e.g. .astype(x.dtype)); got {w_dtype.name}."
            )
        return w @ y

    def gaussian_affine(self, t: Time, mean: Mean, cov: Matrix, factor: Factor | None = None) -> GaussianMap:
        """`(M, c)` with `Γ_μ(x) = Mx + c` on `μ = N(mean, cov)` (spec dynamics.md §2).

        `factor` is any `U` with `cov = UUᵀ` (the solver's state; kernels that need a factor
        take the PSD square root of `cov` when it is None).

        **Raises:** :class:`~hassejax.errors.ParameterError` here: this kernel does not
        preserve Gaussians (override in kernels that do).
        """
        raise _not_gaussian(self, "model")

    def gaussian_size_scale(self, t: Time) -> SizeScale:
        """The size `tr Σ` at which this kernel's Gaussian map leaves its small-`Σ` form; 0 if it has none.

        The default size threshold of :func:`~hassejax.dynamics.solve_gaussian` is `1e8 ×` (float32:
        `1e4 ×`) the larger of this and `tr Σ0`, so that the decade test times the growth where the
        map has its large-`Σ` form. L2 is the case (spec dynamics.md §3): for `2βc‖KᵀK‖ tr Σ ≪ 1` its
        map is softmax's, `M ≈ 2βcVΣA`, whose Riccati growth looks like a blow-up, and it saturates
        to `M → V(KᵀK)⁻¹A` (at most exponential growth) from `tr Σ ~ 1/(2βc‖KᵀK‖)` on; from
        `Σ0 = 1e-10 I` a threshold of `1e8 tr Σ0` lay below that scale and the solve read a blow-up.

        **Arguments:** `t` depth (the kernel's parameters at `t`; the solvers pass `t0`).

        **Returns:** a scalar `≥ 0` (float), 0 here (softmax, linear, Sinkhorn: no such scale).

        **Raises:** nothing here; L2 raises :class:`~hassejax.errors.ParameterError` for batched
        parameters, as its :meth:`value` does.

        **Example:**

        ```python
        >>> import jax.numpy as jnp
        >>> from hassejax.dynamics import L2, Softmax
        >>> float(Softmax(V=jnp.eye(2), A=jnp.eye(2)).gaussian_size_scale(0.0))
        0.0
        >>> float(L2(V=jnp.eye(2), Q=jnp.eye(2), K=2 * jnp.eye(2)).gaussian_size_scale(0.0))  # 1/(2 · 4)
        0.125

        ```
        """
        del t
        return jnp.zeros(())

    def gaussian_growth_bound(self, t: Time) -> GrowthBound:
        """A rate `r` with `d/dt tr Σ ≤ r tr Σ` for every Gaussian state `N(α, Σ)` at depth `t`; `inf` if none.

        A bound that holds at every depth rules out a finite-time blow-up (Grönwall: `tr Σ(t) ≤
        tr Σ(t0) e^{r(t − t0)}`), so :func:`~hassejax.dynamics.solve_gaussian` reads a crossing of its
        size threshold as ``diverge`` whatever the decade test says when the kernel's parameters are
        constant or :class:`~hassejax.dynamics.PiecewiseConstant` (the largest bound over the layers
        finite): the test times the last two decades of growth, which a burst (growth that speeds up
        for a while, as L2's when the small directions of `Σ` grow out of its softmax-like regime)
        makes look like a blow-up. A parameter that is a callable of `t` may keep the bound finite at
        every depth and still unbounded over the interval (`V(t) = I/(2(1 − t))` blows up at 1): the
        decade test alone decides then. Derived from `d/dt tr Σ = 2 tr(MΣ)`:

        - L2 (`βc > 0`, `KᵀK` invertible, spec dynamics.md §3): `M = V (Σ⁻¹/(2βc) + KᵀK)⁻¹ A`, so
          `‖M‖₂ ≤ ‖V‖₂‖A‖₂/λ_min(KᵀK)` and `r = 2‖V‖₂‖A‖₂/λ_min(KᵀK)`; `inf` for a singular `KᵀK`
          (directions in `ker K` are not damped) or `βc ≤ 0`.
        - Sinkhorn: `MΣ = VU(gC)Uᵀ` (see :meth:`Sinkhorn.slope`) with `‖g(CCᵀ)C‖₂ < 1`, so
          `2 tr(MΣ) ≤ 2‖UᵀVU‖_* ≤ 2‖V‖₂ tr Σ`: `r = 2‖V‖₂`.
        - :class:`MultiHead`: the sum of its heads' bounds.
        - Softmax and linear: `inf` (their maps grow with `Σ`; softmax blows up, spec §3).

        **Arguments:** `t` depth (the kernel's parameters at `t`: a bound at one depth says nothing of
        parameters that change later; the solver reads it once for constant parameters and at every
        layer edge of piecewise-constant ones).

        **Returns:** a scalar `≥ 0` or `inf` (float; 0 for `V = 0`), `inf` here.

        **Raises:** nothing here; L2 and Sinkhorn raise :class:`~hassejax.errors.ParameterError`
        for batched parameters, as their :meth:`value` does.

        **Example:**

        ```python
        >>> import jax.numpy as jnp
        >>> from hassejax.dynamics import L2, Softmax
        >>> float(Softmax(V=jnp.eye(2), A=jnp.eye(2)).gaussian_growth_bound(0.0))
        inf
        >>> float(L2(V=jnp.eye(2), Q=jnp.eye(2), K=2 * jnp.eye(2)).gaussian_growth_bound(0.0))  # 2 ‖V‖ ‖KᵀQ‖ / λ_min(KᵀK) = 2 · 1 · 2 / 4
        1.0

        ```
        """
        del t
        return jnp.asarray(jnp.inf)

    def gaussian_uses_factor(self) -> bool:
        """Whether :meth:`gaussian_affine` is evaluated from the factor `U` (`Σ = UUᵀ`) rather than `Σ` alone.

        False here; True for kernels whose map needs a square root of `Σ` (Sinkhorn, and a
        :class:`MultiHead` holding one): ``solve_gaussian(..., state="covariance")`` refuses them,
        since a square root taken from `Σ` at every evaluation has no finite derivative at
        repeated or zero eigenvalues.

        **Example:**

        ```python
        >>> import jax.numpy as jnp
        >>> from hassejax.dynamics import MultiHead, Sinkhorn, Softmax
        >>> Softmax(V=jnp.eye(2), A=jnp.eye(2)).gaussian_uses_factor()
        False
        >>> MultiHead([Softmax(V=jnp.eye(2), A=jnp.eye(2)), Sinkhorn(V=jnp.eye(2), A=jnp.eye(2))]).gaussian_uses_factor()
        True

        ```
        """
        return False

    def gaussian_second_moment(self) -> bool:
        """Whether the Gaussian map depends on the mean through the second moment `S = Σ + ααᵀ = E[xxᵀ]`.

        False here and for softmax, L2 and Sinkhorn (`M` depends on `Σ` alone); True for linear attention
        (`M = βV(Σ + ααᵀ)A`, spec dynamics.md §2) and a :class:`MultiHead` with such a head. For such a kernel
        the solvers' size event watches `tr S = tr Σ + ‖α‖² = E‖x‖²` and the steady-state event `‖S'‖_F`, not
        `tr Σ` and `‖Σ'‖_F`: from a point mass (`Σ0 = 0`, `α0 ≠ 0`) linear attention moves the mean alone
        (`α' = β(αᵀAα)Vα`, which blows up at `t* = 1/(2β‖α0‖²)` for `V = A = I`) while `Σ` stays 0, so an event on
        `Σ` alone never saw the blow-up (the solve ended ``max_steps_reached``) nor the mean still moving (a
        contraction read ``converged``). Both moments blow up at the same time from a `Σ0 ≠ 0`.

        **Example:**

        ```python
        >>> import jax.numpy as jnp
        >>> from hassejax.dynamics import Linear, MultiHead, Softmax
        >>> soft, lin = Softmax(V=jnp.eye(2), A=jnp.eye(2)), Linear(V=jnp.eye(2), A=jnp.eye(2))
        >>> soft.gaussian_second_moment(), lin.gaussian_second_moment(), MultiHead([soft, lin]).gaussian_second_moment()
        (False, True, True)

        ```
        """
        return False

    def gaussian_homogeneous(self) -> bool:
        """Whether the Gaussian map is homogeneous in `Σ`: `M(α, sΣ) = s M(α, Σ)` for every `s > 0`, and `c` free of `Σ`.

        True for softmax (`M = βVΣA`, `c = Vα`) and a :class:`MultiHead` of such heads; False here and for
        L2, linear (`M = βV(Σ + ααᵀ)A`) and Sinkhorn. The covariance velocity of such a kernel is of degree
        2 in `Σ`, which ``solve_gaussian(..., state="projective")`` needs (scale and shape integrated apart,
        in the time of the size; spec dynamics.md §3: "softmax is homogeneous of degree 2 in Σ").

        **Example:**

        ```python
        >>> import jax.numpy as jnp
        >>> from hassejax.dynamics import Linear, Softmax
        >>> Softmax(V=jnp.eye(2), A=jnp.eye(2)).gaussian_homogeneous(), Linear(V=jnp.eye(2), A=jnp.eye(2)).gaussian_homogeneous()
        (True, False)

        ```
        """
        return False

    def check_projective_state(self, name: str = "model") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` unless ``solve_gaussian(..., state="projective")`` can
        solve this kernel (a homogeneous Gaussian map, :meth:`gaussian_homogeneous`); `name` labels it.

        **Example:**

        ```python
        >>> import jax.numpy as jnp
        >>> from hassejax.dynamics import L2
        >>> L2(V=jnp.eye(2), Q=jnp.eye(2), K=jnp.eye(2)).check_projective_state()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        hassejax.errors.ParameterError: `state='projective'` needs a Gaussian map homogeneous in Σ ...

        ```
        """
        if not self.gaussian_homogeneous():
            raise ParameterError(
                f"`state='projective'` needs a Gaussian map homogeneous in Σ (M(α, sΣ) = s·M(α, Σ), c free of Σ: "
                f"softmax, or a multi-head of softmax heads); {name} ({type(self).__name__}) is not: use "
                "state='factor' (a kernel whose map is homogeneous says so by overriding gaussian_homogeneous)."
            )

    def check_covariance_state(self, name: str = "model") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` if ``solve_gaussian(..., state="covariance")`` cannot
        solve this kernel reliably; `name` labels it in the message.

        Here: a kernel whose map is evaluated from a factor (:meth:`gaussian_uses_factor`) raises. L2
        overrides it (its map depends on the small directions of `Σ`, which the symmetric state holds only
        to `rtol · λ_max`), :class:`MultiHead` asks its heads.

        **Example:**

        ```python
        >>> import jax.numpy as jnp
        >>> from hassejax.dynamics import L2, Softmax
        >>> Softmax(V=jnp.eye(2), A=jnp.eye(2)).check_covariance_state()  # nothing raised
        >>> L2(V=jnp.eye(2), Q=jnp.eye(2), K=jnp.eye(2)).check_covariance_state()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        hassejax.errors.ParameterError: `state='covariance'` cannot solve model (L2) reliably: ...

        ```
        """
        if self.gaussian_uses_factor():
            raise ParameterError(
                f"`state='covariance'` needs a kernel whose Gaussian map is evaluated from Σ alone; {name} "
                f"({type(self).__name__}) evaluates its map from a factor of Σ: use `state='factor'`."
            )

    def check_gaussian(self, name: str = "model") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` unless the kernel has a Gaussian map (spec §2).

        A kernel has one when its class overrides :meth:`gaussian_affine`, and no subclass below the class that
        defines the map changed the kernel the map was derived for: a subclass of a kernel with a closed-form map
        (:class:`Softmax`, :class:`L2`, :class:`Linear`, :class:`Sinkhorn`, :class:`MultiHead`, or a user's kernel)
        that overrides a method defining its velocity (:meth:`velocity`, :meth:`weights`, and per class
        ``normalise`` and ``logits`` of the bilinear kernels, ``interaction`` of L2, ``_potential`` of
        Sinkhorn: the class attribute ``_gaussian_kernel_methods``) raises, unless it overrides the map too
        (:meth:`gaussian_affine`, or a method the built-in map is built from such as softmax's ``bilinear_map``;
        ``gaussian_affine = Softmax.gaussian_affine`` in the class body keeps softmax's map and says it holds).
        """
        if type(self).gaussian_affine is AbstractAttention.gaussian_affine:
            raise _not_gaussian(self, name)
        check_map_of_kernel(self, name)

    def _check_gaussian_interval(self, t0: float, t1: float, name: str = "model") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` if the Gaussian map does not exist somewhere on
        `[t0, t1]` in a way known before the solve (concrete times; default: nothing to check). L2 checks the
        layers of its :class:`~hassejax.dynamics.PiecewiseConstant` `βc` there (:meth:`check_gaussian` checks
        constants at every time, and cannot refuse a layer the solve never reaches)."""

    def check_maskable(self, name: str = "kernel") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` if the kernel cannot be used under a mask (:class:`Masked`).

        Here: when the method that receives the mask (its own :meth:`velocity`, else :meth:`weights`, else the
        bilinear kernels' ``normalise``) is a user's function that never reads its `mask` argument (read from its
        code, nothing called: a function that reads it, or whose use of it cannot be told, passes; so does a
        ``velocity`` that reads no `keys` either, which may not couple the tokens), since such a kernel would run
        unmasked with no error.
        """
        check_reads_mask(self, name)

    def check_unbatched(self, name: str = "model") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` if an array field has leading batch axes (inside a solve)."""
        for field, rank in self._ranks.items():
            value = getattr(self, field)
            if value is None:
                continue
            shp = _shape_of(value, field)
            if len(shp) != rank:
                raise ParameterError(
                    f"`{name}.{field}` must have rank {rank} in a solve or a kernel call (vmap over batched parameters "
                    f"instead of passing them batched); got shape {shp}."
                )


class AbstractBilinearAttention(AbstractAttention):
    """Shared fields and logits of the kernels with logits `β yᵀAx`, `A = KᵀQ` (spec dynamics.md §1).

    Fields: `V` `(d, d)` value matrix; `A` `(d, d)` interaction matrix, or `Q`, `K` `(k, d)`
    (then `A = KᵀQ`); `beta` the inverse temperature. Each may be an array, a callable of `t`
    or a :class:`~hassejax.dynamics.PiecewiseConstant`, with leading batch axes
    for ``vmap`` (every array leaf is mapped: batch `beta` too, ``beta=jnp.ones(B)``, or build the kernel
    inside the vmapped function from batched arrays; a scalar `beta` beside batched `V`, `A` makes
    ``jax.vmap`` refuse the kernel, "rank should be at least 1"). The constructor checks them with
    ``bilinear_params``; subclasses with more
    fields write their own (one that adds fields without it is refused when the class is defined; the example
    below). :meth:`weights` applies the subclass's :meth:`normalise` to
    :meth:`logits`; kernels whose weights are not a function of the logits override
    :meth:`weights` instead.

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Softmax
    >>> Softmax(V=jnp.eye(2), Q=jnp.array([[1.0, 0.0]]), K=jnp.array([[0.0, 2.0]])).interaction(0.0).tolist()
    [[0.0, 0.0], [2.0, 0.0]]

    ```

    A kernel with a parameter of its own, a softmax at temperature `τ` (logits divided by `τ`; only the logits
    change, so the solvers refuse the inherited Gaussian map, derived for softmax, until the subclass gives one):

    ```python
    >>> import jax
    >>> from types import MappingProxyType
    >>> from typing import ClassVar
    >>> from hassejax.dynamics import solve_particles
    >>> class Tempered(Softmax):
    ...     tau: jax.Array
    ...     _ranks: ClassVar = MappingProxyType({**Softmax._ranks, "tau": 0})  # a solve refuses a batched tau
    ...     def __init__(self, V, A=None, Q=None, K=None, beta=1.0, tau=1.0):
    ...         super().__init__(V, A, Q, K, beta)
    ...         self.tau = jnp.asarray(tau)
    ...     def logits(self, t, x, y):
    ...         return super().logits(t, x, y) / self.tau
    >>> sol = solve_particles(Tempered(V=jnp.eye(2), A=jnp.eye(2), tau=2.0), jnp.eye(2), t1=0.5)
    >>> sol.x_final.shape
    (2, 2)
    >>> solve_particles(Tempered(V=jnp.eye(2), A=jnp.eye(2), tau=jnp.ones(2)), jnp.eye(2), t1=0.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    hassejax.errors.ParameterError: `model.tau` must have rank 0 in a solve or a kernel call ...; got shape (2,).

    ```
    """

    V: Float[Array, "... d d"] | TimeParam
    A: Float[Array, "... d d"] | TimeParam | None
    Q: Float[Array, "... k d"] | TimeParam | None
    K: Float[Array, "... k d"] | TimeParam | None
    beta: Float[Array, "*_batch"] | TimeParam

    _ranks: ClassVar[Mapping[str, int]] = MappingProxyType({"V": 2, "A": 2, "Q": 2, "K": 2, "beta": 0})
    _gaussian_map_methods: ClassVar[tuple[str, ...]] = ("gaussian_affine", "bilinear_map")
    _gaussian_kernel_methods: ClassVar[tuple[str, ...]] = ("velocity", "weights", "normalise", "logits")

    def __init__(self, V: MatrixParam, A: MatrixParam | None = None, Q: ProjParam | None = None,
                 K: ProjParam | None = None, beta: ScalarParam = 1.0):  # fmt: skip
        self.V, self.A, self.Q, self.K, self.beta = bilinear_params(V, A, Q, K, beta, type(self).__name__)

    def __init_subclass__(cls, **kwargs):
        """Refuse, when the class is defined, a subclass that adds fields but would construct with this
        ``__init__``, which sets only `V`, `A`, `Q`, `K`, `beta` (a fresh user's tempered softmax met
        ``TypeError: ... got an unexpected keyword argument 'tau'`` at its first instance)."""
        super().__init_subclass__(**kwargs)
        owner = next(k for k in cls.__mro__ if "__init__" in vars(k))
        if owner is not AbstractBilinearAttention:
            return
        new = []
        for k in cls.__mro__[: cls.__mro__.index(owner)]:
            try:
                annotations = inspect.get_annotations(k)
            except Exception:  # annotations that cannot be read (evaluated lazily): no check
                return
            for name, ann in annotations.items():
                # class variables, abstract fields (eqx.AbstractVar: a subclass gives them) and fields with a
                # default (the class attribute stands in for the instance's) need no constructor argument
                if any(word in str(ann) for word in ("ClassVar", "AbstractVar", "AbstractClassVar")):
                    continue
                default = vars(k).get(name, dataclasses.MISSING)
                if isinstance(default, dataclasses.Field):  # eqx.field(...): its default, if any (a default_factory
                    default = default.default  # runs only in a generated __init__, which this class does not get)
                if name in ("V", "A", "Q", "K", "beta") or default is not dataclasses.MISSING:
                    continue
                new.append(name)
        if new:
            raise TypeError(
                f"{cls.__name__} adds the field(s) {', '.join(new)} to {cls.__mro__[1].__name__}, whose constructor sets "
                "only V, A, Q, K and beta: give it its own __init__, e.g.\n"
                "    def __init__(self, V, A=None, Q=None, K=None, beta=1.0, tau=1.0):\n"
                "        super().__init__(V, A, Q, K, beta)\n"
                "        self.tau = jnp.asarray(tau)"
            )

    @property
    def d(self) -> int:
        """Token dimension `d` (from `V`)."""
        return _shape_of(self.V, "V")[-1]

    def value(self, t: Time) -> Matrix:
        """`V(t)` (a kernel built with batched parameters raises: ``vmap`` over it instead)."""
        self.check_unbatched("model")
        return jnp.asarray(resolve(self.V, t))

    def interaction(self, t: Time) -> Matrix:
        """`A(t)`, or `K(t)ᵀQ(t)` when `A` was not given (batched parameters raise, as :meth:`value`)."""
        self.check_unbatched("model")
        if self.A is not None:
            return jnp.asarray(resolve(self.A, t))
        return jnp.swapaxes(resolve(self.K, t), -1, -2) @ resolve(self.Q, t)

    def logits(self, t: Time, x: Queries, y: Keys) -> Weights:
        """`[i, j] = β y_jᵀ A x_i` at depth `t`."""
        a = self.interaction(t)
        return resolve(self.beta, t) * (x @ a.T @ y.T)

    def weights(self, t: Time, x: Queries, keys: Keys | None = None, mask: KeyMask | None = None) -> Weights:
        """:meth:`normalise` of the logits `β y_jᵀAx_i` over the allowed keys (`keys` None: `y = x`)."""
        y = x if keys is None else keys
        return self.normalise(t, self.logits(t, x, y), mask)

    def normalise(self, t: Time, logits: Weights, mask: KeyMask | None) -> Weights:
        """The weights `W` from the logits `β yᵀAx` (and `mask`); kernels that use :meth:`weights` override it."""
        raise NotImplementedError(f"{type(self).__name__} defines neither `normalise` nor `weights`.")

    def bilinear_map(self, t: Time, moment: Matrix) -> Matrix:
        """`βV(t) S A(t)` for a second-moment matrix `S` (the `M` of softmax, `S = Σ`, and linear, `S = Σ + ααᵀ`)."""
        return resolve(self.beta, t) * self.value(t) @ moment @ self.interaction(t)
