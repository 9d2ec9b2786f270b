"""Closed forms of the softmax covariance dynamics (spec dynamics.md §3).

For softmax attention with `V = vI` the precision obeys `(Σ⁻¹)' = −βv(A + Aᵀ)` (derived from
`Σ' = βv Σ(A + Aᵀ)Σ`), so

    `Σ(t) = Σ0^{1/2} (I − βvt Σ0^{1/2}(A + Aᵀ)Σ0^{1/2})⁻¹ Σ0^{1/2}`,

written with `Σ0^{1/2}` so that a singular `Σ0` works (spec §3, derived). It blows up in
finite time iff `λ* = λ_max(βv Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}) > 0`, at `t* = 1/λ*`. All functions
are pure jnp (jittable, vmappable over leading batch axes where stated).

Argument order, the same in every function: the initial state (mean, covariance), then the
interaction `A`, then the value scale `v` (`V = vI`), then the time `t`, then `β`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Real

from .._tracing import is_traced
from ..errors import ParameterError
from ._arguments import concrete
from ._linalg import below_psd, check_psd, psd_sqrt, sandwich_eigvalsh, symmetrize

__all__ = [
    "softmax_covariance_closed_form",
    "blowup_time_closed_form",
    "diagonal_covariance_closed_form",
    "diagonal_blowup_time",
    "softmax_1d_closed_form",
    "clustering_limit",
]

# Argument shapes (leading batch axes broadcast): a `(d, d)` matrix (`_d`: the result binds `d`), a diagonal, a scalar.
Matrices = Float[ArrayLike, "*#batch _d _d"]
Diagonals = Float[ArrayLike, "*#batch d"]
Scalars = Real[ArrayLike, "*#batch"]


def _check_square(x, name):
    if jnp.ndim(x) < 2 or jnp.shape(x)[-1] != jnp.shape(x)[-2]:
        raise ParameterError(f"`{name}` must have shape (..., d, d); got shape {jnp.shape(x)}.")


def _check_values(sigma0, a, v, beta) -> None:
    """Concrete inputs only (tracers pass): finite entries, `Sigma0` symmetric positive semidefinite."""
    _check_concrete({"Sigma0": sigma0, "A": a, "v": v, "beta": beta})
    c = concrete(sigma0)
    if c is not None:
        check_psd(c, "Sigma0")


def _check_concrete(finite: dict, nonnegative: tuple[str, ...] = ()) -> None:
    """Concrete inputs only (a traced NaN comes out as NaN, not a plausible `inf`): finite entries, and the
    entries of the names in `nonnegative` (variances, times) ``>= 0``; a :class:`~hassejax.errors.ParameterError`
    names the argument."""
    for name, x in finite.items():
        c = concrete(x)
        if c is None:
            continue
        if not np.all(np.isfinite(c)):
            raise ParameterError(f"`{name}` must be finite; got NaN/inf entries.")
        if name in nonnegative and np.any(c < 0):
            raise ParameterError(f"`{name}` must be >= 0; got {float(np.min(c)):.6g}.")


def _check_broadcast(args: dict, trailing: tuple[str, ...] = ()) -> None:
    """Raise :class:`~hassejax.errors.ParameterError` naming the arguments if their shapes do not broadcast together
    (a raw ``TypeError: mul got incompatible shapes`` before, a review). The names in `trailing` are batch-only
    arguments that meet the diagonals' last axis `d` with an axis of 1 appended."""
    given = {name: tuple(np.shape(x)) for name, x in args.items()}
    used = [shape + (1,) if name in trailing else shape for name, shape in given.items()]
    try:
        np.broadcast_shapes(*used)
    except ValueError:
        shown = ", ".join(f"`{name}` {shape}" for name, shape in given.items())
        how = (
            f"; {', '.join(f'`{n}`' for n in trailing)} broadcast over the leading (batch) axes only, the others end "
            "in the diagonal's d"
            if trailing
            else ""
        )
        raise ParameterError(f"The shapes of {shown} do not broadcast together (like NumPy{how}).") from None


def _scaled_interaction(sigma0, a, v, beta, t=None, eigenvalues=False):
    """`(Σ0^{1/2}, N = βv Σ0^{1/2}(A + Aᵀ)Σ0^{1/2}, indefinite)` after the checks; with `eigenvalues`, `N`'s eigenvalues
    (ascending, :func:`._linalg.sandwich_eigvalsh`: a derivative in `Σ0` that is finite at a singular `Σ0`) in place
    of `N`."""
    _check_square(sigma0, "Sigma0")
    _check_square(a, "A")
    if jnp.shape(a)[-1] != jnp.shape(sigma0)[-1]:
        raise ParameterError(
            f"`A` must have the size of `Sigma0`, d = {jnp.shape(sigma0)[-1]}; got shape {jnp.shape(a)}."
        )
    # the batch axes: Sigma0's and A's before their (d, d), v, beta (and t) whole (a fresh user: JAX's raw matmul
    # ValueError and "mul got incompatible shapes" TypeError before)
    batch = {"Sigma0": np.shape(sigma0)[:-2], "A": np.shape(a)[:-2], "v": np.shape(v), "beta": np.shape(beta)}
    if t is not None:
        batch["t"] = np.shape(t)
    try:
        np.broadcast_shapes(*batch.values())
    except ValueError:
        shown = ", ".join(f"`{name}` {shape}" for name, shape in batch.items())
        raise ParameterError(
            f"The batch shapes of {shown} do not broadcast together (like NumPy; the batch shape of `Sigma0` and `A` "
            "is the shape before their (d, d), that of `v`, `beta` and `t` their whole shape)."
        ) from None
    d = jnp.shape(sigma0)[-1]
    if np.shape(v) == (d, d) and not batch["Sigma0"] and not batch["A"]:
        # a fresh user: blowup_time_closed_form(I/2, I, 2I) gave [[0.5, inf], [inf, 0.5]], a (d, d) batch of scalars,
        # without a word; a review: a (d, d) grid of numbers is a legitimate batch, so a warning, not a refusal
        import warnings

        from .._warn import user_stacklevel

        warnings.warn(
            f"`v` has shape {np.shape(v)}, that of a (d, d) matrix beside an unbatched `Sigma0` and `A`: it is read as "
            "a (d, d) batch of numbers, each the `v` of `V = v I`. For a matrix `V` solve the moment ODE "
            "(hassejax.dynamics.solve_gaussian).",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    _check_values(sigma0, a, v, beta)
    r, w_min = psd_sqrt(sigma0, with_min=True)
    s = a + jnp.swapaxes(a, -1, -2)
    # a traced Σ0 that is no covariance: NaN (its PSD part's answer, a confident one for another Σ0, before)
    indefinite = below_psd(symmetrize(sigma0), jax.lax.stop_gradient(w_min))
    if eigenvalues:  # the same `N` and ``eigh``; the derivative without that of Σ0^{1/2} (NaN at a singular Σ0 before)
        scale = jnp.asarray(beta) * jnp.asarray(v)
        dtype = jnp.result_type(r, s, scale)  # N's, as below (an int `A` or `v` has no tangent to take)
        # `Σ0` in N's float dtype: an int `Σ0` has a float0 tangent, which the rule cannot symmetrize (a review)
        return r, sandwich_eigvalsh(sigma0.astype(dtype), s.astype(dtype), scale.astype(dtype)), indefinite
    v = jnp.asarray(v)[..., None, None]
    beta = jnp.asarray(beta)[..., None, None]
    return r, symmetrize(beta * v * (r @ s @ r)), indefinite


def softmax_covariance_closed_form(
    Sigma0: Matrices, A: Matrices, v: Scalars, t: Scalars, beta: Scalars = 1.0
) -> Float[Array, "*#batch d d"]:
    """`Σ(t)` for softmax attention with `V = vI` (spec §3; derived, singular-safe form).

    **Arguments:** `Sigma0` `(…, d, d)` symmetric PSD (may be singular); `A` `(…, d, d)`;
    `v` scalar(s); `t` time(s) `>= 0`; `beta` inverse temperature(s).

    **Returns:** `Σ(t)`, `(…, d, d)`. For `t >= t*` (past the blow-up, where no solution
    exists) every entry is `+inf`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for non-square or mismatched shapes, NaN/inf entries,
    a `Sigma0` that is not symmetric positive semidefinite or a `t < 0` (concrete inputs; traced non-finite
    inputs or `t < 0` give NaN, a traced `Sigma0` is taken as its symmetric part, and gives NaN where that is no covariance).

    Source: (derived) spec dynamics.md §3, bullet "Softmax, `V = vI`" (`(Σ⁻¹)' = −βv(A + Aᵀ)` and its singular-safe
    form), for the softmax dynamics of Castin, Ablin, Carrillo, Peyré, arXiv:2501.18322.

    **Example:** `Σ0 = I/2`, `A = I`, `v = 1` blows up at `t* = 1`; at `t = 1/2`, `Σ = I`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import softmax_covariance_closed_form
    >>> jnp.round(softmax_covariance_closed_form(jnp.eye(2) / 2, jnp.eye(2), 1.0, 0.5), 6).tolist()
    [[1.0, 0.0], [0.0, 1.0]]

    ```
    """
    sigma0 = jnp.asarray(Sigma0)
    _check_concrete({"t": t}, nonnegative=("t",))
    r, n, indefinite = _scaled_interaction(sigma0, jnp.asarray(A), v, beta, t)
    t = jnp.asarray(t)[..., None, None]
    d = sigma0.shape[-1]
    eye = jnp.eye(d, dtype=n.dtype)
    out = r @ jnp.linalg.solve(eye - t * n, r)
    lam = jnp.linalg.eigvalsh(n)[..., -1]
    alive = (lam[..., None, None] * t) < 1.0
    # traced non-finite inputs or t < 0: NaN, not "past t*" (an inf anywhere makes `lam` or `t` non-finite)
    nan = ~jnp.isfinite(lam)[..., None, None] | ~jnp.isfinite(t) | (t < 0) | ~jnp.all(jnp.isfinite(sigma0))
    nan = nan | indefinite[..., None, None]
    return jnp.where(nan, jnp.nan, jnp.where(alive, symmetrize(out), jnp.inf))


def blowup_time_closed_form(Sigma0: Matrices, A: Matrices, v: Scalars, beta: Scalars = 1.0) -> Float[Array, "*#batch"]:
    """Blow-up time `t* = 1/λ*`, `λ* = λ_max(βv Σ0^{1/2}(A + Aᵀ)Σ0^{1/2})`, `inf` when `λ* <= 0` (spec §3).

    For `β > 0` this is the spec's `1/(β λ_max(vΣ0^{1/2}(A + Aᵀ)Σ0^{1/2}))`; singular `Σ0` allowed.
    A `λ*` within rounding of zero (at most `4 ε` times the largest `|eigenvalue|` of that matrix,
    `ε` of its dtype) counts as `λ* <= 0`: its sign is not resolved in the input's precision (e.g.
    `A + Aᵀ ⪯ 0` singular, where `λ* = 0` exactly and the computed one is `±1e-17`, or `±0.2 ε`
    of the largest), and `1/λ*` would be a finite time made of rounding. A resolved `λ*` beside a
    much larger stable direction keeps its time (float32, `A = diag(−10^6, 1)`: `t* = 1`).

    At a singular `Σ0` with `λ* = 0` (no blow-up) the time is ill-conditioned: a positive semidefinite change of
    `Σ0` of its rounding size, `ε ‖Σ0‖`, along a direction where `A + Aᵀ` is positive gives `λ*` of order
    `ε ‖Σ0‖ λ_max(βv(A + Aᵀ))`, and a `Σ0` computed in floating point (`u uᵀ`, rank one) is known only to that size.
    Such a `Σ0` often gets a finite `t*` of order `1/(ε ‖Σ0‖ λ_max(βv(A + Aᵀ)))` (float64, rank-one `Σ0 = u uᵀ`
    from Gaussian `u` in `d = 6`, `A + Aᵀ` negative on `u` with eigenvalues up to 100 elsewhere: 189 of 200 draws
    gave `t*` between 3e12 and 2e15 where the rank-one answer is `inf`): times of that order are not resolved from
    `inf`. A `Σ0` whose zero eigenvalues are exact (a diagonal one) keeps the answer of the given input (`inf`).

    Derivatives: ``jax.grad`` in `Sigma0` takes no derivative of `Σ0^{1/2}` (:func:`._linalg.sandwich_eigvalsh`), so
    it is finite at a singular `Sigma0` where `λ*` is a simple eigenvalue; where `λ*` is repeated the eigenvalue has
    no derivative and the one returned is that of ``eigh``'s basis. Second derivatives in `Sigma0` are NaN at a
    singular `Sigma0`, at a `Sigma0` with a repeated eigenvalue (`s I` included) and at a repeated eigenvalue of `N`:
    the first derivative's own rule goes through `Σ0^{1/2}` and ``eigh``'s eigenvectors.

    **Raises:** :class:`~hassejax.errors.ParameterError` for non-square or mismatched shapes,
    NaN/inf entries, or a `Sigma0` that is not symmetric positive semidefinite (concrete inputs; a traced NaN
    or inf gives NaN, a traced `Sigma0` is taken as its symmetric part, and gives NaN where that is no covariance).

    Source: (derived) spec dynamics.md §3, bullet "Softmax, `V = vI`" (finite-time blow-up iff `λ* > 0`, at
    `t* = 1/λ*` with `β` inside `λ*`), for the softmax dynamics of Castin, Ablin, Carrillo, Peyré, arXiv:2501.18322; the rounding
    floor on `λ*` is this package's.

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import blowup_time_closed_form
    >>> round(float(blowup_time_closed_form(jnp.eye(2) / 2, jnp.eye(2), 1.0)), 6)
    1.0

    ```
    """
    _, eigs, indefinite = _scaled_interaction(jnp.asarray(Sigma0), jnp.asarray(A), v, beta, eigenvalues=True)
    lam = eigs[..., -1]
    floor = 4 * jnp.finfo(eigs.dtype).eps * jnp.max(jnp.abs(eigs), axis=-1)
    resolved = lam > floor
    out = jnp.where(resolved, 1.0 / jnp.where(resolved, lam, 1.0), jnp.inf)
    # a traced NaN/inf input or a traced Σ0 that is no covariance: NaN, not "never blows up" or a time; times NaN,
    # not `where`, so that its derivative is NaN too (a review: `where` gave it a derivative of 0)
    return out * jnp.where(~jnp.isfinite(lam) | indefinite, jnp.nan, 1.0).astype(out.dtype)


def diagonal_covariance_closed_form(
    sigma0: Diagonals, a: Diagonals, v: Diagonals, t: Scalars, beta: Scalars = 1.0
) -> Float[Array, "*#batch d"]:
    """Commuting case (`V`, `A`, `Σ0` diagonal): `σ_i(t) = σ_i0/(1 − 2βv_ia_iσ_i0 t)` (spec §3).

    **Arguments:** the diagonals `sigma0`, `a`, `v` (`(…, d)`; the order of every closed form here:
    covariance, `A`, `V`); `t`; `beta`.

    **Returns:** `(…, d)` variances; `+inf` for coordinates past their own blow-up.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that do not broadcast, NaN/inf entries or a
    negative `sigma0` or `t` (concrete inputs; traced ones give NaN there, in every coordinate for a bad `t` or
    `beta`).

    Source: (derived) spec dynamics.md §3, bullet "Commuting (V, A, Σ0 diagonal)", for the softmax dynamics of
    Castin, Ablin, Carrillo, Peyré, arXiv:2501.18322.

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import diagonal_covariance_closed_form
    >>> out = diagonal_covariance_closed_form(jnp.array([0.5, 1.0]), a=jnp.array([1.0, -1.0]), v=jnp.ones(2), t=0.25)
    >>> [round(float(z), 4) for z in out]  # 0.5/(1 − 2·0.5·0.25), 1/(1 + 2·0.25)
    [0.6667, 0.6667]

    ```
    """
    _check_concrete({"sigma0": sigma0, "a": a, "v": v, "t": t, "beta": beta}, nonnegative=("sigma0", "t"))
    _check_broadcast({"sigma0": sigma0, "a": a, "v": v, "t": t, "beta": beta}, trailing=("t", "beta"))
    sigma0, a, v = jnp.asarray(sigma0), jnp.asarray(a), jnp.asarray(v)
    t = jnp.asarray(t)[..., None]
    beta = jnp.asarray(beta)[..., None]
    den = 1.0 - 2.0 * beta * v * a * sigma0 * t
    out = jnp.where(den > 0, sigma0 / jnp.where(den > 0, den, 1.0), jnp.inf)
    bad = ~jnp.isfinite(den) | ~jnp.isfinite(sigma0) | (sigma0 < 0) | ~jnp.isfinite(t) | (t < 0)
    return jnp.where(bad, jnp.nan, out)  # traced invalid inputs: NaN


def diagonal_blowup_time(sigma0: Diagonals, a: Diagonals, v: Diagonals, beta: Scalars = 1.0) -> Float[Array, "*#batch"]:
    """`min_i 1/(2βv_ia_iσ_i0)` over the coordinates with `βv_ia_iσ_i0 > 0`; `inf` if none (spec §3).

    **Arguments:** the diagonals `sigma0`, `a`, `v` (`(…, d)`); `beta`.

    **Returns:** `(…)` the first blow-up time.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that do not broadcast, NaN/inf entries or a
    negative `sigma0` (concrete inputs; traced ones give NaN).

    Source: (derived) spec dynamics.md §3, bullet "Commuting (V, A, Σ0 diagonal)" (blow-up at `min 1/(2βv_ia_iσ_i0)`
    over `v_ia_i > 0`), for the softmax dynamics of Castin, Ablin, Carrillo, Peyré, arXiv:2501.18322.

    **Example:**

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import diagonal_blowup_time
    >>> float(diagonal_blowup_time(jnp.array([0.5, 1.0]), a=jnp.array([1.0, -1.0]), v=jnp.ones(2)))
    1.0

    ```
    """
    _check_concrete({"sigma0": sigma0, "a": a, "v": v, "beta": beta}, nonnegative=("sigma0",))
    _check_broadcast({"sigma0": sigma0, "a": a, "v": v, "beta": beta}, trailing=("beta",))
    sigma0, a, v = jnp.asarray(sigma0), jnp.asarray(a), jnp.asarray(v)
    rate = 2.0 * jnp.asarray(beta)[..., None] * v * a * sigma0
    times = jnp.where(rate > 0, 1.0 / jnp.where(rate > 0, rate, 1.0), jnp.inf)
    # a traced NaN/inf input or a negative variance: NaN (the minimum keeps it), not another coordinate's time or 0
    bad = ~jnp.isfinite(rate) | ~jnp.isfinite(sigma0) | (sigma0 < 0)
    return jnp.min(jnp.where(bad, jnp.nan, times), axis=-1)


def softmax_1d_closed_form(
    alpha0: Scalars, sigma0: Scalars, a: Scalars, v: Scalars, t: Scalars, beta: Scalars = 1.0
) -> tuple[Float[Array, "*#batch"], Float[Array, "*#batch"]]:
    """Softmax in `d = 1`: `σ(t) = σ0/(1 − 2βvaσ0 t)`, `α(t) = α0 e^{vt}(σ(t)/σ0)^{1/2}` (spec §3).

    **Returns:** `(α(t), σ(t))`; both `+inf` (α: `±inf`, or 0 when `α0 = 0`) past the blow-up.
    For `σ0 = 0`: `σ = 0`, `α = α0 e^{vt}`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that do not broadcast, a non-finite input or
    a negative `sigma0` or `t` (concrete inputs; traced ones give NaN).

    Source: (derived) spec dynamics.md §3, bullet "Softmax d = 1", for the softmax dynamics of Castin, Ablin,
    Carrillo, Peyré, arXiv:2501.18322.

    **Example:** `σ0 = 1/2`, `a = v = 1`: `t* = 1`, `σ(1/2) = 1`:

    ```python
    >>> from hassejax.dynamics import softmax_1d_closed_form
    >>> [round(float(z), 6) for z in softmax_1d_closed_form(0.0, 0.5, 1.0, 1.0, 0.5)]
    [0.0, 1.0]

    ```
    """
    _check_concrete(
        {"alpha0": alpha0, "sigma0": sigma0, "a": a, "v": v, "t": t, "beta": beta}, nonnegative=("sigma0", "t")
    )
    _check_broadcast({"alpha0": alpha0, "sigma0": sigma0, "a": a, "v": v, "t": t, "beta": beta})
    alpha0, sigma0, a, v, t, beta = (jnp.asarray(z) for z in (alpha0, sigma0, a, v, t, beta))
    den = 1.0 - 2.0 * beta * v * a * sigma0 * t
    alive = den > 0
    safe = jnp.where(alive, den, 1.0)
    sigma = jnp.where(alive, sigma0 / safe, jnp.inf)
    # past the blow-up ±inf, or 0 when α0 = 0 (sign(0)·inf would be NaN)
    alpha = jnp.where(
        alive, alpha0 * jnp.exp(v * t) / jnp.sqrt(safe), jnp.where(alpha0 == 0, 0.0, jnp.sign(alpha0) * jnp.inf)
    )
    bad = ~jnp.isfinite(den) | ~jnp.isfinite(alpha0) | ~jnp.isfinite(v * t) | (sigma0 < 0) | (t < 0)
    bad = bad | ~jnp.isfinite(sigma0) | ~jnp.isfinite(t)  # traced invalid inputs: NaN
    return jnp.where(bad, jnp.nan, alpha), jnp.where(bad, jnp.nan, sigma)


def clustering_limit(
    Sigma0: Matrices, A: Matrices, v: Scalars = 1.0, beta: Scalars = 1.0, rtol: float = 1e-10
) -> Float[Array, "*#batch d d"]:
    """`Σ∞ = lim_{t→∞} Σ(t)` for softmax, `V = vI`, when `βv(A + Aᵀ) ⪯ 0` (spec §3).

    Computed in the singular-safe form `Σ∞ = Σ0^{1/2} P Σ0^{1/2}`, `P` the orthogonal
    projector onto `ker(Σ0^{1/2}(A + Aᵀ)Σ0^{1/2})` (derived: `(I + tN)⁻¹ → P` for `N ⪰ 0`);
    for `Σ0 ≻ 0` this equals the spec's `U(UᵀΣ0⁻¹U)⁻¹Uᵀ`, `U` an orthonormal basis of
    `ker(A + Aᵀ)`, so `rank Σ∞ = dim ker(A + Aᵀ)`.

    **Arguments:** `Sigma0` PSD; `A`; `v`; `beta`; `rtol`: eigenvalues of `N` with
    `|λ| <= rtol · max|λ|` count as zero.

    **Returns:** `Σ∞`, `(…, d, d)`.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes, or (concrete inputs) when
    `βv(A + Aᵀ)` has an eigenvalue above `rtol` times its scale (no limit: possible blow-up) or `Sigma0` is not
    symmetric PSD (a traced `Sigma0` that is no covariance gives NaN).

    Source: (derived) spec dynamics.md §3, bullet "Softmax, `V = vI`" (`Σ∞ = U(UᵀΣ0⁻¹U)⁻¹Uᵀ` when `A + Aᵀ ⪯ 0`), for
    the softmax dynamics of Castin, Ablin, Carrillo, Peyré, arXiv:2501.18322; the projector form is this package's
    (see above).

    **Example:** `A = diag(−1, 0)`: the covariance collapses onto `ker(A + Aᵀ) = span(e₂)`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import clustering_limit
    >>> jnp.round(clustering_limit(jnp.eye(2), jnp.diag(jnp.array([-1.0, 0.0]))), 6).tolist()
    [[0.0, 0.0], [0.0, 1.0]]

    ```
    """
    sigma0 = jnp.asarray(Sigma0)
    a = jnp.asarray(A)
    r, n, indefinite = _scaled_interaction(sigma0, a, v, beta)
    s = symmetrize(jnp.asarray(beta)[..., None, None] * jnp.asarray(v)[..., None, None] * (a + jnp.swapaxes(a, -1, -2)))
    bad = False
    if not is_traced(s):  # value check on concrete inputs only
        lam_s = jnp.linalg.eigvalsh(s)
        bad = bool(jnp.any(lam_s[..., -1] > rtol * jnp.maximum(jnp.max(jnp.abs(lam_s), axis=-1), 1e-300)))
    if bad:
        raise ParameterError(
            "`clustering_limit` needs βv(A + Aᵀ) ⪯ 0 (negative semidefinite); got a positive eigenvalue "
            f"{float(jnp.max(lam_s[..., -1])):.3g}: the covariance may blow up (use blowup_time_closed_form)."
        )
    w, q = jnp.linalg.eigh(n)
    scale = jnp.max(jnp.abs(w), axis=-1, keepdims=True)
    zero = jnp.abs(w) <= rtol * jnp.where(scale > 0, scale, 1.0)
    proj = (q * zero[..., None, :]) @ jnp.swapaxes(q, -1, -2)
    return jnp.where(indefinite[..., None, None], jnp.nan, symmetrize(r @ proj @ r))  # a traced Σ0 no covariance
