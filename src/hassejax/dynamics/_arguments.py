"""Argument checks shared by the solvers (private; spec dynamics.md §4).

Value checks run on concrete arguments only: under ``jit``/``vmap`` (a tracer, see
:func:`hassejax._tracing.is_traced`) they skip themselves. Every error is a
:class:`~hassejax.errors.ParameterError` that names the argument, says what was expected
and what came.
"""

from __future__ import annotations

import numbers
import warnings

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float, Real

from .._tracing import is_traced
from .._warn import user_stacklevel
from ..errors import ParameterError

# The types of the solvers' shared keyword options, written once (as diffrax's `RealScalarLike`).
Scalar = Real[ArrayLike, ""]
SaveTimes = Float[ArrayLike, " T"]
Solver = diffrax.AbstractSolver
Controller = diffrax.AbstractStepSizeController
ProgressMeter = diffrax.AbstractProgressMeter

__all__ = [
    "is_concrete",
    "concrete",
    "real_array",
    "given_numbers",
    "input_shape",
    "numeric_dtype",
    "check_positive",
    "check_size_threshold",
    "token_spread",
    "check_solver_settings",
    "warn_short_layers",
    "state_dtype",
    "check_finite_params",
    "check_state_precision",
    "check_times",
]


def is_concrete(*xs) -> bool:
    """True when none of `xs` is a tracer (value checks are possible)."""
    return not is_traced(*xs)


def concrete(x):
    """`x` as a NumPy array when it is concrete (not a tracer), else None (value checks only)."""
    if x is None or is_traced(x):
        return None
    return np.asarray(x)


_NONE = object()


def _odd_in_list(x):
    """The first entry of nested lists/tuples `x` that is no real number (:func:`_not_a_number`; an array entry by its
    dtype, not entry by entry), or ``_NONE``."""
    stack = [x]
    while stack:
        item = stack.pop()
        for e in item:
            if isinstance(e, (list, tuple)):
                stack.append(e)
            elif _not_a_number(e):
                return e
    return _NONE


def _not_a_number(e) -> bool:
    """An entry of an object array that is not a real number: a bool, a string, None, or an array of those."""
    dtype = getattr(e, "dtype", None)
    if dtype is not None and hasattr(e, "shape"):  # a NumPy or JAX array or scalar (a 0-d JAX bool, a review)
        return np.dtype(dtype).kind not in "iuf"
    return e is None or isinstance(e, (bool, np.bool_, str, bytes))


def real_array(x, name: str, what: str = "a real number"):
    """`x` as a NumPy array when concrete (None for None or a tracer); raise unless it holds real numbers.

    Real numbers NumPy keeps in other dtypes (bfloat16, kind ``V``; Python integers beyond int64,
    kind ``O``) come back as float64.

    **Raises:** :class:`ParameterError` naming `name` for strings, booleans, complex numbers or
    anything else NumPy does not read as a real integer or float array (also inside an object array or a list: a
    bool, a string or None there is refused, not read as 1.0, a number or NaN, as NumPy reads ``[True, 0.5]``).
    """
    if x is None or is_traced(x):
        return None
    if isinstance(x, (str, bytes)):
        raise ParameterError(f"`{name}` must be {what}; got the string {x!r}.")
    try:
        v = np.asarray(x)
    except (TypeError, ValueError) as err:  # not numbers (a ragged list, an object NumPy cannot read); an error of
        # the copy itself (out of memory: a MemoryError, XLA's RESOURCE_EXHAUSTED) is no bad input and passes through
        raise ParameterError(f"`{name}` must be {what}; got {type(x).__name__}.") from err
    if v.dtype.kind in "iuf" and isinstance(x, (list, tuple)):  # NumPy reads [True, 0.5] as [1.0, 0.5]
        odd = _odd_in_list(x)
        if odd is not _NONE:
            raise ParameterError(f"`{name}` must be {what}; got a list holding {type(odd).__name__} {odd!r:.40}.")
    if v.dtype.kind == "O":  # numbers NumPy keeps as objects (big ints, Fractions): not bools, strings or None
        odd = next((e for e in v.flat if _not_a_number(e)), _NONE)
        if odd is not _NONE:
            raise ParameterError(
                f"`{name}` must be {what}; got an object array holding {type(odd).__name__} {odd!r:.40} (dtype object)."
            )
    if v.dtype.kind in "VO":  # bfloat16 (ml_dtypes), a Python int beyond int64: real if float64 holds it
        try:
            v = np.asarray(v, dtype=np.float64)
        except OverflowError as err:
            raise ParameterError(
                f"`{name}` must be {what}; got a number beyond float64's range ({x!r:.40}...)."
            ) from err
        except (TypeError, ValueError):
            pass
    if v.dtype.kind not in "iuf":
        raise ParameterError(f"`{name}` must be {what}; got {x!r:.80} (dtype {v.dtype}).")
    return v


def input_shape(x) -> tuple[int, ...] | None:
    """The shape of an input without converting it (NumPy's `shape`: arrays, tracers, lists); None if it has none."""
    try:
        return tuple(np.shape(x))
    except (TypeError, ValueError):  # a ragged list: the input checks name it
        return None


def numeric_dtype(dtype) -> bool:
    """Whether `dtype` is a number or bool dtype (bfloat16 included), not a string or object one."""
    try:
        return bool(jnp.issubdtype(dtype, jnp.number) or jnp.issubdtype(dtype, jnp.bool_))
    except TypeError:
        return False


def given_numbers(x, converted):
    """`x`, or `converted` (:func:`real_array`'s float64 array of it) when `x` is a NumPy array of dtype ``object``
    holding real numbers, which JAX does not read (a review: an object `cov0` of Python ints met JAX's raw
    ``TypeError`` "Error interpreting argument to stage as a JAX value")."""
    if converted is not None and isinstance(x, np.ndarray) and x.dtype.kind == "O":
        return converted
    return x


def check_positive(x, name: str) -> None:
    """Raise :class:`ParameterError` if a concrete `x` is not a real number > 0."""
    v = real_array(x, name, "a real number > 0")
    if v is not None and not bool(np.all(v > 0)):
        what = "a number, not NaN" if bool(np.any(np.isnan(v))) else "> 0"
        raise ParameterError(f"`{name}` must be {what}; got {v}.")


def token_spread(x: np.ndarray, mask: np.ndarray | None = None) -> float:
    """`(1/n) Σ_i ‖x_i − x̄‖²` of concrete tokens `x` `(..., d)` in float64, over the tokens where `mask`
    `(...)` is True (all when None): the particle solvers' size `λ`, for checks before the solve."""
    x = np.asarray(x, np.float64).reshape(-1, np.shape(x)[-1])
    m = np.ones(len(x)) if mask is None else np.asarray(mask, np.float64).reshape(-1)
    xbar = (m @ x) / m.sum()
    return float(m @ np.sum((x - xbar) ** 2, axis=1) / m.sum())


THRESHOLD_MARGIN_ULPS = 1024
"""A `size_threshold` must exceed the initial size by this many ulps (relative) of the state's dtype:
the program computes the size in that dtype, from a factor of `Σ0` (sum of squares) where the check
reads `tr Σ0`, so the two differ by rounding."""


def check_size_threshold(size_threshold, size0, what: str, dtype) -> None:
    """Raise :class:`ParameterError` if a concrete finite `size_threshold` (as `dtype`) is not above the
    concrete initial size `size0` by :data:`THRESHOLD_MARGIN_ULPS` (`what` names it, e.g. ``"tr Σ0"``):
    the size event fires when the size grows through the threshold, which a size starting at or above
    it never does, so the event would be off without a word. Skipped when either is traced or None,
    or the threshold is `inf` in `dtype` (no event).
    """
    thr, s0 = real_array(size_threshold, "size_threshold"), concrete(size0)
    if thr is None or s0 is None or thr.ndim != 0:
        return
    with np.errstate(over="ignore"):
        thr_d = float(np.asarray(thr, dtype=np.dtype(dtype)))
    if not np.isfinite(thr_d):
        return
    margin = THRESHOLD_MARGIN_ULPS * float(np.finfo(np.dtype(dtype)).eps)
    scaled = f"({what})" if "+" in what else what
    if thr_d <= float(s0) * (1 + margin):
        raise ParameterError(
            f"`size_threshold` must exceed the initial size {what} = {float(s0)!r} (by more than the "
            f"rounding of {np.dtype(dtype).name}, {margin:.1g} relative): the size event fires when the size "
            f"grows through it; got {float(thr)!r}. Pass a larger threshold, None for the default "
            f"(1e8 · {scaled}, 1e4 · in float32, or more where the kernel has a larger size scale: "
            f"`gaussian_size_scale`) or `inf` for no size event."
        )


def check_solver_settings(rtol, atol, max_steps, dt0, stepsize_controller=None, dtype=None) -> None:
    """Raise :class:`ParameterError` for an `rtol` that is negative, non-finite or at least 1, an `atol`
    that is not finite or below the smallest normal number of `dtype` (0 and subnormals are
    flushed to 0), tolerances beyond the range of `dtype`, a `max_steps` that is not a positive
    integer, or a `dt0` that is not finite and > 0 (concrete values; the tolerances' values only
    when the default PID controller is used, their type always).

    Warns (``RuntimeWarning``) when `rtol` is below what the state's `dtype` resolves (under
    5 ulps, e.g. the default 1e-8 in float32): the controller may shrink the step until
    `max_steps_reached` or `dt_min_reached`. Enable float64 (``jax_enable_x64``) or loosen `rtol`.
    """
    if isinstance(max_steps, bool) or not isinstance(max_steps, numbers.Integral) or max_steps < 1:
        raise ParameterError(f"`max_steps` must be a positive integer; got {max_steps!r}.")
    tol = {}
    for name, value, want in (("rtol", rtol, "a finite number in [0, 1)"), ("atol", atol, "a finite number > 0")):
        v = real_array(value, name, want)
        if v is not None and stepsize_controller is None:  # the tolerances feed the default PID controller
            if v.ndim != 0 or not np.isfinite(v) or v < 0:
                raise ParameterError(f"`{name}` must be {want} (a scalar); got {value!r}.")
            if name == "rtol" and v >= 1:  # a relative error of 100 % a step: a fresh user's rtol = 10 read `diverge`
                raise ParameterError(  # for a blow-up at t* = 1, rtol = 1 a blow-up 12 % late, without a word
                    f"`rtol` must be {want}: a relative tolerance of 1 or more admits steps whose error is as large "
                    f"as the state (a wrong verdict or blow-up time, unflagged); got {value!r}. Typical: 1e-6 to 1e-10."
                )
            tol[name] = float(v)
    if tol.get("atol") == 0:  # a state component that is exactly 0 would get a zero error budget
        raise ParameterError(
            "`atol` must be > 0 (with atol = 0 an exactly-zero state component, e.g. a zero mean, admits no step); got 0."
        )
    if dtype is not None:  # the values in the state's dtype, as the controller gets them
        with np.errstate(over="ignore", under="ignore"):
            cast = {k: np.asarray(v, np.dtype(dtype)) for k, v in tol.items()}
        for k, v in cast.items():
            if not np.isfinite(v):  # beyond the dtype's range (a concrete float64 value was checked above)
                raise ParameterError(
                    f"`{k}` must be finite in the state's dtype {jnp.dtype(dtype).name}; got {tol[k]!r:.40}, beyond "
                    f"its range (largest {float(jnp.finfo(dtype).max):.4g}). A traced one is flagged invalid_tolerance."
                )
    tiny = float(jnp.finfo(dtype).tiny) if dtype is not None else 0.0
    if "atol" in tol and dtype is not None and float(cast["atol"]) < tiny:  # 0 or subnormal there: flushed to 0
        name = jnp.dtype(dtype).name
        raise ParameterError(
            f"`atol` must be at least the smallest normal number of the state's dtype {name}, {tiny!r} (below it the "
            f"value is {'0' if cast['atol'] == 0 else 'subnormal, which XLA flushes to 0,'} there: "
            "an exactly-zero state component, e.g. a zero mean, admits no step and the solve ended non_finite at t0); "
            f"got {atol!r:.40}. Pass atol >= {tiny!r}" + (", or use a float64 state." if name != "float64" else ".")
        )
    floor = 5 * float(jnp.finfo(dtype).eps) if dtype is not None else 0.0
    if "rtol" in tol and 0 < tol["rtol"] < floor:
        name = jnp.dtype(dtype).name
        warnings.warn(
            f"`rtol` = {tol['rtol']:g} is below what {name} resolves (5 rounding units, 5 eps = {floor:.1e}): "
            "the step-size controller asks for more than the state's rounding can deliver: the solve may spend its "
            f"step budget (max_steps_reached) or stall (dt_min_reached), and where it completes its error is not "
            f"{tol['rtol']:g}. Use rtol >= {floor:.1e} in {name}"
            + (", or enable float64 (jax.config.update('jax_enable_x64', True))." if name != "float64" else "."),
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    v = real_array(dt0, "dt0", "a finite number > 0 (or None: the controller picks it)")
    if v is not None and (v.ndim != 0 or not np.isfinite(v) or v <= 0):
        raise ParameterError(f"`dt0` must be a finite number > 0 (or None: the controller picks it); got {dt0!r}.")


SHORT_LAYER_UNITS = 1e3
"""A layer of a :class:`~hassejax.dynamics.PiecewiseConstant` parameter shorter than this many rounding units of `t`
(in the state's dtype) draws a warning from :func:`warn_short_layers`."""


def warn_short_layers(layer_edges, t0, t1, dtype) -> None:
    """Warn (``RuntimeWarning``) when the solve from `t0` to `t1` crosses a stretch shorter than
    :data:`SHORT_LAYER_UNITS` rounding units of `t` in `dtype` between two `layer_edges` (the times where a
    :class:`~hassejax.dynamics.PiecewiseConstant` parameter changes value, ``_solve.collect_layer_edges``: `inf` for
    an edge without a change; None for none), or between `t0` or `t1` and such an edge: each edge a step ends on
    shifts the solve's time by a rounding unit (`t0` and `t1` do not), so the solver sees the stretch's length only
    to about one part in its length in those units, whatever `rtol` (a new-user check: float32, a layer of 1e-4 at
    `t = 100`, 13 units, `V` 2000 times the next layer's: `t*` 0.94 % of `t* − t0` late, reported ``blow_up``;
    benchmarks/float32_short_layer.py). Nothing for traced edges (traced parameter values included) or times."""
    if layer_edges is None or dtype is None or is_traced(layer_edges, t0, t1):
        return
    lo, hi = sorted((float(t0), float(t1)))
    eps = float(jnp.finfo(dtype).eps)
    inner = np.unique(np.asarray(layer_edges, np.float64))  # sorted; inf (no change there) drops out below
    inner = inner[(inner > lo) & (inner < hi)]
    if inner.size == 0:
        return
    bounds = np.concatenate([[lo], inner, [hi]])
    a, b = bounds[:-1], bounds[1:]
    # one rounding unit at the stretch's larger end: eps · 2^(e − 1) for |t| = m · 2^e, m in [0.5, 1)
    ulp = eps * np.ldexp(1.0, np.frexp(np.maximum(np.abs(a), np.abs(b)))[1] - 1)
    units = (b - a) / np.maximum(ulp, np.finfo(np.float64).tiny)
    short = np.flatnonzero(units < SHORT_LAYER_UNITS)
    if short.size == 0:
        return
    k = int(short[np.argmin(units[short])])
    name = jnp.dtype(dtype).name
    warnings.warn(
        f"A PiecewiseConstant layer [{a[k]:.8g}, {b[k]:.8g}) is only {units[k]:.3g} rounding units of t long in {name} "
        f"({short.size} such layer{'s' if short.size > 1 else ''}): the solver sees its length only to about 1 part "
        f"in {units[k]:.2g}, whatever rtol (its step times round to few values), and the solution after it carries "
        "that error. "
        + (
            "Enable float64 (jax.config.update('jax_enable_x64', True)), or shift time so that t0 is 0 (the layer "
            "edges with it)."
            if name != "float64"
            else "Shift time so that t0 is 0 (the layer edges with it), or lengthen the layer."
        ),
        RuntimeWarning,
        stacklevel=user_stacklevel(),
    )


def check_solver(solver, stepsize_controller=None, dt0=None) -> None:
    """Raise :class:`ParameterError` unless `solver` is None or a ``diffrax.AbstractSolver`` and
    `stepsize_controller` None or a ``diffrax.AbstractStepSizeController``; for a solver without an error
    estimate (``diffrax.Euler()``, ``SemiImplicitEuler``, ...) under an adaptive controller (the default PID
    controller when `stepsize_controller` is None), which diffrax reports only as a ``RuntimeError`` from inside
    the solve; and for a constant step (``ConstantStepSize()``) without `dt0`."""
    if stepsize_controller is not None and not isinstance(stepsize_controller, diffrax.AbstractStepSizeController):
        raise ParameterError(
            "`stepsize_controller` must be a diffrax step-size controller (e.g. diffrax.PIDController(rtol=..., "
            f"atol=...) or diffrax.ConstantStepSize()) or None for the default; got {stepsize_controller!r:.80}."
        )
    controller = stepsize_controller
    while isinstance(controller, diffrax.ClipStepSizeController):
        controller = controller.controller
    adaptive = controller is None or isinstance(controller, diffrax.AbstractAdaptiveStepSizeController)
    if isinstance(controller, diffrax.ConstantStepSize) and dt0 is None:
        raise ParameterError("`dt0` is required with a constant step (stepsize_controller=diffrax.ConstantStepSize()).")
    if solver is None:
        return
    if not isinstance(solver, diffrax.AbstractSolver):
        raise ParameterError(f"`solver` must be a diffrax solver (e.g. diffrax.Tsit5()) or None; got {solver!r:.80}.")
    if adaptive and not isinstance(solver, diffrax.AbstractAdaptiveSolver):
        which = (
            "the default adaptive step-size controller" if controller is None else "an adaptive step-size controller"
        )
        raise ParameterError(
            f"`solver` {type(solver).__name__}() gives no error estimate, so it cannot run under {which}: pass a "
            "constant step (stepsize_controller=diffrax.ConstantStepSize(), dt0=...) or an adaptive solver "
            "(e.g. diffrax.Tsit5(), diffrax.Heun())."
        )


def state_dtype(params, *arrays) -> jnp.dtype:
    """The floating dtype of a solve: the widest of the state arrays and the parameters' array leaves.

    Mixing, say, a float32 mean with float64 parameters would otherwise give a float64
    velocity for a float32 state, which diffrax cannot store.
    """
    leaves = [x for x in jax.tree_util.tree_leaves(params) if isinstance(x, (jax.Array, np.ndarray))]
    floats = [x for x in (*arrays, *leaves) if x is not None and jnp.issubdtype(jnp.result_type(x), jnp.floating)]
    return jnp.result_type(*floats, float)  # the arrays themselves: weakly typed leaves (beta = 1.0) do not widen


def _is_half(dtype) -> bool:
    """True for a floating-point dtype narrower than float32 (float16, bfloat16)."""
    return jnp.issubdtype(dtype, jnp.floating) and jnp.finfo(dtype).bits < 32


def check_state_precision(dtype, arrays: dict, why: str, params_label: str = "model") -> None:
    """Raise :class:`ParameterError` when the solve's `dtype` (:func:`state_dtype`) is narrower than float32
    (float16, bfloat16), or when a state argument of `arrays` (name ↦ array or None) is, before anything runs.

    A half-precision solve names the entries of `arrays` of its dtype, or `params_label` when none is (the
    parameters set it), and `why` says what fails in half precision. A half-precision state beside wider
    parameters is refused too, not promoted to their dtype: its values are already rounded to half precision.
    """
    if _is_half(dtype):
        names = [k for k, v in arrays.items() if v is not None and jnp.result_type(v) == jnp.dtype(dtype)]
        named = " and ".join(f"`{k}`" for k in names) if names else f"the parameters of `{params_label}`"
        raise ParameterError(
            f"{named} {'have' if len(names) > 1 or not names else 'has'} dtype {jnp.dtype(dtype).name}: the solve "
            f"needs float32 or float64 ({why}). Cast to float32 (e.g. jnp.asarray(x, jnp.float32)) or enable float64."
        )
    halves = {k: jnp.result_type(v) for k, v in arrays.items() if v is not None and _is_half(jnp.result_type(v))}
    if not halves:
        return
    if len(set(halves.values())) == 1:
        named = " and ".join(f"`{k}`" for k in halves)
        named += f" {'have' if len(halves) > 1 else 'has'} dtype {next(iter(halves.values())).name}"
    else:
        named = " and ".join(f"`{k}` has dtype {t.name}" for k, t in halves.items())
    rounded = " or ".join(f"{t.name} (eps {float(jnp.finfo(t).eps):.1e})" for t in dict.fromkeys(halves.values()))
    raise ParameterError(
        f"{named}: a state in half precision is refused, not promoted to the solve's {jnp.dtype(dtype).name}, since "
        f"its values are already rounded to {rounded}. Cast it to float32 or float64 (e.g. jnp.asarray(x, "
        "jnp.float32))."
    )


def check_finite_params(params, name: str = "params") -> None:
    """Raise :class:`ParameterError` if a concrete floating-point leaf of `params` has NaN/inf entries."""
    leaves = jax.tree_util.tree_leaves_with_path(params)
    for path, leaf in leaves:
        v = concrete(leaf) if isinstance(leaf, (jax.Array, np.ndarray, float)) else None
        if v is not None and np.issubdtype(v.dtype, np.floating) and not np.all(np.isfinite(v)):
            raise ParameterError(f"`{name}{jax.tree_util.keystr(path)}` must be finite; got NaN/inf entries.")


def check_progress_meter(progress_meter) -> None:
    """Raise :class:`ParameterError` unless `progress_meter` is None or a ``diffrax.AbstractProgressMeter``."""
    if progress_meter is not None and not isinstance(progress_meter, diffrax.AbstractProgressMeter):
        raise ParameterError(
            "`progress_meter` must be a diffrax progress meter (e.g. diffrax.TqdmProgressMeter()) or None; "
            f"got {type(progress_meter).__name__}."
        )


def check_times(t0, t1, ts) -> None:
    """Types and shape of `t0`, `t1`, `ts`; value checks (finite, `t1 > t0`, `ts` sorted within `[t0, t1]`) when concrete."""
    c0 = real_array(t0, "t0")
    c1 = real_array(t1, "t1")
    cts = real_array(ts, "ts", "an array of real save times, shape (T,)")
    # NumPy's shape: a list of times is fine (jnp.ndim/jnp.shape warned "requires ndarray" on one, a fresh user)
    if ts is not None and (np.ndim(ts) != 1 or np.shape(ts)[0] < 1):
        raise ParameterError(f"`ts` must have shape (T,) with T >= 1; got shape {np.shape(ts)}.")
    for name, v in (("t0", c0), ("t1", c1)):
        if v is not None and v.ndim != 0:
            raise ParameterError(f"`{name}` must be a scalar time; got shape {v.shape}.")
    for name, v in (("t0", c0), ("t1", c1), ("ts", cts)):
        if v is not None and not np.all(np.isfinite(v)):
            raise ParameterError(f"`{name}` must be finite; got {v}.")
    if c0 is not None and c1 is not None and not bool(c1 > c0):
        raise ParameterError(f"`t1` must be > `t0`; got t0 = {float(c0)}, t1 = {float(c1)}.")
    if (
        cts is not None
        and c0 is not None
        and c1 is not None
        and (np.any(np.diff(cts) < 0) or cts[0] < c0 or cts[-1] > c1)
    ):
        raise ParameterError(f"`ts` must be non-decreasing within [t0, t1] = [{float(c0)}, {float(c1)}]; got {cts}.")
