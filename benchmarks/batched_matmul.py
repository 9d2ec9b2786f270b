"""Benchmark: XLA's CPU rate for the batched small matrix products of a covariance sweep.

The sweeps of ``sweeps.py`` spend their time in `d×d` products, one per member (``vmap``). This
measures, for 1,000 pairs of float64 `d×d` matrices, ``jax.vmap(jnp.matmul)`` against an unrolled
sum of outer products (the form a hand-written kernel would take), each as a chain of 10 jitted
products, median of 5 calls after a warm-up; it prints ms per batched product and GFLOP/s
(`2 b d³` flop). With these rates the FLOP floor of a sweep is
`members × steps × evaluations × products × time per product` (benchmarks/README, "Sweeps").

Usage: ``python benchmarks/batched_matmul.py [--members 1000] [--dims 8 32]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)


def outer_sum(x, y):
    """`x @ y` for one pair, as the sum over `j` of the outer products `x[:, j] y[j, :]`."""
    acc = x[:, 0, None] * y[None, 0, :]
    for j in range(1, x.shape[1]):
        acc = acc + x[:, j, None] * y[None, j, :]
    return acc


def chain(product):
    @jax.jit
    def run(x, y):
        for _ in range(10):
            x = jax.vmap(product)(x, y) * 0.1
        return x

    return run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--dims", type=int, nargs="+", default=[8, 32])
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()}, {os.cpu_count()} CPUs, jax {jax.__version__}")
    print("| d | form | ms per batched product | GFLOP/s | max abs diff to matmul |")
    print("|---|---|---|---|---|")
    for d in args.dims:
        kx, ky = jax.random.split(jax.random.PRNGKey(0))
        x = jax.random.normal(kx, (args.members, d, d))
        y = jax.random.normal(ky, (args.members, d, d))
        ref = chain(jnp.matmul)(x, y).block_until_ready()
        for name, product in (("vmap(matmul)", jnp.matmul), ("outer-product sum", outer_sum)):
            run = chain(product)
            out = run(x, y).block_until_ready()
            times = []
            for _ in range(5):
                t = time.perf_counter()
                run(x, y).block_until_ready()
                times.append((time.perf_counter() - t) / 10)
            dt = statistics.median(times)
            flop = 2 * args.members * d**3
            print(
                f"| {d} | {name} | {dt * 1e3:.2f} | {flop / dt / 1e9:.1f} | {float(jnp.max(jnp.abs(out - ref))):.1e} |"
            )


if __name__ == "__main__":
    main()
