"""A float32 solve crossing a PiecewiseConstant layer only a few rounding units of `t` long (README, `state=`).

The setup of ``tests/dynamics/test_precision.py::test_layer_a_few_rounding_units_long_warns``: a softmax
Gaussian solve (``solve_gaussian(Softmax(V=v, A=I), mean0=0, cov0=0.5 I)``, d = 2, rtol = atol = 1e-6) from
`t0` to `t0 + 20` whose value matrix is a :class:`~hassejax.dynamics.PiecewiseConstant` ``1000 I`` on the layer
``[t0, t0 + 1e-4)`` and ``0.5 I`` after it (to `t0 + 1000`), so the blow-up time `t*` depends on how far the
solver gets through the short first layer. At `t0 = 100` that layer is 13 rounding units of `t` long in float32
(1e-4 / 2^-17), and the solve warns (``RuntimeWarning``, ``hassejax.dynamics._arguments.warn_short_layers``).

The float64 solve of the same problem is the reference; the script prints `t*` of both, the float32 error in
`t*` relative to the reference's `t* - t0` and to `t*` itself, the status, the warning, and the same pair from
`t0 = 0` (where the layer is 1e-4 / 2^-37 units long in float32) for comparison, plus the machine.

Usage: ``python benchmarks/float32_short_layer.py``  (a few seconds, mostly compilation)
"""

from __future__ import annotations

import math
import os
import platform
import warnings

import jax

jax.config.update("jax_enable_x64", True)  # for the float64 reference; the float32 solve has float32 inputs

import jax.numpy as jnp  # noqa: E402

from hassejax.dynamics import PiecewiseConstant, Softmax, solve_gaussian  # noqa: E402
from hassejax.dynamics.result import status_names  # noqa: E402

LENGTH = 1e-4  # the short layer's length
V_SHORT, V_NEXT = 1e3, 0.5  # V on the short layer and after it (2000 times)


def solve(t0: float, dtype):
    i = jnp.eye(2, dtype=dtype)
    v = PiecewiseConstant(jnp.stack([V_SHORT * i, V_NEXT * i]), jnp.array([t0, t0 + LENGTH, t0 + 1000.0], dtype))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sol = solve_gaussian(Softmax(V=v, A=i), jnp.zeros(2, dtype), 0.5 * i, t0=t0, t1=t0 + 20, rtol=1e-6, atol=1e-6)
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    return sol, msgs


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main() -> None:
    print(
        f"machine: {cpu_model()}, {os.cpu_count()} CPUs, "
        f"JAX {jax.__version__} ({jax.default_backend()}), load average {os.getloadavg()}"
    )
    for t0 in (100.0, 0.0):
        # one float32 rounding unit of t at the layer's larger end: eps · 2^(e − 1) for |t| = m · 2^e, m in [0.5, 1)
        ulp32 = float(jnp.finfo(jnp.float32).eps) * math.ldexp(1.0, math.frexp(max(abs(t0), abs(t0 + LENGTH)))[1] - 1)
        ref, _ = solve(t0, jnp.float64)
        f32, msgs = solve(t0, jnp.float32)
        t_ref, t_32 = float(ref.t_blowup), float(f32.t_blowup)
        err = t_32 - t_ref
        print(f"t0 = {t0:g}: layer [{t0:.8g}, {t0 + LENGTH:.8g}) = {LENGTH / ulp32:.3g} float32 rounding units of t")
        print(f"  float64 t* = {t_ref:.9g} (status {status_names(ref.status)})")
        print(f"  float32 t* = {t_32:.9g} (status {status_names(f32.status)})")
        print(
            f"  float32 - float64: {err:+.4g} = {100 * err / (t_ref - t0):+.3g} % of t* - t0 = "
            f"{100 * err / t_ref:+.3g} % of t*"
        )
        print(f"  float32 warning: {msgs[0] if msgs else 'none'}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
