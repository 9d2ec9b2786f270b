"""Adding a kernel is one subclass (issue 12 acceptance): toy kernels defined here alone solve
through :func:`solve_particles` (and, with a Gaussian map, :func:`solve_gaussian`) and match a
closed form or a NumPy RK4 integration written independently of the library."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jaxtyping import Array, ArrayLike, Bool, Float, Real

from hassejax.dynamics import (
    AbstractAttention,
    Masked,
    MultiHead,
    Softmax,
    solve_gaussian,
    solve_particles,
    status_names,
)
from hassejax.errors import ParameterError

TS = jnp.linspace(0.0, 1.0, 6)


class UniformAverage(AbstractAttention):
    """`Γ(x_i) = V ȳ` (every allowed key weighs the same); on `N(α, Σ)`: `M = 0`, `c = Vα`."""

    V: Float[Array, "d d"]

    @property
    def d(self) -> int:
        return self.V.shape[-1]

    def value(self, t: Real[ArrayLike, ""]) -> Float[Array, "d d"]:
        return self.V

    def weights(self, t, x, keys=None, mask=None):
        y = x if keys is None else keys
        allowed = jnp.ones((x.shape[0], y.shape[0]), bool) if mask is None else mask
        return allowed / jnp.maximum(jnp.sum(allowed, axis=-1, keepdims=True), 1)

    def gaussian_affine(self, t, mean, cov, factor=None):
        return jnp.zeros_like(cov), self.V @ mean


class Cosine(AbstractAttention):
    """`Γ(x_i) = Σ_j softmax_j(β cos∠(x_i, y_j)) V y_j`: no Gaussian map."""

    V: Float[Array, "d d"]
    beta: float = eqx.field(static=True)

    @property
    def d(self) -> int:
        return self.V.shape[-1]

    def velocity(self, t, x, keys=None, mask: Bool[Array, "m n"] | None = None):
        y = x if keys is None else keys
        xn = x / jnp.linalg.norm(x, axis=-1, keepdims=True)
        yn = y / jnp.linalg.norm(y, axis=-1, keepdims=True)
        logits = self.beta * xn @ yn.T
        if mask is not None:
            logits = jnp.where(mask, logits, -jnp.inf)
        return jax.nn.softmax(logits, axis=-1) @ y @ self.V.T


def _rk4(f, x0, ts, substeps=400):
    out, x, t = [x0.copy()], x0.copy(), ts[0]
    for t_next in ts[1:]:
        h = (t_next - t) / substeps
        for _ in range(substeps):
            k1 = f(x)
            k2 = f(x + h / 2 * k1)
            k3 = f(x + h / 2 * k2)
            k4 = f(x + h * k3)
            x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(x.copy())
        t = t_next
    return np.stack(out)


def _np_cosine(x, v, beta, mask=None):
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    logits = beta * xn @ xn.T
    if mask is not None:
        logits = np.where(mask, logits, -np.inf)
    w = np.exp(logits - logits.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    return w @ x @ v.T


def test_uniform_average_particles_match_closed_form():
    """x̄' = V x̄, so x_i(t) = x_i(0) + (e^{tV} − I) x̄(0) (derived)."""
    r = np.random.default_rng(0)
    v = r.normal(size=(2, 2))
    x0 = r.normal(size=(5, 2))
    sol = solve_particles(UniformAverage(jnp.asarray(v)), x0, t1=1.0, ts=TS, rtol=1e-10, atol=1e-12)
    assert status_names(sol.status) == "completed"
    want = np.stack([x0 + (scipy.linalg.expm(float(t) * v) - np.eye(2)) @ x0.mean(axis=0) for t in TS])
    np.testing.assert_allclose(np.asarray(sol.xs), want, rtol=1e-8, atol=1e-10)


def test_uniform_average_gaussian_solve_uses_the_subclass_map():
    """M = 0, c = Vα: α(t) = e^{tV}α0 and Σ stays Σ0."""
    v = np.array([[0.0, 1.0], [-1.0, 0.2]])
    alpha0, sigma0 = np.array([1.0, -0.5]), np.array([[0.6, 0.1], [0.1, 0.3]])
    sol = solve_gaussian(UniformAverage(jnp.asarray(v)), alpha0, sigma0, t1=1.0, ts=TS, rtol=1e-10, atol=1e-12)
    assert status_names(sol.status) == "completed"
    np.testing.assert_allclose(
        np.asarray(sol.mean), np.stack([scipy.linalg.expm(float(t) * v) @ alpha0 for t in TS]), rtol=1e-8
    )
    np.testing.assert_allclose(np.asarray(sol.cov), np.broadcast_to(sigma0, (len(TS), 2, 2)), rtol=1e-12)


def test_cosine_particles_match_numpy_rk4_and_compose():
    r = np.random.default_rng(1)
    v = r.normal(size=(3, 3)) * 0.5
    x0 = r.normal(size=(6, 3))
    model = Cosine(jnp.asarray(v), beta=2.0)
    sol = solve_particles(model, x0, t1=1.0, ts=TS, rtol=1e-10, atol=1e-12)
    want = _rk4(lambda x: _np_cosine(x, v, 2.0), x0, np.asarray(TS))
    np.testing.assert_allclose(np.asarray(sol.xs), want, rtol=1e-7, atol=1e-9)
    # under a causal mask (the Masked composition passes the mask to the toy kernel)
    causal = np.tril(np.ones((6, 6), bool))
    sol_m = solve_particles(Masked(model, causal), x0, t1=1.0, ts=TS, rtol=1e-10, atol=1e-12)
    want_m = _rk4(lambda x: _np_cosine(x, v, 2.0, causal), x0, np.asarray(TS))
    np.testing.assert_allclose(np.asarray(sol_m.xs), want_m, rtol=1e-7, atol=1e-9)
    # beside a library head
    soft = Softmax(np.eye(3), A=np.zeros((3, 3)))
    got = MultiHead([model, soft]).velocity(0.0, jnp.asarray(x0))
    np.testing.assert_allclose(np.asarray(got), _np_cosine(x0, v, 2.0) + x0.mean(axis=0), rtol=1e-12)


def test_a_kernel_without_gaussian_map_gets_the_clear_error():
    model = Cosine(jnp.eye(2), beta=1.0)
    with pytest.raises(
        ParameterError, match=r"`model` \(Cosine\) does not preserve Gaussians \(spec §2\).*solve_particles"
    ):
        solve_gaussian(model, np.zeros(2), np.eye(2), t1=1.0)
    with pytest.raises(ParameterError, match=r"Cosine has no single weight matrix"):
        model.weights(0.0, jnp.ones((2, 2)))


class _NoField(AbstractAttention):
    """A kernel that forgot its velocity field (neither `velocity` nor `weights` with `value`)."""

    V: Float[Array, "d d"]

    @property
    def d(self) -> int:
        return self.V.shape[-1]


class _WeightsOnly(_NoField):
    def weights(self, t, x, keys=None, mask=None):
        y = x if keys is None else keys
        return jnp.ones((x.shape[0], y.shape[0]), x.dtype) / y.shape[0]


def test_a_kernel_without_a_velocity_field_is_named_with_what_it_lacks():
    """A fresh-user review: such a kernel was built and then refused as "has no single weight matrix W; use
    `velocity`", which did not say what a kernel must define."""
    x0 = np.ones((3, 2))
    with pytest.raises(
        ParameterError, match=r"`model` \(_NoField\) defines no velocity field.*lacks `weights` and `value`"
    ):
        solve_particles(_NoField(jnp.eye(2)), x0, t1=1.0)
    with pytest.raises(ParameterError, match=r"`model` \(_WeightsOnly\) defines no velocity field.*lacks `value`\."):
        solve_particles(_WeightsOnly(jnp.eye(2)), x0, t1=1.0)
    # wrapped: the wrapper has a velocity; the inner kernel is named with what it lacks (a fresh-user review: a
    # head was told only "has no single weight matrix W")
    with pytest.raises(
        ParameterError, match=r"^`model\.kernel` \(_NoField\) defines no velocity field.*lacks `weights` and `value`"
    ):
        solve_particles(Masked(_NoField(jnp.eye(2)), np.tril(np.ones((3, 3), bool))), x0, t1=1.0)
    with pytest.raises(
        ParameterError, match=r"^`model\.heads\[1\]` \(_WeightsOnly\) defines no velocity.*lacks `value`"
    ):
        solve_particles(MultiHead([UniformAverage(jnp.eye(2)), _WeightsOnly(jnp.eye(2))]), x0, t1=1.0)


class _FlatWeights(_WeightsOnly):
    """Weights of shape ``(m,)`` where ``(m, n)`` is due."""

    def weights(self, t, x, keys=None, mask=None):
        return jnp.ones((x.shape[0],), x.dtype)

    def value(self, t):
        return self.V


class _BatchedValue(_WeightsOnly):
    """A value matrix of shape ``(1, d, d)``."""

    def value(self, t):
        return self.V[None]


class _NumpyVelocity(_NoField):
    """A velocity written with NumPy: runs on concrete arrays, fails under the solve's jit."""

    def velocity(self, t, x, keys=None, mask=None):
        return jnp.asarray(np.asarray(x) @ np.asarray(self.V).T)


class _NumpyGaussian(_NoField):
    """A Gaussian map written with NumPy on the covariance."""

    def gaussian_affine(self, t, mean, cov, factor=None):
        return jnp.asarray(np.asarray(self.V) @ np.asarray(cov)), self.V @ mean


def test_a_kernel_s_wrong_weights_or_value_and_numpy_code_are_named():
    """A fresh-user review: a `weights` of shape ``(n,)`` or a `value` of shape ``(1, d, d)`` was reported as the
    velocity's shape with a hint about batch axes the kernel did not have; a velocity or Gaussian map written with
    NumPy passed the check (run on concrete arrays) and failed inside diffrax with a raw TracerArrayConversionError.
    Each is named now, before the solve."""
    x0 = np.ones((6, 2))
    with pytest.raises(
        ParameterError,
        match=r"^model\.weights\(t, x \(6, 2\), keys, mask\) must return an array of shape \(6, 6\); got \(6,\)\.$",
    ):
        solve_particles(_FlatWeights(jnp.eye(2)), x0, t1=1.0)
    with pytest.raises(
        ParameterError,
        match=r"^model\.value\(t\) must return an array of shape \(2, 2\); got \(1, 2, 2\)\. \(if a field of the kernel carries a batch axis",
    ):
        solve_particles(_BatchedValue(jnp.eye(2)), x0, t1=1.0)
    with pytest.raises(
        ParameterError, match=r"^model\.velocity\(t, x \(6, 2\)\) failed .*TracerArrayConversionError.*jax\.numpy"
    ):
        solve_particles(_NumpyVelocity(jnp.eye(2)), x0, t1=1.0)
    with pytest.raises(
        ParameterError, match=r"^model\.gaussian_affine\(.*\) failed .*TracerArrayConversionError.*jax\.numpy"
    ):
        solve_gaussian(_NumpyGaussian(-jnp.eye(2)), np.zeros(2), np.eye(2), t1=0.5)
    # the same kernels written with jax.numpy solve
    assert status_names(solve_particles(UniformAverage(-jnp.eye(2)), x0, t1=0.5).status) == "completed"


def test_a_batched_kernel_without_ranks_is_told_to_vmap():
    """A user's kernel declares no `_ranks`, so a batch axis of its fields shows up as a shape error in its own
    code; the message says what to do (a fresh-user review met a bare dot_general error)."""
    batched = UniformAverage(jnp.stack([jnp.eye(2), 2.0 * jnp.eye(2)]))
    with pytest.raises(
        ParameterError,
        match=r"model\.value\(t\) must return .* got \(2, 2, 2\)\. \(if a field .*jax\.vmap the solve over the batch",
    ):
        solve_particles(batched, np.ones((3, 2)), t1=1.0)


class _OnesWeights(AbstractAttention):
    """Uniform attention written with ``jnp.ones(shape)`` (float64 under ``jax_enable_x64``, whatever the tokens)."""

    V: Float[Array, "d d"]

    @property
    def d(self) -> int:
        return self.V.shape[-1]

    def weights(self, t, x, keys=None, mask=None):
        y = x if keys is None else keys
        allowed = jnp.ones((x.shape[0], y.shape[0])) if mask is None else mask.astype(jnp.float64)
        return allowed / allowed.sum(axis=1, keepdims=True)

    def value(self, t):
        return self.V

    def gaussian_affine(self, t, mean, cov, factor=None):
        return jnp.zeros((self.d, self.d), mean.dtype), jnp.asarray(self.V @ mean, jnp.float64)


class _Float32Velocity(_OnesWeights):
    def velocity(self, t, x, keys=None, mask=None):
        return super().velocity(t, x, keys, mask).astype(jnp.float32)


class _NarrowWeights(_OnesWeights):
    dtype: object = eqx.field(static=True, default=jnp.int32)

    def weights(self, t, x, keys=None, mask=None):
        return super().weights(t, x, keys, mask).astype(self.dtype)


class _Int32Velocity(_OnesWeights):
    def velocity(self, t, x, keys=None, mask=None):
        return (x @ self.V.T).astype(jnp.int32)


def test_a_kernel_that_changes_the_dtype_is_named():
    """A fresh-user check: the docstring's own `Uniform` example (``jnp.ones(shape)``) in a float32 solve under
    ``jax_enable_x64`` failed inside the solver ("value must have a dtype that can be promoted", and for the Gaussian
    map "cond branches must have equal output types"). The check of the outputs now names the method and the
    dtypes; the same kernel in float64 solves and matches the closed form `x̄(t) = e^{tV} x̄0`."""
    v = -jnp.eye(2, dtype=jnp.float32)
    x0 = jnp.array([[1.0, 0.0], [0.0, 3.0]], jnp.float32)
    with pytest.raises(ParameterError, match=r"model\.velocity\(t, x \(2, 2\)\) must return arrays of the state's dtype "
                       r"float32 .*got float64"):  # fmt: skip
        solve_particles(_OnesWeights(v), x0, t1=1.0, rtol=1e-6, atol=1e-6)
    with pytest.raises(ParameterError, match=r"model\.gaussian_affine\(.*must return arrays of the state's dtype "
                       r"float32 .*got float32, float64"):  # fmt: skip
        solve_gaussian(_OnesWeights(v), jnp.ones(2, jnp.float32), jnp.eye(2, dtype=jnp.float32), t1=1.0, rtol=1e-6,
                       atol=1e-6)  # fmt: skip
    # what the check does not refuse (a review): a float64 t0 in a float32 solve with a parameter of t (the solver
    # calls the kernel at t in the state's dtype, the check too)
    softmax = Softmax(V=lambda t: v * (1 + t), A=jnp.eye(2, dtype=jnp.float32))
    assert int(solve_particles(softmax, x0, t0=np.float64(0.0), t1=0.5, rtol=1e-6, atol=1e-6).status) == 0
    assert int(solve_gaussian(softmax, jnp.zeros(2, jnp.float32), jnp.eye(2, dtype=jnp.float32), t0=np.float64(0.0),
                              t1=0.5, rtol=1e-6, atol=1e-6).status) == 0  # fmt: skip
    # a narrower output is refused too (a fresh user: stored in the float64 state, an int32 velocity ended `completed`
    # 1.2 off the exact e^{0.7t} x0, a float32 one 3e-8 off at rtol 1e-10)
    for kernel, got in ((_Float32Velocity(-jnp.eye(2)), "float32"), (_Int32Velocity(0.7 * jnp.eye(2)), "int32")):
        with pytest.raises(ParameterError, match=rf"state's dtype float64 .*got {got}"):
            solve_particles(kernel, np.eye(2), t1=0.5)
    # ... and weights narrower than x under the default velocity (a fresh user: int32 weights truncated to 0, nothing
    # moved, `completed`; the velocity itself came out float64)
    for dtype in (jnp.int32, jnp.float32):
        with pytest.raises(ParameterError, match=rf"_NarrowWeights\.weights must return floating weights .*got "
                           rf"{jnp.dtype(dtype).name}"):  # fmt: skip
            solve_particles(_NarrowWeights(jnp.eye(2), dtype), np.eye(2), t1=0.5)
    sol = solve_particles(_OnesWeights(v.astype(jnp.float64)), x0.astype(jnp.float64), t1=1.0, ts=TS)
    mean = np.asarray(sol.xs).mean(axis=1)
    np.testing.assert_allclose(mean, np.exp(-np.asarray(TS))[:, None] * np.array([0.5, 1.5]), rtol=1e-5)  # interpolated


class _TwoArgVelocity(AbstractAttention):
    V: Float[Array, "d d"]

    @property
    def d(self) -> int:
        return self.V.shape[-1]

    def velocity(self, t, x):
        return jnp.mean(x, axis=0, keepdims=True) @ self.V.T + 0 * x


def test_a_velocity_without_keys_and_mask_is_told_the_signature_under_a_wrapper():
    """A fresh-user check: ``velocity(self, t, x)`` solves alone, but under :class:`Masked` or :class:`MultiHead`
    (which pass `keys` and `mask`) the message hinted at a batch axis of the kernel's fields."""
    x0 = np.eye(2)
    assert status_names(solve_particles(_TwoArgVelocity(jnp.eye(2)), x0, t1=0.5).status) == "completed"
    for wrapped in (Masked(_TwoArgVelocity(jnp.eye(2)), np.tril(np.ones((2, 2), bool))),
                    MultiHead([_TwoArgVelocity(jnp.eye(2))])):  # fmt: skip
        with pytest.raises(ParameterError, match=r"velocity takes \(t, x, keys=None, mask=None\)") as err:
            solve_particles(wrapped, x0, t1=0.5)
        assert "batch axis" not in str(err.value)
