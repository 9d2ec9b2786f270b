"""Argument checks and array helpers shared by the diagnostics modules (private).

The public functions validate once at the door with these checks; the helpers that start
with an underscore trust their inputs and run under ``jit``/``vmap``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..._tracing import is_traced
from ...errors import ParameterError
from ..result import GaussianSolution, ParticleSolution


def check_cov(cov, name: str = "cov"):
    """`cov` as a float array of shape `(..., d, d)`, `d >= 1`, else ParameterError."""
    shape = tuple(getattr(cov, "shape", ()))
    if len(shape) < 2 or shape[-1] != shape[-2] or shape[-1] == 0:
        raise ParameterError(f"`{name}` must have shape (..., d, d) with d >= 1; got shape {shape}.")
    cov = jnp.asarray(cov)
    if not jnp.issubdtype(cov.dtype, jnp.floating):
        cov = cov.astype(float)
    return cov


def check_tokens(x, name: str = "x") -> None:
    """`x` must have shape `(..., n, d)` with `n >= 1`."""
    shape = tuple(getattr(x, "shape", ()))
    if len(shape) < 2 or shape[-2] == 0:
        raise ParameterError(f"`{name}` must have shape (..., n, d) with n >= 1 tokens; got shape {shape}.")


def check_threshold(value, name: str, allow_zero: bool = False) -> None:
    """A finite scalar `> 0` (or `>= 0`); skipped for traced values."""
    if is_traced(value):
        return
    v = np.asarray(value)
    if v.shape != () or not np.isfinite(v) or (v < 0 if allow_zero else v <= 0):
        want = "a finite number >= 0" if allow_zero else "a finite number > 0"
        raise ParameterError(f"`{name}` must be {want}; got {value!r}.")


def check_rule(rank_rule) -> None:
    if rank_rule not in ("absolute", "relative"):
        raise ParameterError(f"`rank_rule` must be 'absolute' (the paper's 0.1 rule) or 'relative'; got {rank_rule!r}.")


def eigvals_desc(cov):
    """Eigenvalues of the symmetrised `cov`, decreasing."""
    cov = 0.5 * (cov + jnp.swapaxes(cov, -1, -2))
    return jnp.flip(jnp.linalg.eigvalsh(cov), axis=-1)


def rank_rel(eig, rtol):
    """Count of decreasing eigenvalues above `rtol · λ_max` (0 when `λ_max <= 0`)."""
    top = eig[..., :1]
    return jnp.sum((eig > rtol * top) & (top > 0), axis=-1).astype(jnp.int32)


def rank_abs(eig, threshold):
    """Count of eigenvalues above `threshold`."""
    return jnp.sum(eig > threshold, axis=-1).astype(jnp.int32)


def empirical_cov(x):
    """`(1/n) Σ_i (x_i − x̄)(x_i − x̄)ᵀ` over axis −2."""
    xc = x - jnp.mean(x, axis=-2, keepdims=True)
    return jnp.einsum("...ni,...nj->...ij", xc, xc) / x.shape[-2]


def _check_solution(solution) -> None:
    if not isinstance(solution, GaussianSolution | ParticleSolution):
        raise ParameterError(
            f"`solution` must be a GaussianSolution or ParticleSolution; got {type(solution).__name__}."
        )


def trajectory_cov(solution):
    """`Σ(t)` at the saved times: the covariance, or the particles' empirical covariance."""
    _check_solution(solution)
    if isinstance(solution, GaussianSolution):
        return solution.cov
    return empirical_cov(jnp.asarray(solution.xs))


def final_cov(solution):
    """`Σ` at `t_final`."""
    _check_solution(solution)
    if isinstance(solution, GaussianSolution):
        return solution.cov_final
    return empirical_cov(jnp.asarray(solution.x_final))
