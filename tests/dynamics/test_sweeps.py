"""Tests of hassejax.dynamics.sweeps (spec dynamics.md §4 "Sweeps", DESIGN.md "Scale")."""

import functools
import json
import operator
import os
import subprocess
import sys
import textwrap
import warnings

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest
from jaxtyping import config as jaxtyping_config

from hassejax import _xla_flags
from hassejax._xla_flags import sweep_compiler_options
from hassejax.dynamics import Softmax, solve_gaussian
from hassejax.dynamics._checked_saveat import saveat_checks_skipped
from hassejax.dynamics.sweeps import Sweep, _compile_probe, batch_size, sweep, sweep_program
from hassejax.errors import ParameterError

THRESHOLD = 1e6


def riccati_member(p, root_find=True):
    """y' = a y², y(0) = y0 on [0, 2]: blows up at t* = 1/(a y0) when a y0 > 1/2; event at y = 1e6.

    A one-member solve with throw=False, returning its own status: the sweep must not fail
    when some members blow up. With `root_find` the event time is located by Newton's
    method; otherwise the solve stops at the end of the step that crossed the threshold.

    The save time 1/4 is fixed and within [0, 2], so diffrax's two save-time checks are skipped
    as the library's solvers skip them (:mod:`hassejax.dynamics._checked_saveat`): the program
    then holds no host callback and JAX's persistent cache serves it again to every sweep of
    the same chunk shape (a sweep builds its runner per call; tracing, counted below, still
    happens each time).
    """
    a, y0 = p["a"], p["y0"]
    if root_find:
        event = diffrax.Event(lambda t, y, args, **kw: jnp.log(y) - jnp.log(THRESHOLD), optx.Newton(1e-10, 1e-10))
    else:
        event = diffrax.Event(lambda t, y, args, **kw: y > THRESHOLD)
    with saveat_checks_skipped(True):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, args: args * y**2),
            diffrax.Tsit5(),
            0.0,
            2.0,
            0.01,
            y0,
            args=a,
            event=event,
            saveat=diffrax.SaveAt(ts=jnp.array([0.25]), t1=True),
            stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-12),
            max_steps=100_000,
            throw=False,
        )
    blew_up = sol.result == diffrax.RESULTS.event_occurred
    # y(1/4) is before every blow-up here (t* = 1/(a y0) >= 1/2), so it is well conditioned.
    return {"t_final": sol.ts[-1], "y_quarter": sol.ys[0], "blew_up": blew_up, "steps": sol.stats["num_steps"]}


def assert_same(x, y, rtol=1e-12):
    """Discrete outputs equal exactly; floats to `rtol` (see the chunking test for why not bitwise)."""
    assert set(x) == set(y)
    for k in x:
        a, b = np.asarray(x[k]), np.asarray(y[k])
        assert a.shape == b.shape, k
        if a.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b, err_msg=k)
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=0, err_msg=k)


def riccati_member_step_end(p):
    return riccati_member(p, root_find=False)


def _params(B):
    return {"a": jnp.linspace(-1.0, 2.0, B), "y0": jnp.linspace(0.5, 1.0, B)}


@pytest.fixture(scope="module")
def whole():
    """The unchunked sweeps of `_params(10)` (default arguments), by member: the reference of several tests.

    A sweep traces its member at every call (about a second for these solves, the program then coming from the
    persistent cache), so the tests that compare with the unchunked sweep share these two."""
    p = _params(10)
    return {fn: sweep(fn, p, progress=False) for fn in (riccati_member, riccati_member_step_end)}


def test_sweep_matches_closed_form_and_per_member_loop(whole):
    p = _params(10)
    out = whole[riccati_member]
    a, y0 = np.asarray(p["a"]), np.asarray(p["y0"])
    blow = a * y0 * 2.0 > 1.0
    np.testing.assert_array_equal(np.asarray(out["blew_up"]), blow)
    # Closed form: y(t) = y0 / (1 − a y0 t); the event fires where y = 1e6.
    t_event = (1.0 - y0 / THRESHOLD) / (a * y0)
    np.testing.assert_allclose(np.asarray(out["t_final"])[blow], t_event[blow], rtol=1e-9)
    np.testing.assert_allclose(np.asarray(out["t_final"])[~blow], 2.0)
    np.testing.assert_allclose(np.asarray(out["y_quarter"]), y0 / (1.0 - 0.25 * a * y0), rtol=1e-8)
    assert blow.any() and (~blow).any()
    # Every member agrees with its solo run. (Not bitwise: under vmap the event's Newton
    # root finder iterates until every member has converged, so a member may take an
    # extra, harmless Newton step: differences at the root finder's tolerance.)
    solo_fn = jax.jit(riccati_member)
    for i in range(10):
        solo = solo_fn({"a": p["a"][i], "y0": p["y0"][i]})
        for k in ["blew_up", "steps"]:
            assert out[k][i] == solo[k]
        for k in ["t_final", "y_quarter"]:
            np.testing.assert_allclose(np.asarray(out[k][i]), np.asarray(solo[k]), rtol=1e-9, atol=0)


def test_chunked_equals_unchunked_and_padding_is_stripped(whole):
    """Chunking gives the same per-member results; the padded members never show.

    Not bit for bit in general: XLA compiles each chunk width separately (a width of one
    as scalar code, other widths with different vector remainders), so floating-point
    results can differ in the last bits (measured: up to ~1e-14 relative), and with the
    event's Newton root finder, which under vmap iterates until the whole chunk has
    converged, up to the root finder's tolerance. Discrete outputs (status, step counts)
    are identical.
    """
    p = _params(10)
    for member, chunks in [(riccati_member_step_end, [1, 3, 64]), (riccati_member, [4])]:
        unchunked = whole[member]
        assert bool(unchunked["blew_up"].any())
        for chunk in chunks:  # 3 and 4: the last chunk is padded
            part = sweep(member, p, chunk_size=chunk, progress=False)
            assert all(v.shape == (10,) for v in part.values())
            assert_same(part, unchunked)


def test_sweep_pytree_outputs_and_nested_params():
    params = {"m": jnp.arange(12.0).reshape(3, 2, 2), "s": (jnp.array([1.0, 2.0, 3.0]),)}

    def f(p):
        return {"trace": jnp.trace(p["m"]) * p["s"][0], "mat": p["m"] @ p["m"]}

    out = sweep(f, params, chunk_size=2, progress=False)
    m = np.arange(12.0).reshape(3, 2, 2)
    np.testing.assert_allclose(out["trace"], np.trace(m, axis1=1, axis2=2) * [1, 2, 3])
    np.testing.assert_allclose(out["mat"], m @ m)


def _square(p):
    return p["a"] ** 2


def test_progress_bar_counts_members(capsys):
    out = sweep(_square, _params(5), chunk_size=2, progress=True, desc="squares")
    np.testing.assert_allclose(out, np.linspace(-1.0, 2.0, 5) ** 2)
    err = capsys.readouterr().err
    assert "squares" in err and "5/5" in err
    sweep(_square, _params(5), progress=True, desc="one chunk")  # a single chunk: no bar
    assert "one chunk" not in capsys.readouterr().err


def test_sweep_program_is_the_chunk_program():
    p = _params(5)
    lowered = sweep_program(_square, p, chunk_size=2)
    compiled = lowered.compile()
    first_chunk = compiled({"a": p["a"][:2], "y0": p["y0"][:2]})
    np.testing.assert_allclose(first_chunk, np.asarray(sweep(_square, p, progress=False))[:2])
    assert "tensor<2xf64>" in lowered.as_text()  # one chunk of 2 members


@pytest.fixture
def no_typecheck():
    """Switch the runtime jaxtyping checks off, to reach the library's own validation."""
    jaxtyping_config.update("jaxtyping_disable", True)
    yield
    jaxtyping_config.update("jaxtyping_disable", False)


def test_batch_size_and_errors(no_typecheck):
    assert batch_size({"a": jnp.ones((4, 2)), "b": jnp.ones(4)}) == 4
    with pytest.raises(ParameterError, match=r"same leading \(batch\) length; got \['a'\]: 4, \['b'\]: 3"):
        sweep(riccati_member, {"a": jnp.ones(4), "b": jnp.ones(3)})
    with pytest.raises(ParameterError, match=r"leaf \['a'\] is a scalar"):
        sweep(riccati_member, {"a": jnp.array(1.0)})
    # a kernel swept as the batch: the error says its defaults need a batch axis too (review)
    kernels = Softmax(V=jnp.stack([jnp.eye(2)] * 3), A=jnp.stack([jnp.eye(2)] * 3))
    with pytest.raises(
        ParameterError, match=r"leaf \.beta is a scalar .* its defaults too \(e\.g\. `beta=jnp\.ones\(B\)`\)"
    ):
        sweep(lambda m: m.V, kernels)
    assert sweep(lambda m: m.V, Softmax(V=kernels.V, A=kernels.A, beta=jnp.ones(3)), progress=False).shape == (3, 2, 2)
    with pytest.raises(ParameterError, match=r"leaf \['a'\] is a float"):
        sweep(riccati_member, {"a": 1.0})
    with pytest.raises(ParameterError, match="at least one array leaf"):
        sweep(riccati_member, {})
    # object and string arrays (JAX's raw "not a valid dtype" before); typed PRNG keys are swept as they are
    for bad in (np.array([1.0, "a"], dtype=object), np.array(["a", "b"])):
        with pytest.raises(ParameterError, match=r"leaf \['a'\] has dtype (object|<U1)"):
            sweep(riccati_member, {"a": bad})
    keys = jax.random.split(jax.random.key(0), 3)
    assert sweep(lambda p: jax.random.normal(p["k"]), {"k": keys}, progress=False).shape == (3,)
    with pytest.raises(ParameterError, match="batch is empty"):
        sweep(riccati_member, {"a": jnp.ones((0, 2))})
    for bad in [0, -3, 2.5, True]:
        with pytest.raises(ParameterError, match=r"`chunk_size` must be a positive integer or None; got"):
            sweep(riccati_member, _params(4), chunk_size=bad)
    with pytest.raises(ParameterError, match="`devices` must hold at least one device"):
        sweep(riccati_member, _params(4), devices=[])
    d = jax.devices()[0]  # a fresh user: a bare AssertionError, an AttributeError and TypeErrors before
    for bad, what in (([d, d], "twice"), (["cpu"], "an entry 'cpu' \\(str\\)"), (3, "int 3"), (d, "got .*Device")):
        with pytest.raises(ParameterError, match=f"^`devices` must be a sequence of distinct jax devices.*{what}"):
            sweep(riccati_member, _params(4), devices=bad)
    with pytest.raises(ParameterError, match="`fn` must be callable"):
        sweep("solve", _params(4))
    for bad in ("abc", np.array(["a", "b", "c", "d"])):  # a string cost was "one entry per member ... shape ()"
        with pytest.raises(ParameterError, match=r"^`cost` must be real numbers, shape \(4,\), or a callable"):
            sweep(riccati_member, _params(4), cost=bad)
    with warnings.catch_warnings():  # costs near float64's largest: no overflow warning (a fresh user)
        warnings.simplefilter("error")
        out = sweep(lambda p: p["a"], _params(4), cost=np.array([1e308, 1e308, 1.0, 6e307]), progress=False)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(_params(4)["a"]))  # the caller's order
    for bad in ("no", None, 1):  # a truthy string showed the bar (a fresh user)
        with pytest.raises(ParameterError, match=r"^`progress` must be True or False; got"):
            sweep(riccati_member, _params(4), progress=bad)


_SUBPROCESS = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    sys.path.insert(0, {testdir!r})
    from test_sweeps import riccati_member, riccati_member_step_end, _params, _square
    from hassejax.dynamics.sweeps import sweep

    assert len(jax.devices()) == 4, jax.devices()
    p = _params(10)  # 10 members over 4 devices: padded to 12, stripped to 10

    def lists(out):  # exact: JSON writes a float's shortest repr, which reads back as the same float
        return {{k: np.asarray(v).tolist() for k, v in out.items()}}

    sharded = sweep(riccati_member, p, progress=False)
    shapes = sorted({{tuple(v.shape) for v in sharded.values()}})
    # Sharded and chunked (chunk_size 5 -> chunks of 8, 2 members per device, last padded).
    chunked = sweep(riccati_member_step_end, p, chunk_size=5, progress=False)
    # With 12 members (no padding) the output stays split: 3 members on each device.
    full = sweep(_square, _params(12), progress=False)
    shards = sorted((s.device.id, s.data.shape[0]) for s in full.addressable_shards)
    # Leaves committed to different devices (a review: one jitted program over both was refused), chunked and ordered.
    d = jax.devices()
    mixed = {{"a": jax.device_put(jnp.arange(6.0), d[1]), "b": jax.device_put(jnp.ones(6), d[0])}}
    committed = [np.asarray(sweep(lambda q: q["a"] + q["b"], mixed, progress=False, **kw)).tolist()
                 for kw in ({{"chunk_size": 4}}, {{"cost": np.arange(6.0)[::-1]}})]
    print(json.dumps({{"sharded": lists(sharded), "chunked": lists(chunked), "shapes": shapes, "shards": shards,
                      "committed": committed}}))
    """
)


def test_sharded_over_four_fake_cpu_devices_equals_unsharded(whole):
    """XLA flags are read at start-up, so the 4-device run happens in a fresh interpreter; the unsharded sweeps it
    is compared with are this process's (one device; the same XLA flags but the device count), computed once for
    the module rather than again in the child."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()
    env["JAX_PLATFORMS"] = "cpu"
    code = _SUBPROCESS.format(testdir=os.path.dirname(__file__))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    # Same chunk, sharded or not: the same statuses and step counts exactly, floats to rounding
    # (the SPMD program keeps vmap's semantics: loops run until the chunk's slowest member; XLA
    # may vectorise a 3-member shard differently from a 10-member batch, so the last bits can
    # differ: up to 4e-15 on values of order 1 were seen).
    ref = {k: np.asarray(v) for k, v in whole[riccati_member].items()}
    sharded = {k: np.asarray(v, dtype=ref[k].dtype) for k, v in res["sharded"].items()}
    assert set(sharded) == set(ref)
    for k in ref:
        assert sharded[k].shape == ref[k].shape == (10,), k
        if not np.issubdtype(ref[k].dtype, np.floating):
            np.testing.assert_array_equal(sharded[k], ref[k], err_msg=k)  # statuses, flags and step counts
    rel = max(
        float(np.max(np.abs(ref[k] - sharded[k]) / np.maximum(np.abs(ref[k]), 1.0)))
        for k in ref
        if np.issubdtype(ref[k].dtype, np.floating)
    )
    assert rel <= 1e-12, rel  # floats: a few ulps (relative, absolute below 1)
    ref = {k: np.asarray(v) for k, v in whole[riccati_member_step_end].items()}
    assert_same({k: np.asarray(v, dtype=ref[k].dtype) for k, v in res["chunked"].items()}, ref)
    assert res["shapes"] == [[10]]
    assert res["shards"] == [[0, 3], [1, 3], [2, 3], [3, 3]]
    assert res["committed"] == [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]] * 2
    p = _params(10)
    assert sharded["blew_up"].tolist() == (np.asarray(p["a"]) * np.asarray(p["y0"]) * 2 > 1).tolist()


@pytest.fixture(scope="module")
def chunks_of_four():
    """sweep(member, _params(B), chunk_size=4) for B = 10, 3, 5 (not a multiple of the chunk, smaller than it, then
    again), one `member` (riccati_member_step_end) for the three calls, and how many times each call traced it:
    the one-program test's subject and the held-Sweep test's reference (computed once for both)."""
    traces, out, count = [], {}, {}

    def member(p):
        traces.append(1)  # runs once per trace, never per member
        return riccati_member_step_end(p)

    for B in (10, 3, 5):
        traces.clear()
        out[B] = sweep(member, _params(B), chunk_size=4, progress=False)
        count[B] = len(traces)
    return out, count


def test_one_program_whatever_the_batch_size_and_no_cache_between_calls(whole, chunks_of_four):
    """A batch that is not a multiple of chunk_size, or smaller than it, traces `fn` once per call
    (one program: the last chunk is padded inside sweep) and equals the unchunked sweep; nothing is
    kept between calls (a second call traces again)."""
    out, traces = chunks_of_four
    for B in (10, 3):
        ref = whole[riccati_member_step_end] if B == 10 else sweep(riccati_member_step_end, _params(B), progress=False)
        assert traces[B] == 1, B
        assert_same(out[B], ref)
        assert np.asarray(out[B]["steps"]).shape == (B,)
    assert traces[5] == 1  # the same `fn` a third time: traced again
    assert "tensor<4xf64>" in sweep_program(_square, _params(3), chunk_size=4).as_text()  # B = 3 < 4: width 4


def test_held_sweep_compiles_once_across_calls_and_equals_sweep(no_typecheck, chunks_of_four):
    """A held Sweep traces `fn` once for batches of 10, 3 and 5 members (chunks of 4) and gives
    what sweep gives; a fresh Sweep traces again (the state is the object's, not the module's)."""
    traces = []

    def member(p):
        traces.append(1)
        return riccati_member_step_end(p)

    held = Sweep(member, chunk_size=4)
    for B in (10, 3, 5):  # against sweep(riccati_member_step_end, _params(B), chunk_size=4)
        assert_same(held(_params(B), progress=False), chunks_of_four[0][B])
    assert len(traces) == 1
    Sweep(member, chunk_size=4)(_params(3), progress=False)
    assert len(traces) == 2
    with pytest.raises(ParameterError, match="chunk_size"):
        Sweep(member, chunk_size=0)
    with pytest.raises(ParameterError, match="fn"):
        Sweep("member")


def gaussian_member(v):
    """The member of the two compiler-option tests (one function: their default-option chunk programs are one
    program, compiled once)."""
    sol = solve_gaussian(Softmax(V=v * jnp.eye(2), A=jnp.eye(2)), jnp.zeros(2), jnp.eye(2) / 2, t1=3.0)
    return {"status": sol.status, "steps": sol.stats.num_steps, "t_blowup": sol.t_blowup, "cov": sol.cov_final}


def test_compiler_options_reach_the_chunk_program_and_change_no_result(monkeypatch):
    """`compiler_options` (e.g. XLA's default level 3 in the suite's level-0 process) goes to the chunk
    program's jax.jit in sweep, Sweep and sweep_program; results equal the sweep without it (no FMA in
    the suite: every level rounds alike)."""

    def square(v):
        return v * v

    vs = jnp.linspace(-1.0, 3.0, 6)
    opts = {"xla_backend_optimization_level": 3}
    plain = sweep(gaussian_member, vs, progress=False)
    seen = []  # (name of the jitted function, its compiler_options): the chunk program is vmap(fn)
    real_jit = jax.jit

    def spy(fun, *, compiler_options=None, **kwargs):
        seen.append((getattr(fun, "__name__", ""), compiler_options))
        return real_jit(fun, compiler_options=compiler_options, **kwargs)

    monkeypatch.setattr(jax, "jit", spy)
    for out in (
        sweep(gaussian_member, vs, progress=False, compiler_options=opts),
        Sweep(gaussian_member, compiler_options=opts)(vs, progress=False),
    ):
        for k in plain:
            np.testing.assert_array_equal(np.asarray(out[k]), np.asarray(plain[k]), err_msg=k)
    sweep_program(square, vs, compiler_options=opts).compile()
    want = sweep_compiler_options(jax.default_backend()) | opts  # on top of hassejax's own
    assert seen.count(("gaussian_member", want)) == 2 and seen.count(("square", want)) == 1, seen


def test_sweeps_compile_with_hassejax_options_unless_the_caller_overrides_them(monkeypatch):
    """Without `compiler_options` the chunk program gets hassejax's per-backend options (on the CPU with
    jaxlib 0.6–0.10: XLA's legacy loop emitters); a name the caller sets wins. Either way the same
    statuses and step counts, floats equal to rounding."""
    ours = sweep_compiler_options(jax.default_backend())
    if jax.default_backend() == "cpu" and (0, 6) <= _xla_flags._jaxlib_version() <= (0, 10):
        assert ours == {"xla_cpu_use_fusion_emitters": False}
    vs = jnp.linspace(-1.0, 3.0, 6)
    seen = []
    real_jit = jax.jit

    def spy(fun, *, compiler_options=None, **kwargs):
        seen.append((getattr(fun, "__name__", ""), compiler_options))
        return real_jit(fun, compiler_options=compiler_options, **kwargs)

    monkeypatch.setattr(jax, "jit", spy)
    default = sweep(gaussian_member, vs, progress=False)
    xla = Sweep(gaussian_member, compiler_options={"xla_cpu_use_fusion_emitters": True})(vs, progress=False)
    chunk_programs = [opts for name, opts in seen if name == "gaussian_member"]  # not the option check's probe
    assert chunk_programs == [ours or None, {"xla_cpu_use_fusion_emitters": True}], seen
    for k in ("status", "steps"):
        np.testing.assert_array_equal(np.asarray(default[k]), np.asarray(xla[k]), err_msg=k)
    for k in ("t_blowup", "cov"):
        np.testing.assert_allclose(np.asarray(default[k]), np.asarray(xla[k]), rtol=1e-12, err_msg=k)


@pytest.mark.parametrize(
    ("platform_name", "version", "want"),
    [
        ("cpu", (0, 10), {"xla_cpu_use_fusion_emitters": False}),
        ("cpu", (0, 6), {"xla_cpu_use_fusion_emitters": False}),
        ("cpu", (0, 5), {}),  # no such option before jaxlib 0.6
        ("cpu", (0, 11), {}),  # not checked yet
        ("cpu", None, {}),
        ("gpu", (0, 10), {}),
        ("tpu", (0, 10), {}),
    ],
)
def test_sweep_compiler_options_per_backend_and_jaxlib(monkeypatch, platform_name, version, want):
    monkeypatch.setattr(_xla_flags, "_jaxlib_version", lambda: version)
    assert sweep_compiler_options(platform_name) == want


def test_compiler_options_that_xla_would_refuse_are_refused_by_name(no_typecheck):
    """Checked before any program is built (a held Sweep at construction): the type here, names and
    values by XLA on a trivial program."""
    bad_type = [
        [("xla_backend_optimization_level", 3)],
        {3: 1},
        "level 3",
        3.5,
        {"xla_backend_optimization_level": None},
    ]
    bad_for_xla = [{"xla_no_such_option": 1}, {"xla_backend_optimization_level": "high"}, {"--xla_cpu_max_isa": "AVX"}]
    for bad in bad_type + bad_for_xla:
        why = "refused by XLA" if bad in bad_for_xla else "must be None or a mapping"
        with pytest.raises(ParameterError, match=f"`compiler_options`.*{why}"):
            sweep(lambda v: v, jnp.arange(3.0), progress=False, compiler_options=bad)
        with pytest.raises(ParameterError, match=f"`compiler_options`.*{why}"):
            Sweep(lambda v: v, compiler_options=bad)
        with pytest.raises(ParameterError, match=f"`compiler_options`.*{why}"):
            sweep_program(lambda v: v, jnp.arange(3.0), compiler_options=bad)


@pytest.mark.parametrize("order", [(True, 1), (1.0, True)])
def test_the_compiler_options_check_tells_equal_values_of_other_types_apart(order):
    """`True == 1 == 1.0` in Python but XLA takes only the bool for a bool option: the check's cache must
    not carry one value's verdict to another (a fresh-user review found 1 let through after True, and
    True refused after 1.0)."""
    _compile_probe.cache_clear()
    for value in order:
        opts = {"xla_cpu_use_fusion_emitters": value}
        if type(value) is bool:
            out = sweep(lambda v: v + 1, jnp.arange(3.0), progress=False, compiler_options=opts)
            np.testing.assert_array_equal(np.asarray(out), [1.0, 2.0, 3.0])
        else:
            with pytest.raises(ParameterError, match="`compiler_options`.*refused by XLA"):
                sweep(lambda v: v + 1, jnp.arange(3.0), progress=False, compiler_options=opts)


def _lowerings(block):
    """How many programs JAX lowers (new to this process, whether or not the persistent cache then has them)
    while `block()` runs."""
    count = [0]
    listening = [True]

    def listener(event, duration, **kwargs):
        if listening[0] and event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            count[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        result = block()
    finally:
        listening[0] = False
    return count[0], result


def _three_leaves(p):
    return {"a": p["x"] * 2.0, "b": jnp.stack([p["x"], p["y"]]), "c": jnp.outer(p["v"], p["v"])}


@pytest.mark.parametrize("on_device", [False, True])
def test_a_held_sweep_builds_few_programs_for_a_new_batch_size(no_typecheck, on_device):
    """A held Sweep called with a new host batch size builds no new chunk program and pads, slices and orders its
    inputs with NumPy, merging the outputs in one program (and with a cost putting them back in one more), not one
    eager program per leaf and operation (before: 4 programs for a new host batch of 3 leaves). Results, host or
    device batch, equal the member-by-member loop, in the caller's order."""
    held = Sweep(_three_leaves, chunk_size=8)

    def batch(B):
        b = {
            "x": np.arange(B, dtype=float),
            "y": np.linspace(1.0, 2.0, B),
            "v": np.arange(3 * B, dtype=float).reshape(B, 3),
        }
        return jax.tree_util.tree_map(jnp.asarray, b) if on_device else b

    held(batch(16), progress=False)  # the chunk program
    for B, cost in ((21, None), (37, None), (29, np.arange(29.0)[::-1])):
        params = batch(B)
        built, out = _lowerings(functools.partial(held, params, cost=cost, progress=False))
        if not on_device:  # the merge (and with a cost the outputs' reorder); device leaves are padded and sliced
            assert built <= 1 + (cost is not None), (B, built)  # on their own devices, eagerly (committed apart)
        ref = [_three_leaves(jax.tree_util.tree_map(operator.itemgetter(i), params)) for i in range(B)]
        for key in ("a", "b", "c"):
            np.testing.assert_array_equal(np.asarray(out[key]), np.stack([np.asarray(r[key]) for r in ref]))
