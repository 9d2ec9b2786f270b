"""A subclass of a kernel with a closed-form Gaussian map that changes the kernel, and a kernel that ignores its mask.

A fresh-user review: a :class:`Softmax` subclass with its own ``velocity`` (`−x`) or ReLU weights (its own
``normalise``) kept softmax's Gaussian map, so ``solve_gaussian`` blew up at softmax's `t* = 1` (and
``gaussian_homogeneous()`` said True); under :class:`Masked` a kernel whose velocity never read its `mask` ran
unmasked. Both are refused now, before anything is solved, by the class hierarchy and the kernel's code.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.dynamics import (
    L2,
    AbstractAttention,
    Linear,
    Masked,
    MultiHead,
    Sinkhorn,
    Softmax,
    gaussian_affine,
    solve_gaussian,
    solve_particles,
    status_names,
)
from hassejax.errors import ParameterError

EYE = jnp.eye(2)


class _VelSoftmax(Softmax):
    def velocity(self, t, x, keys=None, mask=None):
        return -x


class _ReLUSoftmax(Softmax):
    def normalise(self, t, logits, mask):
        return jax.nn.relu(logits) / logits.shape[1]


class _LogitSoftmax(Softmax):
    def logits(self, t, x, y):
        return 2.0 * super().logits(t, x, y)


class _WeightsLinear(Linear):
    def weights(self, t, x, keys=None, mask=None):
        return 0.5 * super().weights(t, x, keys, mask)


class _WeightsL2(L2):
    def weights(self, t, x, keys=None, mask=None):
        return 0.5 * super().weights(t, x, keys, mask)


class _InteractionL2(L2):  # L2's map reads `interaction`, its weights Q and K: the map alone would change
    def interaction(self, t):
        return 2.0 * super().interaction(t)


class _PotentialSinkhorn(Sinkhorn):
    def _potential(self, t, keys):
        g, err, it, tol = super()._potential(t, keys)
        return 0.0 * g, err, it, tol


class _VelMultiHead(MultiHead):
    def velocity(self, t, x, keys=None, mask=None):
        return -x


def _sinkhorn():
    return Sinkhorn(V=EYE, A=EYE)


CHANGED = [
    (lambda: _VelSoftmax(V=EYE, A=EYE), "velocity", "Softmax"),
    (lambda: _ReLUSoftmax(V=EYE, A=EYE), "normalise", "Softmax"),
    (lambda: _LogitSoftmax(V=EYE, A=EYE), "logits", "Softmax"),
    (lambda: _WeightsLinear(V=EYE, A=EYE), "weights", "Linear"),
    (lambda: _WeightsL2(V=EYE, Q=EYE, K=EYE), "weights", "L2"),
    (lambda: _InteractionL2(V=EYE, Q=EYE, K=EYE), "interaction", "L2"),
    (lambda: _PotentialSinkhorn(V=EYE, A=EYE), "_potential", "Sinkhorn"),
    (lambda: _VelMultiHead([Softmax(V=EYE, A=EYE)]), "velocity", "MultiHead"),
]


@pytest.mark.parametrize(("make", "method", "owner"), CHANGED)
def test_subclass_that_changes_the_kernel_has_no_gaussian_map(make, method, owner):
    model = make()
    match = rf"`model` \({type(model).__name__}\) overrides `{method}` of {owner}, whose Gaussian map"
    with pytest.raises(ParameterError, match=match):
        model.check_gaussian()
    with pytest.raises(ParameterError, match=match):
        gaussian_affine(model, 0.0, jnp.zeros(2), EYE / 2)


@pytest.mark.parametrize("cls", [_VelSoftmax, _ReLUSoftmax])
def test_review_softmax_subclasses_are_refused_by_solve_gaussian(cls):
    """The review's two kernels: ``blow_up`` at softmax's `t* = 1.0000004` before, in every state."""
    model = cls(V=EYE, A=EYE)
    assert not model.gaussian_homogeneous()
    for state in ("factor", "covariance", "projective"):
        with pytest.raises(ParameterError, match=r"overrides `.*` of Softmax.*solve_particles"):
            solve_gaussian(model, jnp.zeros(2), EYE / 2, t1=5.0, state=state)


def test_a_head_that_changed_its_kernel_is_named():
    model = MultiHead([Softmax(V=EYE, A=EYE), _ReLUSoftmax(V=EYE, A=EYE)])
    with pytest.raises(ParameterError, match=r"`model\.heads\[1\]` \(_ReLUSoftmax\) overrides `normalise`"):
        solve_gaussian(model, jnp.zeros(2), EYE / 2, t1=1.0)


class _VelAndMap(Softmax):
    """Changes the kernel to `Γ = −x` and says what its map is (`M = −I`, `c = 0`): accepted."""

    def velocity(self, t, x, keys=None, mask=None):
        return -x

    def gaussian_affine(self, t, mean, cov, factor=None):
        return -jnp.eye(mean.shape[0], dtype=mean.dtype), jnp.zeros_like(mean)


class _SameMapDeclared(_LogitSoftmax):
    """Logits `2β yᵀAx`: softmax's map at `β → 2β`, declared by re-using softmax's map on a doubled `β`."""

    gaussian_affine = Softmax.gaussian_affine

    def bilinear_map(self, t, moment):
        return 2.0 * super().bilinear_map(t, moment)


class _Renamed(Softmax):
    """A subclass that changes nothing of the kernel (a method of its own only): keeps softmax's map."""

    def describe(self):
        return "softmax"


def test_subclass_that_also_gives_its_map_is_accepted():
    sol = solve_gaussian(_VelAndMap(V=EYE, A=EYE), jnp.zeros(2), EYE, t1=1.0, rtol=1e-8, atol=1e-10)
    assert status_names(sol.status) == "completed"
    np.testing.assert_allclose(np.asarray(sol.cov_final), np.exp(-2.0) * np.eye(2), rtol=1e-6)
    # the map declared through the class attribute: softmax's map of the doubled logits, blow-up at t* = 1/2
    sol = solve_gaussian(_SameMapDeclared(V=EYE, A=EYE), jnp.zeros(2), EYE / 2, t1=5.0, rtol=1e-8, atol=1e-8)
    assert status_names(sol.status) == "blow_up"
    assert float(sol.t_blowup) == pytest.approx(0.5, rel=1e-5)
    assert _Renamed(V=EYE, A=EYE).gaussian_homogeneous()
    _Renamed(V=EYE, A=EYE).check_gaussian()
    for model in (Softmax(V=EYE, A=EYE), L2(V=EYE, Q=EYE, K=EYE), Linear(V=EYE, A=EYE), _sinkhorn()):
        model.check_gaussian()  # the built-in kernels keep their maps


def test_changed_kernel_still_solves_as_particles():
    x = solve_particles(_VelSoftmax(V=EYE, A=EYE), jnp.array([[1.0, 0.0], [0.0, 2.0]]), t1=1.0, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(np.asarray(x.x_final), np.exp(-1.0) * np.array([[1.0, 0.0], [0.0, 2.0]]), rtol=1e-6)


# ----------------------------------------------------------------------------- a kernel that ignores its mask
class _IgnoresMask(AbstractAttention):
    V: jax.Array

    @property
    def d(self):
        return self.V.shape[-1]

    def velocity(self, t, x, keys=None, mask=None):
        y = x if keys is None else keys
        return jnp.broadcast_to(jnp.mean(y, axis=0) @ self.V.T, x.shape)


class _WeightsIgnoreMask(AbstractAttention):
    V: jax.Array

    @property
    def d(self):
        return self.V.shape[-1]

    def weights(self, t, x, keys=None, mask=None):
        y = x if keys is None else keys
        return jnp.full((x.shape[0], y.shape[0]), 1.0 / y.shape[0], x.dtype)

    def value(self, t):
        return self.V


class _NormaliseIgnoresMask(Softmax):
    def normalise(self, t, logits, mask):
        return jax.nn.softmax(logits, axis=-1)


class _SuperWithoutMask(Softmax):
    def velocity(self, t, x, keys=None, mask=None):
        return super().velocity(t, x, keys)


class _ReadsMask(_IgnoresMask):
    def velocity(self, t, x, keys=None, mask=None):
        y = x if keys is None else keys
        w = jnp.ones((x.shape[0], y.shape[0]), x.dtype) if mask is None else mask.astype(x.dtype)
        return (w @ y) / jnp.maximum(w.sum(axis=1, keepdims=True), 1.0) @ self.V.T


class _MaskInClosure(_IgnoresMask):
    def velocity(self, t, x, keys=None, mask=None):
        def apply(w):
            return w if mask is None else jnp.where(mask, w, 0.0)

        y = x if keys is None else keys
        w = apply(jnp.ones((x.shape[0], y.shape[0]), x.dtype))
        return (w @ y) / jnp.maximum(w.sum(axis=1, keepdims=True), 1.0) @ self.V.T


class _Local(_IgnoresMask):
    """`Γ(x_i) = V x_i`: no coupling of the tokens, so no mask changes it; it reads neither `keys` nor `mask`."""

    def velocity(self, t, x, keys=None, mask=None):
        return x @ self.V.T


class _Forwards(_IgnoresMask):
    def velocity(self, *args, **kwargs):  # the mask's use cannot be told: not judged
        return _ReadsMask.velocity(self, *args, **kwargs)


CAUSAL = jnp.tril(jnp.ones((3, 3), bool))


@pytest.mark.parametrize(
    ("make", "method"),
    [
        (lambda: _IgnoresMask(EYE), "velocity"),
        (lambda: _WeightsIgnoreMask(EYE), "weights"),
        (lambda: _NormaliseIgnoresMask(V=EYE, A=EYE), "normalise"),
        (lambda: _SuperWithoutMask(V=EYE, A=EYE), "velocity"),
    ],
)
def test_masked_refuses_a_kernel_that_never_reads_its_mask(make, method):
    kernel = make()
    match = rf"`kernel` \({type(kernel).__name__}\): its `{method}` never reads its `mask` argument"
    with pytest.raises(ParameterError, match=match):
        Masked(kernel, CAUSAL)
    with pytest.raises(ParameterError, match=r"`kernel\.heads\[1\]` .* never reads its `mask`"):
        Masked(MultiHead([Softmax(V=EYE, A=EYE), kernel]), CAUSAL)


@pytest.mark.parametrize("cls", [_ReadsMask, _MaskInClosure, _Forwards])
def test_masked_accepts_a_kernel_that_reads_its_mask_or_cannot_be_judged(cls):
    model = Masked(cls(EYE), CAUSAL)
    x = jnp.array([[3.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
    np.testing.assert_allclose(np.asarray(model.velocity(0.0, x))[:, 0], [3.0, 2.0, 2.0])
    local = Masked(MultiHead([Softmax(V=EYE, A=EYE), _Local(2.0 * EYE)]), CAUSAL)  # a drift head: no mask needed
    expected = Masked(Softmax(V=EYE, A=EYE), CAUSAL).velocity(0.0, x) + 2.0 * x
    np.testing.assert_allclose(np.asarray(local.velocity(0.0, x)), np.asarray(expected), rtol=1e-12)
    for kernel in (Softmax(V=EYE, A=EYE), Linear(V=EYE, A=EYE), L2(V=EYE, Q=EYE, K=EYE)):
        Masked(kernel, CAUSAL)  # the library's kernels


class _LinearMapMixin:  # a plain mixin that supplies the Gaussian map of the mean-field drift Γ(x) = V E[x]
    def gaussian_affine(self, t, mean, cov, factor=None):
        return jnp.zeros_like(cov), self.V @ mean


class _MixinDrift(_LinearMapMixin, AbstractAttention):
    V: jax.Array

    @property
    def d(self):
        return 2

    def velocity(self, t, x, keys=None, mask=None):
        y = x if keys is None else keys
        return jnp.broadcast_to(self.V @ y.mean(0), x.shape)


class _MapOnlyBase(AbstractAttention):  # a user's base: the map, no kernel of its own (subclasses define it)
    V: jax.Array

    @property
    def d(self):
        return 2

    def gaussian_affine(self, t, mean, cov, factor=None):
        return jnp.zeros_like(cov), self.V @ mean


class _BaseDrift(_MapOnlyBase):
    def velocity(self, t, x, keys=None, mask=None):
        y = x if keys is None else keys
        return jnp.broadcast_to(self.V @ y.mean(0), x.shape)


@pytest.mark.parametrize("cls", [_MixinDrift, _BaseDrift])
def test_a_map_from_a_mixin_or_a_kernel_less_base_is_the_kernels_own(cls):
    """A map supplied by a plain mixin (no ``_gaussian_kernel_methods``: an AttributeError before a review's fix) or
    by a user's base that defines no kernel of its own belongs to the subclass's kernel: solved, not refused.
    The drift moves the mean by ``exp(t)`` (V = I) and leaves the covariance."""
    sol = solve_gaussian(cls(V=EYE), jnp.ones(2), EYE / 2, t1=0.3)
    assert status_names(sol.status) == "completed"
    np.testing.assert_allclose(sol.mean_final, np.exp(0.3) * np.ones(2), rtol=1e-5)
    np.testing.assert_allclose(sol.cov_final, EYE / 2, rtol=1e-6)


def test_a_fused_store_and_load_of_the_mask_counts_as_a_read(monkeypatch):
    """Python 3.13 fuses ``m = mask`` after another store into one STORE_FAST_LOAD_FAST ('w', 'mask') instruction
    (no LOAD_* opcode names the mask then): it is a read, and the kernel passes (a review found it refused)."""
    from types import SimpleNamespace

    from hassejax.dynamics.attention import _base

    def normalise(self, t, logits, mask):
        return logits

    fused = [SimpleNamespace(opname="STORE_FAST_LOAD_FAST", argval=("w", "mask"))]  # what dis gives on 3.13
    monkeypatch.setattr(_base.dis, "get_instructions", lambda code: iter(fused))
    assert _base.reads_argument(normalise, "mask") is True
    stored = [SimpleNamespace(opname="STORE_FAST_LOAD_FAST", argval=("mask", "w"))]  # `mask = ...` then a read of w
    monkeypatch.setattr(_base.dis, "get_instructions", lambda code: iter(stored))
    assert _base.reads_argument(normalise, "mask") is False
    monkeypatch.setattr(_base.dis, "get_instructions", lambda code: iter(fused[:0]))
    assert _base.reads_argument(normalise, "mask") is False


class _ClearsMask(Softmax):
    def velocity(self, t, x, keys=None, mask=None):
        mask = None  # noqa: F841 (a store, not a read: the kernel runs unmasked)
        return Softmax.velocity(self, t, x, keys)


def test_a_kernel_that_only_overwrites_its_mask_is_refused_under_masked():
    """``mask = None`` (or ``del mask``) stores to the name and never reads the mask given: refused by Masked (a
    review: counting any instruction that names the mask as a read let it through)."""
    with pytest.raises(ParameterError, match="never reads its `mask`"):
        Masked(_ClearsMask(V=EYE, A=EYE), jnp.tril(jnp.ones((3, 3), bool)))


class _ContractingDrift(_BaseDrift):  # changes the kernel its base's map was accepted for
    def velocity(self, t, x, keys=None, mask=None):
        return -x


class _ContractingMixinDrift(_MixinDrift):
    def velocity(self, t, x, keys=None, mask=None):
        return -x


@pytest.mark.parametrize("cls", [_ContractingDrift, _ContractingMixinDrift])
def test_a_subclass_that_changes_the_kernel_below_a_kernel_less_map_is_refused(cls):
    """Below a map from a mixin or a kernel-less base, the map belongs to the first class that defines a kernel; a
    subclass that changes that kernel has no map (a review: accepted, the mean grew like exp(+t) for a velocity −x)."""
    with pytest.raises(ParameterError, match="overrides `velocity`"):
        solve_gaussian(cls(V=EYE), jnp.ones(2), EYE / 2, t1=0.3)


def test_subclass_adding_fields_without_a_constructor_is_refused_when_defined():
    """A fresh user's tempered softmax (a field `tau` with a default, `logits` divided by it) met ``TypeError:
    AbstractBilinearAttention.__init__() got an unexpected keyword argument 'tau'`` at its first instance; now the
    class definition is refused with the constructor to write, and with it the kernel solves (its particles equal
    softmax at `beta = 1/tau`)."""
    import equinox as eqx

    with pytest.raises(TypeError, match=r"_Tempered adds the field\(s\) tau to Softmax.*own __init__"):

        class _Tempered(Softmax):
            tau: jax.Array = eqx.field(default_factory=lambda: jnp.asarray(1.0))

    # a review: fields with a plain default, static ones, and Equinox's abstract fields stay allowed
    class _Defaulted(Softmax):
        tau: float = 2.0

    class _Static(Softmax):
        tau: float = eqx.field(static=True, default=3.0)

    class _Abstract(Softmax):
        tau: eqx.AbstractVar[jax.Array]

    assert _Defaulted(V=EYE, A=EYE).tau == 2.0 and _Static(V=EYE, A=EYE).tau == 3.0

    class _TemperedOk(Softmax):
        tau: jax.Array

        def __init__(self, V, A=None, Q=None, K=None, beta=1.0, tau=1.0):
            super().__init__(V, A, Q, K, beta)
            self.tau = jnp.asarray(tau)

        def logits(self, t, x, y):
            return super().logits(t, x, y) / self.tau

    x0 = jnp.array([[1.0, 0.0], [0.0, 1.0], [0.5, -0.5]])
    got = solve_particles(_TemperedOk(V=EYE, A=EYE, tau=2.0), x0, t1=0.5).x_final
    want = solve_particles(Softmax(V=EYE, A=EYE, beta=0.5), x0, t1=0.5).x_final
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
