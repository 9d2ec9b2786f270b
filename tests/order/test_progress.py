"""Progress bars of the long closure and depth computations (issue 13 item 6).

With ``progress`` the results are identical and the bar on stderr reports the iterations the
route runs: checked against the closed forms of the product counts (``ceil(log2 L*) + 1``
squarings for ``R``, ``ceil(log2 L*) - 1`` search products for ``L*`` on interval rows), the
bit-packed kernels' own batch counts, ``L*`` breadth-first levels and the matmul kernel's
product count. ``hassejax analyze`` prints the same stdout with bars on.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from hassejax.cli import _analyze, main
from hassejax.errors import ParameterError
from hassejax.masks import from_spec
from hassejax.order import convergence_depth, flow_summary, reachability
from hassejax.order._bitpacked import closure_bitpacked
from hassejax.order._progress import Bar, progress_bar

N, LEFT = 100, 3  # sliding window: L* = ceil((N - 1) / LEFT) = 33
LSTAR = math.ceil((N - 1) / LEFT)
SPEC = f"sliding_window(n={N}, left={LEFT})"


def final(err: str, desc: str) -> str:
    """The last state of the bar named `desc` in captured stderr (tqdm rewrites its line with \\r)."""
    lines = [x.strip() for x in re.split(r"[\r\n]", err) if x.strip().startswith(desc)]
    assert lines, f"no bar {desc!r} in {err!r}"
    return lines[-1]


def count(line: str, unit: str) -> tuple[int, int | None]:
    """``(n, total)`` from ``"... 3/7 products [...]"`` or ``"... 3 products [...]"``."""
    m = re.search(r"(\d+)(?:/(\d+))? " + unit + r" \[", line)
    assert m, line
    return int(m.group(1)), None if m.group(2) is None else int(m.group(2))


def test_structured_products_are_counted_and_results_unchanged(capsys):
    m = from_spec(SPEC, form="intervals")
    r_off, d_off = reachability(m), convergence_depth(m)
    assert capsys.readouterr().err == ""
    r_on = reachability(m, progress=True)
    err = capsys.readouterr().err
    assert r_on == r_off
    assert count(final(err, "R (structured)"), "products") == (math.ceil(math.log2(LSTAR)) + 1, None)
    d_on = convergence_depth(m, progress=True)
    err = capsys.readouterr().err
    assert d_on == d_off == LSTAR
    # doubling, then a binary search whose length is known once R is: 2 ceil(log2 L*) products in all
    k = math.ceil(math.log2(LSTAR))
    assert count(final(err, "L* (structured)"), "products") == (2 * k, 2 * k)
    assert f"{LSTAR} <= L* <= {LSTAR}" in final(err, "L* (structured)")


def test_flow_summary_same_numbers_with_a_bar_per_stage(capsys):
    m = from_spec(SPEC, form="intervals")
    off = flow_summary(m, layers=(1, 5, 40)).to_dict()
    on = flow_summary(m, layers=(1, 5, 40), progress=True).to_dict()
    err = capsys.readouterr().err
    off.pop("seconds"), on.pop("seconds")
    assert on == off
    k = math.ceil(math.log2(LSTAR))
    assert count(final(err, "R (structured)"), "products")[0] == k + 1
    assert count(final(err, "L* (structured)"), "products") == (k - 1, k - 1)
    assert count(final(err, "R^(5) (structured)"), "products") == (1, 1)  # A^4 ⊗ A, both stored
    assert "R^(1)" not in err and "R^(40)" not in err  # nothing to compute: no bar


@pytest.mark.parametrize("seed", [0, 1])
def test_bitpacked_batches_rounds_and_levels(capsys, seed):
    rng = np.random.default_rng(seed)
    mask = (rng.random((60, 60)) < 0.04) & (np.tri(60, k=-1, dtype=bool) if seed == 0 else True)
    adj = mask | np.eye(60, dtype=bool)
    ref_r, batches = closure_bitpacked(adj)
    r = reachability(mask, method="bitpacked", progress=True)
    err = capsys.readouterr().err
    np.testing.assert_array_equal(np.asarray(r), ref_r)
    assert count(final(err, "R (bit-packed)"), "batches") == (batches, batches)
    r3 = reachability(mask, 3, method="bitpacked", progress=True)
    err = capsys.readouterr().err
    np.testing.assert_array_equal(np.asarray(r3), np.asarray(reachability(mask, 3, method="matmul")))
    depth = int(convergence_depth(mask, method="bitpacked", progress=True))
    err3, err = err, capsys.readouterr().err
    assert depth == int(convergence_depth(mask, method="matmul"))
    # the level search stopped at L = 3: levels 2 and 3, or up to L* + 1 when it converges first
    assert count(final(err3, "R^(3) (bit-packed)"), "levels") == (min(2, depth), min(2, depth))
    assert count(final(err, "L* (bit-packed)"), "levels") == (depth, None)  # levels 2 .. L* + 1


def test_a_power_beyond_the_depth_ends_its_bar_at_the_levels_run(capsys):
    """``R^(L)`` with ``L > L*`` stops its level search at ``L*``: the bar's total shrinks to the levels run (not
    ``L - 1``: a review saw 9/29) and its note says ``L* = ...``."""
    mask = np.tri(N, k=-1, dtype=bool) & ~np.tri(N, k=-LEFT - 1, dtype=bool)  # LEFT keys before the query
    depth = int(convergence_depth(mask, method="bitpacked"))
    assert depth == LSTAR
    r = reachability(mask, LSTAR + 7, method="bitpacked", progress=True)  # below n - 1: the search runs
    line = final(capsys.readouterr().err, f"R^({LSTAR + 7}) (bit-packed)")
    np.testing.assert_array_equal(np.asarray(r), np.asarray(reachability(mask, method="bitpacked")))
    done, total = count(line, "levels")
    assert done == total == depth and f"L* = {depth}" in line, line


def test_matmul_bar_around_the_jitted_loop(capsys):
    """The jitted loop reports nothing inside; the bar opens at the start (estimate in its title) and
    ends with the kernel's product count: 2 ceil(log2 L*) for L*, ceil(log2 L*) + 1 for R."""
    chain = np.eye(40, k=-1, dtype=bool)  # L* = 39
    depth = convergence_depth(chain, method="matmul", progress=True)
    err = capsys.readouterr().err
    assert int(depth) == 39
    assert "s a product" in final(err, "L* (matmul")
    assert count(final(err, "L* (matmul"), "products") == (2 * math.ceil(math.log2(39)), None)
    r = reachability(chain, method="matmul", progress=True)
    err = capsys.readouterr().err
    np.testing.assert_array_equal(np.asarray(r), np.tri(40, dtype=bool))
    assert count(final(err, "R (matmul"), "products") == (math.ceil(math.log2(39)) + 1, None)


def test_a_delay_hides_short_work_and_a_late_bar_counts_from_the_start(capsys):
    m = from_spec(SPEC, form="intervals")
    assert flow_summary(m, layers=(4,), progress=1e6).convergence_depth == LSTAR
    assert capsys.readouterr().err == ""
    bar = Bar(0.05, "work", "steps")
    bar.update()
    assert capsys.readouterr().err == ""
    time.sleep(0.06)
    bar.update()  # due now: opens at 2 steps
    bar.close()
    assert count(final(capsys.readouterr().err, "work"), "steps") == (2, None)


def test_a_ticking_bar_shows_a_silent_step_and_stops_with_it(capsys):
    """A step that reports nothing (a jitted loop, one large array operation): the bar opens from
    a host thread once due, with the elapsed time, and the thread ends when the bar closes."""
    before = {t.name for t in threading.enumerate()}
    with progress_bar(0.05, "silent step", "", tick=True):
        time.sleep(0.3)  # no update: only the thread can open the bar
    err = capsys.readouterr().err
    assert re.fullmatch(r"silent step \[00:00\]", final(err, "silent step"))
    time.sleep(0.05)
    assert "hassejax-progress" not in {t.name for t in threading.enumerate()} - before
    with progress_bar(10.0, "short step", "", tick=True):
        pass
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf")])
def test_bad_progress_raises(bad):
    with pytest.raises(ParameterError, match="`progress`"):
        reachability(np.eye(3, dtype=bool), progress=bad)


def test_bad_progress_type_raises(no_typecheck):
    with pytest.raises(ParameterError, match="`progress` must be True"):
        flow_summary(np.eye(3, dtype=bool), progress="yes")


def test_analyze_stdout_unchanged_with_progress(capsys, monkeypatch):
    monkeypatch.setattr(_analyze, "_PROGRESS_DELAY", 0.0)
    assert main(["analyze", SPEC, "--layers", "1", "5", "--no-progress"]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == ""
    assert main(["analyze", SPEC, "--layers", "1", "5", "--progress"]) == 0
    loud = capsys.readouterr()
    assert loud.out == quiet.out
    assert count(final(loud.err, "L* (structured)"), "products")[0] == math.ceil(math.log2(LSTAR)) - 1
    assert main(["analyze", SPEC, "--layers", "1", "5"]) == 0  # default: stderr is not a terminal here
    assert capsys.readouterr().err == ""


def test_structured_analyze_with_progress_imports_no_jax():
    code = (
        "import sys\n"
        "import hassejax.cli._analyze as a\n"
        "from hassejax.cli import main\n"
        "a._PROGRESS_DELAY = 0.0\n"
        f"rc = main(['analyze', {SPEC!r}, '--progress'])\n"
        "print(rc, sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "0 []"
    assert "R (structured)" in out.stderr


def test_from_mask_mod_counts_the_rows_of_its_interval_form(capsys, monkeypatch, no_typecheck):
    """``from_mask_mod(..., form="intervals", progress=True)`` counts the rows its blocks evaluate (a fresh user:
    n = 2**20 ran its 10**12 evaluations for minutes without a word); the result is the one without a bar."""
    from hassejax.errors import ParameterError
    from hassejax.masks import _convert, from_mask_mod

    monkeypatch.delenv("HASSEJAX_PROGRESS", raising=False)
    monkeypatch.setattr(_convert, "_block_rows", lambda n: 64)  # several blocks at a small n
    rule = lambda b, h, q, k: (k <= q) & (q - k <= 2)
    n = 300
    with_bar = from_mask_mod(rule, n, form="intervals", progress=True)
    err = capsys.readouterr().err
    assert count(final(err, "interval form of `fn`"), "rows") == (n, n)
    assert with_bar == from_mask_mod(rule, n, form="intervals")
    assert "rows" not in capsys.readouterr().err  # silent by default
    with pytest.raises(ParameterError, match=r"^`progress` must be True"):
        from_mask_mod(rule, n, form="intervals", progress="yes")


def test_from_mask_mod_warns_of_a_long_evaluation_without_a_bar(monkeypatch, no_typecheck):
    """Without a bar, the interval form times its second block and warns when the blocks left would take
    ``LONG_EVALUATION_S`` or more (a fresh user: n = 2**20 silent for more than 4.5 minutes); here that limit is 0
    (every evaluation is "long"), then out of reach. With a bar, no warning: the bar says it."""
    import warnings

    from hassejax.masks import _convert, from_mask_mod

    monkeypatch.delenv("HASSEJAX_PROGRESS", raising=False)
    monkeypatch.setattr(_convert, "_block_rows", lambda n: 64)  # five blocks at n = 300
    rule = lambda b, h, q, k: (k <= q) & (q - k <= 2)
    monkeypatch.setattr(_convert, "LONG_EVALUATION_S", 0.0)
    with pytest.warns(RuntimeWarning, match=r"evaluates `fn` on all 300 x 300 pairs; the 3 blocks of rows left") as got:
        from_mask_mod(rule, 300, form="intervals")
    assert got[0].filename == __file__  # pointed at the caller
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_mask_mod(rule, 300, form="intervals", progress=True)
        monkeypatch.setattr(_convert, "LONG_EVALUATION_S", 1e9)
        from_mask_mod(rule, 300, form="intervals")
