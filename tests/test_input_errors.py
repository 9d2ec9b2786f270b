"""Bad input gets a clear error naming the argument, never a silent answer or a deep traceback.

Each case here was once accepted silently (a negative tolerance reported `completed` past the
blow-up, a NaN parameter ran 100,000 steps to `max_steps_reached`, a NaN covariance had "no
blow-up") or crashed inside JAX, Equinox or matplotlib.
"""

import functools
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.cli import main as cli_main
from hassejax.dynamics import (
    L2,
    AbstractAttention,
    Softmax,
    blowup_time_closed_form,
    solve_gaussian,
    solve_particles,
    status_names,
)
from hassejax.errors import MaskError, ParameterError, TaskError
from hassejax.masks import causal
from hassejax.nn.attention import masked_softmax
from hassejax.tasks import audit, block_generation, butterfly, sparsify

A = jnp.array([[1.0, 0.5], [0.0, -1.0]])
S0 = jnp.eye(2) / 2
P = Softmax(V=jnp.eye(2), A=A)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rtol": -1.0}, r"`rtol` must be a finite number in \[0, 1\)"),
        ({"rtol": 2.0}, r"`rtol` must be a finite number in \[0, 1\): a relative tolerance of 1 or more"),
        ({"atol": float("nan")}, "`atol` must be a finite number > 0"),
        ({"rtol": 0.0, "atol": 0.0}, "`atol` must be > 0"),
        ({"atol": 0.0}, "`atol` must be > 0"),
        ({"max_steps": 0}, "`max_steps` must be a positive integer"),
        ({"max_steps": 1.5}, "`max_steps` must be a positive integer"),
        ({"dt0": -0.1}, "`dt0` must be a finite number > 0"),
        ({"ts": jnp.array([0.0, jnp.nan])}, "`ts` must be finite"),
    ],
)
def test_solver_settings_are_checked(kwargs, message, no_typecheck):
    with pytest.raises(ParameterError, match=message):
        solve_gaussian(P, jnp.zeros(2), S0, t1=1.0, **kwargs)
    x0 = jnp.array([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ParameterError, match=message):
        solve_particles(P, x0, t1=1.0, **kwargs)


@pytest.mark.parametrize(
    ("params", "name"),
    [
        (Softmax(V=jnp.eye(2), A=A, beta=jnp.nan), "model.beta"),
        (Softmax(V=jnp.eye(2), A=A.at[0, 0].set(jnp.inf)), "model.A"),
        (Softmax(V=jnp.eye(2).at[1, 1].set(jnp.nan), A=A), "model.V"),
    ],
)
def test_non_finite_parameters_are_rejected(params, name):
    with pytest.raises(ParameterError, match=rf"`{name}` must be finite"):
        solve_gaussian(params, jnp.zeros(2), S0, t1=1.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"t1": "1.0"}, "`t1` must be a real number; got the string '1.0'"),
        ({"t0": "0"}, "`t0` must be a real number"),
        ({"rtol": "1e-6"}, r"`rtol` must be a finite number in \[0, 1\); got the string '1e-6'"),
        ({"atol": "1e-6"}, "`atol` must be a finite number > 0"),
        ({"dt0": "0.1"}, "`dt0` must be a finite number > 0"),
        ({"ts": "0 1"}, "`ts` must be an array of real save times"),
        ({"size_threshold": "1e3"}, "`size_threshold` must be a real number > 0"),
        ({"converge_tol": True}, "`converge_tol` must be a real number > 0"),
    ],
)
def test_solver_arguments_of_the_wrong_type_are_named(kwargs, message, no_typecheck):
    """Strings for times and tolerances were a NumPy ufunc TypeError; now the argument is named."""
    kwargs = {"t1": 1.0, **kwargs}
    with pytest.raises(ParameterError, match=message):
        solve_gaussian(P, jnp.zeros(2), S0, **kwargs)
    with pytest.raises(ParameterError, match=message):
        solve_particles(P, jnp.eye(2), **kwargs)


def test_size_threshold_at_or_below_the_initial_size_is_refused():
    """A threshold the size starts above can never be crossed upwards: the size event was off without a
    word (the solve ran to t1 and reported `completed` past the blow-up at t* = 1). Refused when concrete;
    a traced one (vmap) flags its member `invalid_threshold` (tests/dynamics/test_compile_cache.py). The values
    are printed in full (`1 + 1e-14` was shown as `1`, beside `tr Σ0 = 1`), and a NaN is named as such.
    `converge_tol = inf` likewise could never fire."""
    with pytest.raises(ParameterError, match=r"`size_threshold` must exceed the initial size tr Σ0 = 1\.0 .*got 0\.5"):
        solve_gaussian(P, jnp.zeros(2), S0, t1=5.0, size_threshold=0.5)
    with pytest.raises(
        ParameterError, match=r"`size_threshold` must exceed the initial size tr Σ0 = 2\.0 .*got 2\.0\."
    ):
        solve_gaussian(P, jnp.zeros(2), factor0=jnp.eye(2), t1=5.0, size_threshold=2.0)
    x0 = jnp.array([[1.0, 0.0], [-1.0, 0.0]])  # λ0 = (1/n) Σ ‖x_i − x̄‖² = 1
    with pytest.raises(ParameterError, match=r"`size_threshold` must exceed the initial size λ0 .* = 1\.0 "):
        solve_particles(P, x0, t1=1.0, size_threshold=0.9)
    with pytest.raises(ParameterError, match=r"tr Σ0 = 1\.0 .*got 1\.00000000000001\."):
        solve_gaussian(P, jnp.zeros(2), S0, t1=5.0, size_threshold=1 + 1e-14)
    with pytest.raises(ParameterError, match=r"`size_threshold` must be a number, not NaN; got nan\."):
        solve_gaussian(P, jnp.zeros(2), S0, t1=5.0, size_threshold=np.nan)
    with pytest.raises(ParameterError, match=r"`converge_tol` must be finite .*; got inf"):
        solve_gaussian(P, jnp.zeros(2), S0, t1=1.0, converge_tol=np.inf)
    with pytest.raises(ParameterError, match=r"`converge_tol` must be finite"):
        solve_particles(P, x0, t1=1.0, converge_tol=float("inf"))
    # just above the initial size: accepted, and the event fires (the blow-up of V = I, A = I at t* = 1),
    # undetermined (no two decades below the threshold for the decade test)
    sol = solve_gaussian(Softmax(V=jnp.eye(2), A=jnp.eye(2)), jnp.zeros(2), S0, t1=5.0, size_threshold=1.5)
    assert status_names(sol.status) == "undetermined" and float(sol.t_final) < 1.0


class _ZeroDim(AbstractAttention):
    """A kernel with no token dimension (d = 0): the solvers must refuse it by name."""

    @property
    def d(self):
        return 0

    def velocity(self, t, x, keys=None, mask=None):
        return x

    def gaussian_affine(self, t, mean, cov, factor=None):
        return cov, mean


def test_kernel_and_state_inputs_are_named(no_typecheck):
    """`V="I"` was `invalid literal for int()`, d = 0 a `zero-size array` deep in the solve."""
    with pytest.raises(ParameterError, match="`V` must be a real array.*the string 'I'"):
        Softmax(V="I", A=A)
    with pytest.raises(
        ParameterError, match=r"`V` of Softmax must have shape \(d, d\) \(square, d >= 1\); got shape \(0, 0\)"
    ):
        Softmax(V=jnp.zeros((0, 0)), A=jnp.zeros((0, 0)))
    with pytest.raises(ParameterError, match="token dimension d of model must be >= 1"):
        solve_gaussian(_ZeroDim(), jnp.zeros(0), jnp.zeros((0, 0)), t1=1.0)
    with pytest.raises(ParameterError, match="token dimension d of model must be >= 1"):
        solve_particles(_ZeroDim(), jnp.zeros((3, 0)), t1=1.0)
    with pytest.raises(ParameterError, match="`x0` must be a real array of tokens"):
        solve_particles(P, "abc", t1=1.0)
    with pytest.raises(ParameterError, match="`mean0` must be a real array"):
        solve_gaussian(P, "0 0", S0, t1=1.0)


def test_transformer_refuses_float_token_ids(no_typecheck):
    """Float ids were `Indexer must have integer or boolean type` from inside JAX."""
    import jax

    from hassejax.nn import Transformer

    model = Transformer(1, 8, 2, 5, 4, key=jax.random.PRNGKey(0))
    mask = jnp.tril(jnp.ones((4, 4), bool))
    with pytest.raises(ParameterError, match="`token_ids` must be integer ids.*float"):
        model(jnp.array([0.0, 1.0, 2.0, 3.0]), jnp.arange(4), mask)
    with pytest.raises(ParameterError, match="`position_ids` must be integer ids"):
        model(jnp.arange(4), jnp.arange(4.0), mask)
    assert model(jnp.arange(4), jnp.arange(4), mask).shape == (4, 5)


def test_valid_settings_still_solve_and_jit():
    """The checks skip tracers: a jitted solve is unchanged (t* = 0.97014 for this A, Σ0 = I/2)."""
    import jax

    sol = solve_gaussian(P, jnp.zeros(2), S0, t1=10.0)
    want = float(blowup_time_closed_form(S0, A, 1.0))
    assert abs(float(sol.t_blowup) - want) / want < 1e-5
    f = jax.jit(lambda a: solve_gaussian(Softmax(V=jnp.eye(2), A=a), jnp.zeros(2), S0, t1=10.0).t_blowup)
    assert abs(float(f(A)) - want) / want < 1e-5


def test_particles_need_a_token():
    with pytest.raises(ParameterError, match="at least one token"):
        solve_particles(P, jnp.zeros((0, 2)), t1=1.0)


@pytest.mark.parametrize(
    ("sigma0", "v", "message"),
    [
        (jnp.full((2, 2), jnp.nan), 1.0, "`Sigma0` must be finite"),
        (S0, jnp.nan, "`v` must be finite"),
        (-jnp.eye(2), 1.0, "positive semidefinite"),
        (jnp.array([[1.0, 0.5], [0.0, 1.0]]), 1.0, "symmetric"),
    ],
)
def test_closed_form_checks_its_covariance(sigma0, v, message):
    with pytest.raises(ParameterError, match=message):
        blowup_time_closed_form(sigma0, A, v)


def test_closed_form_allows_a_singular_covariance():
    t = float(blowup_time_closed_form(jnp.diag(jnp.array([1.0, 0.0])), jnp.eye(2), 1.0))
    assert t == pytest.approx(0.5)  # λ* = λ_max(Σ0^{1/2} 2I Σ0^{1/2}) = 2


def test_status_names_range():
    assert status_names(2) == "blow_up" and list(status_names(np.array([0, 1]))) == ["completed", "converged"]
    for bad in (-1, 99):
        with pytest.raises(ParameterError, match=r"`codes` must lie in 0\.\."):
            status_names(bad)
    with pytest.raises(ParameterError, match="integer Status codes"):
        status_names("x")


def test_masked_softmax_mask_checks(no_typecheck):
    logits = jnp.zeros((2, 2))
    with pytest.raises(MaskError, match="must be Boolean"):
        masked_softmax(logits, jnp.ones((2, 2)))
    with pytest.raises(MaskError, match="does not broadcast"):
        masked_softmax(logits, jnp.ones((3, 3), bool))
    w = masked_softmax(logits, jnp.array([[True, False], [False, False]]))
    np.testing.assert_array_equal(np.asarray(w), [[1.0, 0.0], [0.0, 0.0]])  # the empty row is zeros


def test_task_checks(no_typecheck):
    with pytest.raises(TaskError, match="`keep_last_block` must be True or False"):
        block_generation(8, 2, keep_last_block="no")
    with pytest.raises(TaskError, match="got ArrayImpl"):
        audit(causal(4))
    with pytest.raises(TaskError, match=r"merge it first, family\.merge\(\)"):
        sparsify(butterfly(4))


@pytest.mark.parametrize(
    "argv", [["analyze", "causal(n=4)", "--png", "out.txt"], ["derive", "butterfly", "--n", "4", "--png", "out.json"]]
)
def test_cli_rejects_a_figure_path_it_cannot_write(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli_main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""  # rejected before any output
    assert "--png" in err and "image format" in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())


def test_reproduce_rejects_an_unwritable_out_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, str(root / "experiments" / "reproduce.py"), "--only", "layer_graph", "--out", str(blocker / "sub")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "is not a writable folder" in proc.stderr and "Traceback" not in proc.stderr
    # a file where the experiment's own folder goes (out/NAME): said before any experiment runs (was a traceback
    # and "FAILED: FileExistsError" in the summary)
    (tmp_path / "layer_graph").write_text("")
    proc = subprocess.run(
        [sys.executable, str(root / "experiments" / "reproduce.py"), "--only", "layer_graph", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "holds a file where an experiment's folder goes: layer_graph" in proc.stderr


def test_float32_blow_up_is_found_and_tight_rtol_warns():
    """float32 cannot follow a blow-up to 1e8 x tr Σ0 (the time resolution runs out): the default
    size event is 1e4 x tr Σ0 there, and rtol below ~5 ulps warns instead of silently ending
    in max_steps_reached."""
    a32, s32 = A.astype(jnp.float32), S0.astype(jnp.float32)
    p32 = Softmax(V=jnp.eye(2, dtype=jnp.float32), A=a32)
    sol = solve_gaussian(p32, jnp.zeros(2, jnp.float32), s32, t1=10.0, rtol=1e-6, atol=1e-6)
    assert sol.cov.dtype == jnp.float32
    assert status_names(sol.status) == "blow_up"
    want = float(blowup_time_closed_form(S0, A, 1.0))
    assert abs(float(sol.t_blowup) - want) / want < 1e-5
    with pytest.warns(RuntimeWarning, match="below what float32 resolves") as record:
        solve_gaussian(p32, jnp.zeros(2, jnp.float32), s32, t1=10.0, max_steps=50)
    assert [w.filename for w in record] == [__file__]  # the caller's line, not a frame inside hassejax
    solve = functools.partial(solve_gaussian, p32, cov0=s32, t1=10.0, rtol=1e-9, atol=1e-9, max_steps=50)
    with pytest.warns(RuntimeWarning, match="below what float32 resolves") as record:
        jax.vmap(solve)(jnp.zeros((2, 2), jnp.float32))  # through JAX's frames (was jax/_src/.../batching.py)
    assert [w.filename for w in record] == [__file__]


def test_mixed_precision_inputs_take_the_widest_dtype():
    """A float32 mean or float32 tokens with float64 parameters solve in float64 (it used to crash in diffrax)."""
    sol = solve_gaussian(P, jnp.zeros(2, jnp.float32), S0, t1=10.0)
    assert sol.cov.dtype == jnp.float64 and status_names(sol.status) == "blow_up"
    want = float(blowup_time_closed_form(S0, A, 1.0))
    assert abs(float(sol.t_blowup) - want) / want < 1e-6
    ps = solve_particles(Softmax(V=-jnp.eye(2), A=jnp.eye(2)), jnp.ones((4, 2), jnp.float32), t1=1.0)
    assert ps.xs.dtype == jnp.float64
    assert status_names(ps.status) in ("completed", "converged")


def test_hasse_diagram_under_jit_says_why():
    import jax

    from hassejax.order import HasseDiagram

    with pytest.raises(MaskError, match="host-side networkx graph"):
        jax.jit(lambda m: HasseDiagram.from_mask(m).num_classes)(jnp.eye(3, dtype=bool))


def test_thresholds_in_other_real_dtypes_are_read_as_numbers():
    """A bfloat16 threshold (NumPy kind ``V``) was refused as "not a real number", a Python int beyond
    int64 (kind ``O``) crashed in a NumPy ufunc: both are real numbers, solved as their float value."""
    grow = L2(V=jnp.eye(2), Q=jnp.eye(2), K=jnp.eye(2))  # exponential growth: reaches 1e20 near t = 24
    ref = solve_gaussian(grow, jnp.ones(2), S0, t1=60.0, size_threshold=1e20)
    big = solve_gaussian(grow, jnp.ones(2), S0, t1=60.0, size_threshold=10**20)
    assert status_names(big.status) == status_names(ref.status) == "diverge"
    assert float(big.t_final) == float(ref.t_final)
    blow = Softmax(V=jnp.eye(2), A=jnp.eye(2))
    kw = {"t1": 5.0, "blowup_estimate": "threshold"}
    bf = solve_gaussian(blow, jnp.zeros(2), S0, size_threshold=jnp.asarray(1e4, jnp.bfloat16), **kw)
    ref_bf = solve_gaussian(blow, jnp.zeros(2), S0, size_threshold=float(jnp.asarray(1e4, jnp.bfloat16)), **kw)
    assert float(bf.t_blowup) == float(ref_bf.t_blowup)
    with pytest.raises(ParameterError, match="`size_threshold` must be a real number > 0"):
        solve_gaussian(blow, jnp.zeros(2), S0, size_threshold=10**400, **kw)


def test_size_threshold_checks_under_jit_and_in_the_state_dtype(no_typecheck):
    """Found by a fresh-user review: (a) under ``jax.jit`` with NumPy inputs the threshold check read `Σ0`
    after its conversion to a (traced) JAX array and skipped itself, so the size event was off without a
    word; (b) the check compared in float64 while the solve runs in float32, where `2.0000001` is `2.0`
    (= tr Σ0) and the event cannot fire; (c) `converge_tol = 1e39` became `inf` in float32 (refused when
    passed as `inf`) and a threshold beyond float32 warned about the overflowing cast."""
    import jax

    from hassejax.dynamics import LowRankSoftmax, solve_low_rank_gaussian, solve_low_rank_particles

    eye = np.eye(2, dtype=np.float32)
    grow = L2(V=10 * eye, Q=eye, K=eye)
    kw = {"t1": 100.0, "rtol": 1e-6, "atol": 1e-6}
    match = r"`size_threshold` must exceed the initial size"
    with pytest.raises(ParameterError, match=match):
        jax.jit(lambda: solve_gaussian(grow, np.zeros(2, np.float32), eye, size_threshold=1.0, **kw))()
    with pytest.raises(ParameterError, match=match):
        jax.jit(lambda: solve_gaussian(grow, np.zeros(2, np.float32), factor0=eye, size_threshold=2.0, **kw))()
    head = LowRankSoftmax(np.eye(1, 2), np.eye(1, 2), np.eye(1, 2), np.eye(2, 1))
    with pytest.raises(ParameterError, match=match):
        jax.jit(lambda: solve_low_rank_gaussian(head, np.zeros(2), np.eye(2), t1=1.0, size_threshold=2.0))()
    x = np.array([[[1.0, 0.0], [-1.0, 0.0]]])  # one group, λ0 = 1
    with pytest.raises(ParameterError, match=match):
        jax.jit(lambda: solve_low_rank_particles(head, x, np.ones((1, 2), bool), t1=1.0, size_threshold=1.0))()
    with pytest.raises(ParameterError, match=match + r".*rounding of float32"):
        solve_gaussian(grow, np.zeros(2, np.float32), eye, size_threshold=2.0000001, **kw)
    # float64 resolves it: accepted, and the event fires at once (undetermined: no two decades to time; softmax,
    # as L2 with invertible K has a finite growth bound and reads diverge at any crossing)
    sol = solve_gaussian(
        Softmax(V=10 * np.eye(2), A=np.eye(2)), np.zeros(2), np.eye(2), t1=1.0, size_threshold=2.0000001
    )
    assert status_names(sol.status) == "undetermined" and float(sol.t_final) < 1e-3
    with pytest.raises(ParameterError, match=r"`converge_tol` must be finite in the state's dtype float32"):
        solve_gaussian(grow, np.zeros(2, np.float32), eye, converge_tol=1e39, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no NumPy overflow warning: beyond float32 is inf there (no size event)
        big = solve_gaussian(grow, np.zeros(2, np.float32), eye, size_threshold=1e39, **kw)
    inf = solve_gaussian(grow, np.zeros(2, np.float32), eye, size_threshold=np.inf, **kw)
    assert status_names(big.status) == status_names(inf.status) == "non_finite"
    assert float(big.t_final) == float(inf.t_final)
    with pytest.raises(ParameterError, match=r"`size_threshold` must be .*; got a number beyond float64's range"):
        solve_gaussian(grow, np.zeros(2, np.float32), eye, size_threshold=10**400, **kw)


def test_converge_tol_below_the_state_dtypes_smallest_normal_is_refused():
    """A concrete `converge_tol` that is 0 (1e-50) or subnormal (1e-40) in a float32 state, or subnormal (1e-310) in a
    float64 one, has `log(tol) = -inf` in the program: the steady-state event was off without a word."""
    eye = np.eye(2, dtype=np.float32)
    model = Softmax(V=eye, A=-eye)
    kw = {"t1": 1.0, "rtol": 1e-6, "atol": 1e-6}
    match = r"`converge_tol` must be at least the smallest normal number of the state's dtype float32, 1\.1754943508222875e-38"
    with pytest.raises(ParameterError, match=match + r" \(below it the value is 0 there.*got 1e-50"):
        solve_gaussian(model, np.zeros(2, np.float32), eye, converge_tol=1e-50, **kw)
    with pytest.raises(ParameterError, match=match + r" \(below it the value is subnormal there.*or use a float64"):
        solve_particles(model, np.array([[1.0, 0.0], [0.0, 1.0]], np.float32), converge_tol=1e-40, **kw)
    with pytest.raises(
        ParameterError, match=r"dtype float64, 2\.2250738585072014e-308 .*subnormal.*no steady-state event\.$"
    ):
        solve_gaussian(Softmax(V=np.eye(2), A=-np.eye(2)), np.zeros(2), np.eye(2), t1=1.0, converge_tol=1e-310)
    # the value the message suggests is accepted (a review: it printed 1.175e-38, itself below the smallest normal)
    sol = solve_gaussian(model, np.zeros(2, np.float32), eye, converge_tol=float(np.finfo(np.float32).tiny), **kw)
    assert int(sol.status) >= 0


def test_atol_below_the_state_dtypes_smallest_normal_is_refused():
    """A concrete `atol` that is 0 (1e-50) or subnormal (1e-40, flushed to 0 by XLA) in a float32 state ended the solve
    ``non_finite`` at `t0` (a zero mean admits no step under a zero error budget, as `atol = 0`, which is refused);
    now refused by name in every solver; a traced one (one per member) is ``invalid_tolerance`` for that member."""
    eye = np.eye(2, dtype=np.float32)
    model = Softmax(V=eye, A=eye)
    match = r"`atol` must be at least the smallest normal number of the state's dtype float32, 1\.1754943508222875e-38"
    with pytest.raises(ParameterError, match=match + r" \(below it the value is 0 there.*got 1e-50"):
        solve_gaussian(model, np.zeros(2, np.float32), eye / 4, t1=5.0, rtol=1e-5, atol=1e-50)
    with pytest.raises(
        ParameterError, match=match + r" \(below it the value is subnormal, which XLA.*float64 state\.$"
    ):
        solve_particles(model, np.array([[1.0, 0.0], [0.0, 1.0]], np.float32), t1=1.0, rtol=1e-5, atol=1e-40)
    with pytest.raises(ParameterError, match=r"dtype float64, 2\.2250738585072014e-308 .*subnormal.*got 1e-310\. Pass"):
        solve_gaussian(Softmax(V=np.eye(2), A=np.eye(2)), np.zeros(2), np.eye(2) / 4, t1=5.0, atol=1e-310)
    # the value the message suggests is accepted, and solves as a small atol does (t* = 2 from Σ0 = I/4); so is a
    # decimal that rounds to it in float32 (a review: it was compared before the cast, refused and called subnormal)
    tiny = float(np.finfo(np.float32).tiny)
    for value in (tiny, 1.17549435e-38):
        sol = solve_gaussian(model, np.zeros(2, np.float32), eye / 4, t1=5.0, rtol=1e-5, atol=value)
        assert status_names(sol.status) == "blow_up" and abs(float(sol.t_blowup) - 2.0) < 1e-3
    # beyond float32's range: inf there (a review: atol = 1e39 ended non_finite at t = 1.11, before t* = 2)
    for name, message in (
        ("atol", "must be finite in the state's dtype float32; got 1e\\+39"),
        ("rtol", "must be a finite number in \\[0, 1\\)"),
    ):
        with pytest.raises(ParameterError, match=rf"`{name}` {message}"):
            solve_gaussian(model, np.zeros(2, np.float32), eye / 4, t1=5.0, **{"rtol": 1e-5, "atol": 1e-6, name: 1e39})
    # traced: the member below the smallest normal is flagged, the other solves as alone
    sols = jax.vmap(
        lambda a: solve_gaussian(model, jnp.zeros(2, jnp.float32), jnp.asarray(eye / 4), t1=5.0, rtol=1e-5, atol=a)
    )(jnp.asarray([1e-6, 1e-40], jnp.float32))
    assert list(status_names(sols.status)) == ["blow_up", "invalid_tolerance"]
    assert abs(float(sols.t_blowup[0]) - 2.0) < 1e-3


def test_format_class_names_and_contains_positions_name_the_bad_value():
    """A fresh-user review: ``format_class([0, 1], names=['a'])`` raised a bare IndexError, and
    ``IntervalMask.contains`` blamed the (valid) dtype for a position out of range."""
    from hassejax.masks import structured
    from hassejax.order import format_class

    assert format_class([1, 0], names=["a", "b"]) == "{a, b}"
    with pytest.raises(MaskError, match=r"`names` must name every member; it has no name for position 1\."):
        format_class([0, 1], names=["a"])
    with pytest.raises(MaskError, match=r"`members` must be positions, integers >= 0; got -1 \(int\)\."):
        format_class([-1, 0], names=["a", "b"])
    assert format_class([1], {1: "y"}) == "{y}"  # a mapping from positions (a diff review: it worked before)
    with pytest.raises(MaskError, match=r"no name for position 2\."):
        format_class([2], {1: "y"})
    m = structured.causal(2)
    assert m.contains(np.array([1]), np.array([0])).tolist() == [True]
    with pytest.raises(MaskError, match=r"`k` must hold int positions in \[0, 2\); got 5\."):
        m.contains(np.array([0]), np.array([5]))
    with pytest.raises(MaskError, match=r"`q` must hold int positions in \[0, 2\); got -1\."):
        m.contains(np.array([-1]), np.array([0]))
    with pytest.raises(MaskError, match=r"`q` must hold int positions in \[0, 2\); got dtype float64\."):
        m.contains(np.array([0.5]), np.array([0]))
