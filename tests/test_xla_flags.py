"""The XLA flags the main job and the suite add (hassejax._xla_flags): gated on jaxlib and the CPU,
never over a flag the user set, and the suite's own process runs with them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hassejax import _xla_flags


@pytest.mark.parametrize(
    ("version", "machine", "level0", "want"),
    [
        ((0, 5), "x86_64", False, []),  # jaxlib 0.5 has no such flag: adding it would abort the process
        ((0, 5), "x86_64", True, ["--xla_backend_optimization_level=0"]),
        ((0, 6), "x86_64", False, ["--xla_cpu_use_fusion_emitters=false"]),
        (
            (0, 10),
            "x86_64",
            True,
            ["--xla_cpu_use_fusion_emitters=false", "--xla_backend_optimization_level=0", "--xla_cpu_max_isa=AVX"],
        ),
        ((0, 10), "arm64", True, ["--xla_backend_optimization_level=0"]),  # FMA stays: no legacy emitters at level 0
        ((0, 10), "arm64", False, ["--xla_cpu_use_fusion_emitters=false"]),
        ((0, 8), "AMD64", False, ["--xla_cpu_use_fusion_emitters=false"]),
        ((0, 11), "x86_64", False, []),  # not checked to have the flag yet
        ((0, 11), "x86_64", True, ["--xla_backend_optimization_level=0"]),
        (None, "x86_64", False, []),  # jaxlib not installed (or an unreadable version): nothing
        (None, "x86_64", True, ["--xla_backend_optimization_level=0"]),
    ],
)
def test_flags_follow_jaxlib_and_the_cpu(monkeypatch, version, machine, level0, want):
    monkeypatch.setattr(_xla_flags, "_jaxlib_version", lambda: version)
    monkeypatch.setattr(_xla_flags.platform, "machine", lambda: machine)
    assert _xla_flags.fast_compile_flags(level0=level0) == want


def test_a_flag_the_user_set_wins(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=3  --xla_dump_to=/tmp/x")
    out = _xla_flags.add_xla_flags(["--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false"])
    assert out == os.environ["XLA_FLAGS"]
    assert out.split() == [
        "--xla_backend_optimization_level=3",
        "--xla_dump_to=/tmp/x",
        "--xla_cpu_use_fusion_emitters=false",
    ]
    assert _xla_flags.add_xla_flags(["--xla_cpu_use_fusion_emitters=true"]) == out  # added once, not twice


def test_the_users_string_is_kept_as_written(monkeypatch):
    """A quoted value with spaces in it is not re-split (XLA reads the folder `d  x`, two spaces)."""
    monkeypatch.setenv("XLA_FLAGS", '--xla_dump_to="/tmp/d  x" ')
    out = _xla_flags.add_xla_flags(["--xla_cpu_use_fusion_emitters=false"])
    assert out == '--xla_dump_to="/tmp/d  x" --xla_cpu_use_fusion_emitters=false'
    monkeypatch.setenv("XLA_FLAGS", "  ")
    assert _xla_flags.add_xla_flags([]) == "  "  # nothing to add: untouched


def test_jaxlib_versions_are_read_leniently(monkeypatch):
    for text, want in [("0.6.0.dev20250101", (0, 6)), ("0.10.2+cuda12", (0, 10)), ("1.0rc1", None), ("1", None)]:
        monkeypatch.setattr(_xla_flags.metadata, "version", lambda name, text=text: text)
        assert _xla_flags._jaxlib_version() == want, text


def test_from_an_empty_environment(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert _xla_flags.add_xla_flags(["--xla_cpu_use_fusion_emitters=false"]) == "--xla_cpu_use_fusion_emitters=false"


def test_the_suite_runs_with_its_flags():
    """conftest.py set them before JAX started (a user's XLA_FLAGS would have won)."""
    flags = os.environ["XLA_FLAGS"].split()
    names = {f.split("=")[0] for f in flags}
    for f in _xla_flags.fast_compile_flags(level0=True):
        assert f.split("=")[0] in names


def test_jit_at_default_level_asks_for_level_3_and_computes_the_same(monkeypatch):
    import jax
    import jax.numpy as jnp

    def f(x):
        return jnp.cumsum(jnp.sin(x) * x + 1.0 / (1.0 + x * x))

    x = jnp.linspace(-3.0, 3.0, 101)
    fast = _xla_flags.jit_at_default_level(f)
    # without FMA (the suite's ISA cap) level 3 and the suite's level 0 round alike
    assert jnp.array_equal(fast(x), jax.jit(f)(x))
    seen = {}
    real_jit = jax.jit

    def spy(fun, *, compiler_options=None, **kwargs):  # a jax.jit that takes compiler_options
        seen.update(kwargs, compiler_options=compiler_options)
        return real_jit(fun, compiler_options=compiler_options, **kwargs)

    monkeypatch.setattr(jax, "jit", spy)
    _xla_flags.jit_at_default_level(f, static_argnums=())
    assert seen == {"static_argnums": (), "compiler_options": {"xla_backend_optimization_level": 3}}

    def old_jit(fun, **kwargs):  # JAX before compiler_options: a plain jit
        seen.clear()
        seen.update(kwargs)
        return real_jit(fun, **kwargs)

    monkeypatch.setattr(jax, "jit", old_jit)
    assert jnp.array_equal(_xla_flags.jit_at_default_level(f)(x), fast(x)) and seen == {}


def test_level0_compiler_options_are_accepted_per_program_on_the_cpu_only(monkeypatch):
    """``level0_compiler_options``: LLVM level 0 for one program on the CPU (rank_histograms' sweeps in the full run),
    nothing where ``XLA_FLAGS`` sets the level (the user's or ``--quick``'s wins), on another backend or where
    ``jax.jit`` takes no ``compiler_options``; XLA compiles a program with them and it computes what the default
    program computes."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")
    assert _xla_flags.level0_compiler_options("gpu") == {}
    assert _xla_flags.level0_compiler_options("tpu") == {}
    options = _xla_flags.level0_compiler_options("cpu")
    if not _xla_flags.jit_takes_compiler_options():
        assert options == {}
        return
    assert options == {"xla_backend_optimization_level": 0}
    for flags in ("--xla_backend_optimization_level=3", "--xla_dump_to=/tmp/x --xla_backend_optimization_level=0"):
        monkeypatch.setenv("XLA_FLAGS", flags)
        assert _xla_flags.level0_compiler_options("cpu") == {}
    x = jnp.asarray(np.linspace(-1.0, 1.0, 12).reshape(3, 4))
    f = lambda a: jnp.tanh(a @ a.T).sum(axis=0)
    compiled = jax.jit(f, compiler_options=options).lower(x).compile()
    np.testing.assert_allclose(np.asarray(compiled(x)), np.asarray(jax.jit(f)(x)), rtol=1e-14)
    monkeypatch.delenv("XLA_FLAGS")
    monkeypatch.setattr(_xla_flags, "jit_takes_compiler_options", lambda: False)
    assert _xla_flags.level0_compiler_options("cpu") == {}


@pytest.mark.parametrize(
    ("release", "want"),
    [
        ((0, 10, 1), []),  # before YNNPACK's reduction fusions
        ((0, 10, 2), ["--xla_cpu_experimental_ynn_fusion_type=-reduce"]),  # jax-ml/jax#39103
        ((0, 11, 0), []),  # not known bad (and not checked to have the flag's values)
        (None, []),
    ],
)
def test_correctness_flags_follow_jaxlib(monkeypatch, release, want):
    monkeypatch.setattr(_xla_flags, "_jaxlib_release", lambda: release)
    assert _xla_flags.correctness_flags() == want


@pytest.mark.parametrize(
    ("version", "release"),
    [("0.10.2", (0, 10, 2)), ("0.10.1rc1", (0, 10, 1)), ("0.10.2.dev20260101", (0, 10, 2)), ("0.11", (0, 11, 0))],
)
def test_jaxlib_release_reads_the_leading_digits(monkeypatch, version, release):
    """A review: "0.10.1rc1" read as (0, 10, 11), which would have added the flag to a jaxlib not known to have it."""
    monkeypatch.setattr(_xla_flags.metadata, "version", lambda name: version)
    assert _xla_flags._jaxlib_release() == release


def _python(code: str, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"} | {"JAX_PLATFORMS": "cpu"} | env
    return subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, env=clean)


def test_import_sets_the_flags_and_jitted_reductions_equal_eager():
    """jax-ml/jax#39103's reproducer (a vmapped matrix-vector product, then a sum; float32, 32,769 rows) and a
    float32 `jit(jacrev)` of `x * x.sum(-1)` (2.97 off on jaxlib 0.10.2 without the flag) equal their eager values
    after `import hassejax` in a process whose XLA_FLAGS was empty."""
    code = """
import os, hassejax
from hassejax._xla_flags import correctness_flags
assert os.environ.get("XLA_FLAGS", "").split() == correctness_flags(), os.environ.get("XLA_FLAGS")
import jax, jax.numpy as jnp
x = jax.random.normal(jax.random.key(9), (16, 16), dtype=jnp.float32)
f = lambda x: x * x.sum(-1, keepdims=True)
assert float(jnp.abs(jax.jit(jax.jacrev(f))(x) - jax.jacfwd(f)(x)).max()) < 1e-5
i = jnp.arange(32_769, dtype=jnp.float32)
rows = jnp.stack((i, jnp.zeros_like(i), jnp.zeros_like(i)), axis=1)
g = lambda r: jax.vmap(lambda row: jnp.sum((jnp.eye(3, dtype=jnp.float32) @ row) ** 2))(r)
assert float(jax.jit(g)(rows)[-1]) == float(g(rows)[-1]) == 32_768.0**2
print("ok")
"""
    out = _python(code)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_jax_started_before_the_import_is_warned_and_a_users_flag_wins():
    late = _python(
        "import jax, os; jax.numpy.ones(1).block_until_ready(); import hassejax; print(os.environ['XLA_FLAGS'])"
    )
    if _xla_flags.correctness_flags():
        assert late.returncode != 0 and "RuntimeWarning" in late.stderr and "jax-ml/jax#39103" in late.stderr
        assert "XLA_FLAGS='--xla_cpu_experimental_ynn_fusion_type=-reduce'" in late.stderr
        late = _python(  # the warning aside, the flag is set for the processes this one starts
            "import jax, os, warnings; jax.numpy.ones(1).block_until_ready()\nwith warnings.catch_warnings():\n"
            "    warnings.simplefilter('ignore')\n    import hassejax\nprint(os.environ['XLA_FLAGS'])"
        )
        assert late.returncode == 0 and late.stdout.split() == _xla_flags.correctness_flags(), late.stderr[-2000:]
    else:
        assert late.returncode == 0, late.stderr[-2000:]
    mine = "--xla_cpu_experimental_ynn_fusion_type=-reduce,-dot"
    kept = _python("import os, hassejax; print(os.environ['XLA_FLAGS'])", XLA_FLAGS=mine)
    assert kept.returncode == 0 and kept.stdout.split() == [mine], kept.stderr[-2000:]
    assert _python("import jax; jax.numpy.ones(1); import hassejax", XLA_FLAGS=mine).returncode == 0  # no warning


def test_jacobian_flow_and_sweeps_stand_in_for_a_flag_that_came_too_late():
    """A fresh user: with JAX started before ``import hassejax`` (jaxlib 0.10.2's flag then cannot apply),
    ``jacobian_flow(mode="rev")`` reported 173 dependences its mask forbids (``reachability(M, 2)``; ``"fwd"`` was
    right). Its program, and a sweep's chunk program, now compile with :func:`correctness_compiler_options`; inside
    the caller's ``jit`` (no per-program options there) the flow is computed forward; under ``vmap`` with them."""
    code = """
import warnings
import jax, jax.numpy as jnp, numpy as np
jnp.ones(3).sum().block_until_ready()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import hassejax
from hassejax._xla_flags import correctness_compiler_options, correctness_flags
from hassejax.nn import Transformer, jacobian_flow
from hassejax.order import reachability
assert bool(correctness_compiler_options("cpu")) == bool(correctness_flags()), correctness_compiler_options("cpu")
assert correctness_compiler_options("gpu") == {}
M = np.random.default_rng(5).random((24, 24)) < 0.08
model = Transformer(2, 16, 4, vocab_size=5, num_positions=25, key=jax.random.key(0))
x = jax.random.normal(jax.random.key(50), (24, 16))
want = np.asarray(reachability(M, 2))
for mode in ("rev", "fwd"):
    assert (np.asarray(jacobian_flow(model, x, M, mode=mode)) == want).all(), mode
# a review: inside the caller's jit (JAX takes no per-program options there) it raised, or was wrong under jit over x
assert (np.asarray(jax.jit(lambda: jacobian_flow(model, x, M, mode="rev"))()) == want).all()
assert (np.asarray(jax.jit(lambda y: jacobian_flow(model, y, M, mode="rev"))(x)) == want).all()
assert (np.asarray(jax.vmap(lambda y: jacobian_flow(model, y, M, mode="rev"))(x[None])[0]) == want).all()
import equinox as eqx
class Layers(eqx.Module):  # a list in the model: its static part is not hashable (a review: a ValueError)
    ws: list
    def __call__(self, y):
        for w in self.ws:
            y = jnp.tanh(y @ w)
        return y
assert (np.asarray(jacobian_flow(Layers([jnp.eye(4)] * 2), jnp.ones((3, 4)), mode="rev")) == np.eye(3, dtype=bool)).all()
print("ok")
"""
    out = _python(code)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_a_sweeps_chunk_program_takes_the_stand_in(monkeypatch):
    """Where the correctness flag missed the process, a sweep's chunk program compiles with
    :func:`correctness_compiler_options` (a caller's own options still win), and computes what it computes eagerly."""
    import jax.numpy as jnp

    from hassejax.dynamics import sweeps

    if not _xla_flags.jit_takes_compiler_options():
        pytest.skip("this JAX's jit takes no compiler_options")
    monkeypatch.setattr(_xla_flags, "_MISSED", ["--a-flag"])
    assert _xla_flags.correctness_compiler_options("cpu") == _xla_flags._YNN_PROGRAM_OPTION
    assert _xla_flags.correctness_compiler_options("tpu") == {}
    seen = []
    real_jit = sweeps.jax.jit

    def spy(fun, *, compiler_options=None, **kwargs):  # jit_takes_compiler_options reads the signature
        seen.append(compiler_options)
        return real_jit(fun, compiler_options=compiler_options, **kwargs)

    monkeypatch.setattr(sweeps.jax, "jit", spy)
    runner, _ = sweeps._build_runner(lambda r: jnp.sum((jnp.eye(3) @ r) ** 2), None)
    key = next(iter(_xla_flags._YNN_PROGRAM_OPTION))
    assert len(seen) == 1 and seen[0][key] == _xla_flags._YNN_PROGRAM_OPTION[key]
    rows = jnp.arange(12.0).reshape(4, 3)
    assert jnp.allclose(runner(rows), jnp.sum(rows**2, axis=1))
    seen.clear()
    sweeps._build_runner(lambda r: r, None, {key: "LIBRARY_FUSION_TYPE_DOT"})
    assert seen[0][key] == "LIBRARY_FUSION_TYPE_DOT"  # the caller's
