"""Tsit5 with its stages written out: diffrax's method, without the stage loop (private).

``diffrax.Tsit5`` runs its seven stages in a ``while_loop`` that writes each stage into a
``(7, *y.shape)`` buffer and forms every stage's increment as a dot of the padded tableau row
with the whole buffer. Under ``vmap`` over a sweep's members that buffer is ``7 × B × d × r``
numbers, read in full by every stage and copied through the loop: at `B = 200`, `d = 32` a
step spent about 16 ms on this bookkeeping against about 10 ms on the right-hand side.

:class:`UnrolledTsit5` is the same method (diffrax's Tsitouras 2011 tableau, its FSAL
first stage, its error estimate and dense output :class:`diffrax.Tsit5`'s interpolation,
which it inherits) with the stage increments written as explicit sums of the stages
they use, so XLA fuses them. Its steps equal ``diffrax.Tsit5``'s to rounding (the sums are
taken in a different order; tested to 1e-12 relative over a solve). (derived)
"""

from __future__ import annotations

import diffrax
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
from diffrax._solver.tsit5 import _tsit5_tableau

__all__ = ["UnrolledTsit5"]

_A = tuple(tuple(float(a) for a in row) for row in _tsit5_tableau.a_lower)
_C = tuple(float(c) for c in _tsit5_tableau.c)
_B_ERROR = tuple(float(b) for b in _tsit5_tableau.b_error)


def _combine(coeffs, fs):
    """`Σ_j coeffs[j] fs[j]` leaf by leaf (zero coefficients skipped)."""

    def leaf(*xs):
        terms = [c * x for c, x in zip(coeffs, xs) if c != 0.0]
        acc = terms[0]
        for term in terms[1:]:
            acc = acc + term
        return acc

    return jtu.tree_map(leaf, *fs)


class UnrolledTsit5(diffrax.Tsit5):
    """``diffrax.Tsit5`` with the stage loop unrolled (see the module docstring); for ODE terms.

    Any other term (an SDE, a multi-term) goes through ``diffrax.Tsit5.step`` unchanged.
    """

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        vf_expensive, fsal = self._common(terms, t0, t1, y0, args)
        if vf_expensive or not fsal or solver_state is None:
            return super().step(terms, t0, t1, y0, args, solver_state, made_jump)
        first_step, f0 = solver_state
        dt = t1 - t0
        control = terms.contr(t0, t1)

        def vf(t, y):
            return terms.vf(t, y, args)

        # FSAL: the first stage is the last stage of the previous step, except on the first
        # step or after a jump (for every member at once under vmap, as diffrax does).
        recompute = eqxi.unvmap_any(first_step | made_jump)
        f0 = jax.lax.cond(recompute, lambda: vf(t0, y0), lambda: f0)
        # Each stage times dt first, as diffrax does (k = f·dt), then the tableau's sums: the
        # coefficients reach ~13, so summing the stages before the dt overflowed 13× earlier
        # (a float32 state near 1e37 became inf one step before its range ends).
        fs = [f0]
        ks = [terms.prod(f0, control)]
        for a_row, c in zip(_A, _C):
            y_stage = jtu.tree_map(lambda y, inc: y + inc, y0, _combine(a_row, ks))
            t_stage = t1 if c == 1.0 else t0 + c * dt
            fs.append(vf(t_stage, y_stage))
            ks.append(terms.prod(fs[-1], control))
        y1 = y_stage  # the last stage's state is the solution (Tsit5 is FSAL and "SSAL")
        y_error = _combine(_B_ERROR, ks)
        ks = jtu.tree_map(lambda *xs: jnp.stack(xs), *ks)
        dense_info = dict(y0=y0, y1=y1, k=ks)
        return y1, y_error, dense_info, (jnp.asarray(False), fs[-1]), diffrax.RESULTS.successful
