"""Small symmetric-matrix functions used by the dynamics (private).

- :func:`psd_sqrt`: symmetric square root of a PSD matrix via ``eigh`` (eigenvalues clipped
  at zero, so singular and slightly indefinite round-off inputs are fine).
- :func:`sym_funm`: `f(Y)` for symmetric `Y` via ``eigh``, with a forward-mode derivative
  from the Daleckii–Krein formula that stays finite at repeated eigenvalues (``eigh``'s own
  JVP divides by eigenvalue gaps and returns inf/NaN there).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp


def symmetrize(x):
    """`(X + Xᵀ)/2` over the last two axes."""
    return 0.5 * (x + jnp.swapaxes(x, -1, -2))


def psd_sqrt(sigma):
    """Symmetric PSD square root `Σ^{1/2}` (eigenvalues below zero are clipped to zero)."""
    w, q = jnp.linalg.eigh(symmetrize(sigma))
    return (q * jnp.sqrt(jnp.clip(w, 0.0, None))[..., None, :]) @ jnp.swapaxes(q, -1, -2)


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
