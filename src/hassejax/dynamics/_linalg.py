"""Small symmetric-matrix functions used by the dynamics (private).

- :func:`psd_sqrt`: symmetric square root of a PSD matrix via ``eigh`` (eigenvalues clipped
  at zero, so singular and slightly indefinite round-off inputs are fine); the one PSD
  square root of the dynamics (solvers, closed forms, energies).
- :func:`sandwich_eigvalsh`: the eigenvalues of `c Σ^{1/2} S Σ^{1/2}` with a derivative in `Σ` that needs none of
  `Σ^{1/2}` (finite at a singular `Σ`, where the square root has none).
- :func:`check_psd` with :data:`PSD_RTOL`: the one covariance check (symmetric and PSD up to
  round-off) of the solvers and the closed forms; :func:`refuse_indefinite` its PSD rule alone, for the functions
  that take a covariance as it comes (energies, Gaussian maps).
- :func:`sym_funm`: `f(Y)` for symmetric `Y` via ``eigh``, with a forward-mode derivative
  from the Daleckii–Krein formula that stays finite at repeated eigenvalues (``eigh``'s own
  JVP divides by eigenvalue gaps and returns inf/NaN there).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._tracing import is_traced
from ..errors import ParameterError

PSD_RTOL = 1e-8
"""Asymmetry and negative eigenvalues up to `PSD_RTOL · max|C|` count as round-off in a covariance `C` (for a
`C` given in a lower precision, up to `10 d ε` of its dtype if that is larger: a rank-one float32 `uuᵀ` has
eigenvalues down to `−d ε max|C|`)."""


def symmetrize(x):
    """`(X + Xᵀ)/2` over the last two axes."""
    return 0.5 * (x + jnp.swapaxes(x, -1, -2))


def psd_sqrt(sigma, with_min: bool = False):
    """Symmetric PSD square root `Σ^{1/2}` (eigenvalues below zero are clipped to zero); with `with_min`, also
    the smallest eigenvalue of `Σ` before clipping, from the same ``eigh``.

    Its derivative is the Daleckii–Krein form of the square root, `dΣ^{1/2} = Q (F ∘ (Qᵀ dΣ Q)) Qᵀ` with
    `F_ij = 1/(√λ_i + √λ_j)`, finite at repeated eigenvalues (``eigh``'s own derivative divides by their gaps: the
    derivative of a solve from `cov0 = s I` was NaN); infinite (NaN downstream) at any zero eigenvalue `λ_i`, through
    `F_ii`: the square root moves like `√ε` along `Σ + ε e_i e_iᵀ` and has no derivative there. A function of
    `Σ^{1/2}` that is smooth in `Σ` itself (a blow-up time) needs a derivative that avoids it
    (:func:`sandwich_eigvalsh`).
    """
    root, w_min = _psd_sqrt(sigma)
    return (root, w_min) if with_min else root


@jax.custom_jvp
def _psd_sqrt(sigma):
    w, q = jnp.linalg.eigh(symmetrize(sigma))
    root = (q * jnp.sqrt(jnp.clip(w, 0.0, None))[..., None, :]) @ jnp.swapaxes(q, -1, -2)
    return root, w[..., 0]


@_psd_sqrt.defjvp
def _psd_sqrt_jvp(primals, tangents):
    (sigma,), (dsigma,) = primals, tangents
    w, q = jnp.linalg.eigh(symmetrize(sigma))
    r = jnp.sqrt(jnp.clip(w, 0.0, None))
    qt = jnp.swapaxes(q, -1, -2)
    root = (q * r[..., None, :]) @ qt
    inner = qt @ symmetrize(dsigma) @ q
    droot = q @ (inner / (r[..., :, None] + r[..., None, :])) @ qt  # the divided difference of √ at (λ_i, λ_j)
    return (root, w[..., 0]), (droot, inner[..., 0, 0])


@jax.custom_jvp
def sandwich_eigvalsh(sigma, s, scale):
    """Eigenvalues, ascending, of `N = c Σ^{1/2} S Σ^{1/2}` (`c` = `scale` `(...)`, `S` = `s` symmetric
    `(..., d, d)`, `Σ` = `sigma` PSD), computed as ``eigvalsh(symmetrize(c * (R @ S @ R)))`` with `R` from
    :func:`psd_sqrt`.

    Derivative (derived): with `N u = μ u`, `|u| = 1`, `μ ≠ 0`, `u = R w / μ` for `w = c S R u`, so
    `dμ = wᵀ dΣ w / μ + (Ru)ᵀ d(cS) (Ru)`; it needs no derivative of `R`, which is infinite at a zero eigenvalue of
    `Σ` (a rank-one `Σ0`, whose blow-up time `1/λ_max(N)` is smooth in `Σ0`). The derivative of a `μ = 0`
    (a direction of `ker Σ`) is given as 0: no derivative exists there in general (`λ_max(N)` of `S = diag(−1, 1)`,
    `Σ = diag(1, ε)` is `max(0, ε)`)."""
    return _sandwich_eigvalsh(sigma, s, scale)[0]


def _sandwich_eigvalsh(sigma, s, scale):
    r = psd_sqrt(sigma)
    n = symmetrize(jnp.asarray(scale)[..., None, None] * (r @ s @ r))
    mu, u = jnp.linalg.eigh(n)
    return mu, u, r


@sandwich_eigvalsh.defjvp
def _sandwich_eigvalsh_jvp(primals, tangents):
    sigma, s, scale = primals
    dsigma, ds, dscale = tangents
    mu, u, r = _sandwich_eigvalsh(sigma, s, scale)
    c = jnp.asarray(scale)[..., None, None]
    ru = r @ u  # columns R u_i
    w = c * (s @ ru)  # columns w_i = c S R u_i
    nonzero = mu != 0
    d_sigma = jnp.einsum("...ji,...jk,...ki->...i", w, symmetrize(dsigma), w) / jnp.where(nonzero, mu, 1.0)
    d_cs = jnp.asarray(dscale)[..., None, None] * s + c * ds
    d_s = jnp.einsum("...ji,...jk,...ki->...i", ru, symmetrize(d_cs), ru)
    return mu, jnp.where(nonzero, d_sigma, 0.0) + d_s


def _eps(dtype) -> float:
    """Machine epsilon of a floating `dtype` (bfloat16 included), 0 for any other dtype or None."""
    return float(jnp.finfo(dtype).eps) if dtype is not None and jnp.issubdtype(dtype, jnp.floating) else 0.0


PSD_RTOL_MAX = 1e-2
"""The largest round-off the PSD rule allows, relative to the largest entry: `10 d ε` of a half-precision type
reaches 1 (bfloat16 at d = 13, a review: `−I` passed), and a smallest eigenvalue below `−1 %` of the largest entry
is no rounding this package takes."""


def _psd_rtol(d: int, eps: float) -> float:
    """The PSD rule's tolerance: `max(PSD_RTOL, 10 d ε)`, at most :data:`PSD_RTOL_MAX`."""
    return min(max(PSD_RTOL, 10 * d * eps), PSD_RTOL_MAX)


def below_psd(cov, w_min, given=None):
    """Whether a (traced) `cov` `(..., d, d)`, whose smallest eigenvalue is `w_min`, is no covariance by the rule
    of :func:`check_psd`: `w_min` below `−min(max(PSD_RTOL, 10 d ε), PSD_RTOL_MAX) · max|C|` (``ε`` of its dtype, or
    of `given`, the dtype the caller was given it in, where that is coarser: a float32 `Σ0` cast to float64 keeps
    float32's round-off, a review: a valid float32 rank-one `Σ0` with a float64 mean came back `indefinite` in 18 of
    60 draws)."""
    cov = jnp.asarray(cov)
    rtol = _psd_rtol(cov.shape[-1], max(_eps(cov.dtype), _eps(given)))
    return w_min < -rtol * jnp.max(jnp.abs(cov), axis=(-2, -1))


def check_psd(cov, name: str) -> None:
    """Raise :class:`ParameterError` naming `name` unless the concrete `cov` `(..., d, d)` is finite,
    symmetric and positive semidefinite up to :data:`PSD_RTOL` (relative to its largest entry)."""
    given = np.asarray(cov)
    c = given.astype(float)
    if not np.all(np.isfinite(c)):
        raise ParameterError(f"`{name}` must be finite; got NaN/inf entries.")
    if c.ndim < 2 or c.size == 0:
        return
    # member by member (a batch): each against its own largest entry (a review: a large member let an indefinite
    # one through as NaN)
    scale = np.maximum(np.max(np.abs(c), axis=(-2, -1)), np.finfo(float).tiny)
    asym = np.max(np.abs(c - np.swapaxes(c, -1, -2)), axis=(-2, -1))
    if np.any(asym > PSD_RTOL * scale):
        worst = float(np.max(np.where(asym > PSD_RTOL * scale, asym, 0.0)))
        raise ParameterError(f"`{name}` must be symmetric (a covariance); got max |C − Cᵀ| = {worst:.3g}.")
    _check_psd_part(given, c, scale, name)


def refuse_indefinite(cov, name: str) -> None:
    """Raise :class:`ParameterError` naming `name` where the concrete, finite `cov` `(..., d, d)` has a symmetric part
    that is no covariance by the rule of :func:`check_psd` (the same message). A traced `cov` passes (mark it with
    :func:`below_psd` in the program), and so does one with NaN/inf entries (a state past a blow-up, computed
    through); an asymmetric one is taken as its symmetric part."""
    if cov is None or is_traced(cov):
        return
    given = np.asarray(cov)
    c = given.astype(float)
    if c.ndim < 2 or c.size == 0:
        return
    # member by member (a batch): each against its own largest entry, a member with NaN/inf entries skipped (a
    # review: one large or non-finite member had let an indefinite one through as NaN)
    members = c.reshape((-1, *c.shape[-2:]))
    finite = np.all(np.isfinite(members), axis=(-2, -1))
    if not finite.any():
        return
    members = members[finite]
    scale = np.maximum(np.max(np.abs(members), axis=(-2, -1)), np.finfo(float).tiny)
    _check_psd_part(given, members, scale, name)


def _check_psd_part(given, c, scale, name: str) -> None:
    rtol = _psd_rtol(c.shape[-1], _eps(given.dtype))  # rounding of the given precision (bfloat16 included)
    lam = np.linalg.eigvalsh(0.5 * (c + np.swapaxes(c, -1, -2)))[..., 0]
    bad = lam < -rtol * scale
    if np.any(bad):
        lam_min = float(np.min(np.where(bad, lam, np.inf)))
        raise ParameterError(
            f"`{name}` must be positive semidefinite (a covariance); got smallest eigenvalue {lam_min:.3g}."
        )


@partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def sym_funm(y, f: Callable, fprime: Callable):
    """`f(Y) = Q f(Λ) Qᵀ` for symmetric `Y = QΛQᵀ` (`f`, `fprime` elementwise, jnp-traceable)."""
    w, q = jnp.linalg.eigh(symmetrize(y))
    return (q * f(w)[..., None, :]) @ jnp.swapaxes(q, -1, -2)


@sym_funm.defjvp
def _sym_funm_jvp(f, fprime, primals, tangents):
    (y,) = primals
    (dy,) = tangents
    w, q = jnp.linalg.eigh(symmetrize(y))
    fw = f(w)
    out = (q * fw[..., None, :]) @ jnp.swapaxes(q, -1, -2)
    # Daleckii–Krein: d f(Y)[dY] = Q (F ∘ (Qᵀ dY Q)) Qᵀ, F_ij the divided difference of f at
    # (λ_i, λ_j), f'((λ_i + λ_j)/2) when the gap is below sqrt(eps) times the scale.
    wi = w[..., :, None]
    wj = w[..., None, :]
    gap = wi - wj
    scale = 1.0 + jnp.max(jnp.abs(w), axis=-1, keepdims=True)[..., None]
    close = jnp.abs(gap) <= jnp.sqrt(jnp.finfo(w.dtype).eps) * scale
    safe_gap = jnp.where(close, 1.0, gap)
    divided = (fw[..., :, None] - fw[..., None, :]) / safe_gap
    F = jnp.where(close, fprime(0.5 * (wi + wj)), divided)
    qt = jnp.swapaxes(q, -1, -2)
    dout = q @ (F * (qt @ symmetrize(dy) @ q)) @ qt
    return out, dout
