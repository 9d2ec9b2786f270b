"""Start-up of the ``hassejax`` command (issue 13): what it imports, and that the JAX-free route prints the same.

``--help``, argument errors (argparse's and a bad mask spec) and ``analyze`` of a structured spec
(interval form, structured closure route, the Hasse diagram on NumPy) must leave JAX, jaxlib,
Equinox and Diffrax out of ``sys.modules``; each case runs in a fresh interpreter. The text
``analyze`` prints there is compared with what the JAX route printed before the change (commit
5c16734, recorded below) and, for small masks, with the dense JAX route run in this process.
"""

import contextlib
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from hassejax.cli import _analyze, main
from hassejax.masks import from_spec
from hassejax.order import HasseDiagram, longest_chain, width

NO_JAX = ("jax", "jaxlib", "equinox", "diffrax")

# Runs main(argv) for each argv of a JSON list (argv[1]) in one fresh interpreter; after each call,
# prints one JSON line: the exit code, stdout, and the forbidden modules loaded so far.
_RUNNER = """
import contextlib, io, json, sys
import hassejax.cli
FORBIDDEN = {forbidden!r}
for argv in json.loads(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            rc = hassejax.cli.main(argv)
        except SystemExit as exc:
            rc = exc.code
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in FORBIDDEN)
    print(json.dumps({{"rc": rc, "out": out.getvalue(), "loaded": loaded[:5]}}))
"""


def run_fresh(argvs):
    """``[(rc, stdout, forbidden modules loaded after that call)]`` of ``main(argv)`` calls in one new interpreter."""
    code = _RUNNER.format(forbidden=NO_JAX)
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(argvs)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(rows) == len(argvs), proc.stdout + proc.stderr
    return [(r["rc"], r["out"], r["loaded"]) for r in rows]


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["analyze", "--help"],
        ["analyze"],
        ["analyze", "causal(n=8)", "--layers", "0"],
        ["nosuch"],
        ["tiles", "causal(n=8)", "--block", "x"],
        ["analyze", "sliding_window(n=8, left=2"],  # a bad spec: reported by the command
        ["analyze", "nosuch(n=8)", "--layers", "2"],
        ["analyze", "causal(n=4) | causal(n=5)"],
        ["analyze", "sliding_window(n=8, left=-1)"],
        ["analyze", "causal(n=8)", "--json", "/nonexistent/dir/x.json"],  # an output path: checked before the work
        ["export", "causal(n=8)", "--to", "splash", "--out", "/nonexistent/dir/x.py"],  # (export imports JAX later)
        ["export", "causal(n=8)", "--to", "npy", "--out", "m.npz"],  # --to npy's name: before the work too
        ["export", "nosuchfamily", "--to", "mask_mod"],  # neither a task family nor a mask: before the work
        ["analyze", "causal(n=8)", "--json", "-", "--dot", "-"],  # two outputs to stdout
        ["analyze", "causal(n=8)", "--json", "Out.json", "--dot", "out.JSON"],  # one file on macOS
    ],
)
def test_help_and_argument_errors_import_no_jax(argv):
    """--help and argument errors (the parser's, a bad mask spec's, an output file in a missing folder) leave JAX out
    of sys.modules."""
    ((rc, _, loaded),) = run_fresh([argv])
    assert loaded == [], f"{argv} imported {loaded}"
    assert rc == (0 if "--help" in argv else 2)


def test_a_structured_refusal_imports_no_jax():
    """A review: the refusal's advice on the dense route quoted flow_summary's estimate through a module that
    imports JAX. Under ``--method structured`` (a recorded mask: the pointer to "auto") and under "auto" (a derived
    mask: the dense route's estimate) the refusal leaves JAX out."""
    spec = "dilated(n=100000, window=300, dilation=3)"
    rows = run_fresh([["analyze", spec, "--method", "structured"], ["analyze", f"{spec} & causal(n=100000)"]])
    for rc, _, loaded in rows:
        assert rc == 2 and loaded == [], rows


# What `hassejax analyze` printed for these structured specs through the JAX route (commit 5c16734), but for the line
# of the edges left off, which said "(all in --json / --dot)" with neither option given.
BEFORE = {
    ("sliding_window(n=1024, left=8)", "--layers", "1", "8", "200", "--max-edges", "3"): """\
mask: sliding_window(n=1024, left=8)
n (positions): 1024
route: structured (interval rows, at most 1 key run(s) a row)
convergence depth L*: 128
layers L = 1: limit not reached (R^(1) misses 515620 of 524800 dependent pairs of R); keys per query min 1 / median 9 / max 9, 1.75% of the limit
layers L = 8: limit not reached (R^(8) misses 460320 of 524800 dependent pairs of R); keys per query min 1 / median 65 / max 65, 12.29% of the limit
layers L = 200: limit reached (R^(200) = R); keys per query min 1 / median 512.5 / max 1024, 100.00% of the limit
limit R: keys per query min 1 / median 512.5 / max 1024; 524800 dependent pairs
classes: 1024 (sizes min 1 / median 1 / max 1)
depth (longest chain of classes): 1024
width (largest antichain of classes): 1
Hasse edges (1023; u -> v: u is covered by v, information flows u -> v):
  {0} -> {1}
  {1} -> {2}
  {2} -> {3}
  ... and 1020 more (--max-edges 1023 prints all; --json FILE or --dot FILE writes them)
""",
    (
        "block_causal(n=4096, block_size=64) | attention_sinks(n=4096, num=4)",
        "--layers",
        "2",
        "--max-edges",
        "3",
    ): """\
mask: block_causal(n=4096, block_size=64) | attention_sinks(n=4096, num=4)
n (positions): 4096
route: structured (interval rows, at most 1 key run(s) a row)
convergence depth L*: 1
layers L = 2: limit reached (R^(2) = R); keys per query min 64 / median 2080 / max 4096, 100.00% of the limit
limit R: keys per query min 64 / median 2080 / max 4096; 8519680 dependent pairs
classes: 64 (sizes min 64 / median 64 / max 64)
depth (longest chain of classes): 64
width (largest antichain of classes): 1
Hasse edges (63; u -> v: u is covered by v, information flows u -> v):
  {0..63} -> {64..127}
  {64..127} -> {128..191}
  {128..191} -> {192..255}
  ... and 60 more (--max-edges 63 prints all; --json FILE or --dot FILE writes them)
""",
    ("sliding_window(n=8192, left=64) | attention_sinks(n=8192, num=4)", "--layers", "4", "64"): """\
mask: sliding_window(n=8192, left=64) | attention_sinks(n=8192, num=4)
n (positions): 8192
route: structured (interval rows, at most 2 key run(s) a row)
convergence depth L*: 128
layers L = 4: limit not reached (R^(4) misses 31454346 of 33558528 dependent pairs of R); keys per query min 1 / median 261 / max 261, 6.27% of the limit
layers L = 64: limit not reached (R^(64) misses 8370186 of 33558528 dependent pairs of R); keys per query min 1 / median 4096.5 / max 4101, 75.06% of the limit
limit R: keys per query min 1 / median 4096.5 / max 8192; 33558528 dependent pairs
classes: 8192 (sizes min 1 / median 1 / max 1)
depth (longest chain of classes): 8192
width (largest antichain of classes): 1
Hasse edges (covering pairs): 8191
""",
    ("tree_prefix(parents=[-1, 0, 0, 1, 1, 2, 2], prefix=1)", "--max-edges", "4"): """\
mask: tree_prefix(parents=[-1, 0, 0, 1, 1, 2, 2], prefix=1)
n (positions): 8
route: structured (interval rows, at most 3 key run(s) a row)
convergence depth L*: 1
limit R: keys per query min 1 / median 3.5 / max 4; 25 dependent pairs
classes: 8 (sizes min 1 / median 1 / max 1)
depth (longest chain of classes): 4
width (largest antichain of classes): 4
Hasse edges (7; u -> v: u is covered by v, information flows u -> v):
  {0} -> {1}
  {1} -> {2}
  {1} -> {3}
  {2} -> {4}
  ... and 3 more (--max-edges 7 prints all; --json FILE or --dot FILE writes them)
""",
}

# Small structured specs whose report is also computed on the dense JAX route, in this process.
SMALL = [
    ("block_diffusion(n=12, block_size=3)", "--layers", "1", "--max-edges", "4"),
    ("xlnet_two_stream(permutation=[3, 0, 4, 1, 2, 5], stream='query')", "--layers", "1"),
    ("natten_2d(height=6, width=7, kernel_h=3, kernel_w=3)", "--layers", "1", "2"),
    ("document(segments=[3, 5, 8], inner='causal') | global_sliding(n=16, window=1, global_positions=[9])",),
    ("chunked_causal(n=60, chunk=7) | attention_sinks(n=60, num=2)", "--layers", "1", "3", "--max-edges", "5"),
]


@pytest.fixture(scope="module")
def fresh_reports():
    """``analyze`` of every spec above, in one fresh interpreter: {argv: (rc, stdout, forbidden loaded)}."""
    argvs = [["analyze", *argv] for argv in [*BEFORE, *SMALL]]
    return {tuple(argv[1:]): row for argv, row in zip(argvs, run_fresh(argvs))}


@pytest.mark.parametrize("argv", list(BEFORE), ids=lambda a: a[0][:40])
def test_analyze_of_a_structured_spec_imports_no_jax_and_prints_as_before(fresh_reports, argv):
    rc, out, loaded = fresh_reports[argv]
    assert loaded == [], f"analyze {argv} imported {loaded}"
    assert rc == 0
    assert out == BEFORE[argv]


@pytest.mark.parametrize("argv", SMALL, ids=lambda a: a[0][:40])
def test_analyze_without_jax_prints_what_the_dense_jax_route_prints(fresh_reports, argv, monkeypatch):
    rc, out, loaded = fresh_reports[argv]
    assert loaded == [] and rc == 0
    monkeypatch.setattr(_analyze, "load_mask", lambda spec: np.asarray(from_spec(spec)))  # dense Boolean (n, n)
    dense = io.StringIO()
    with contextlib.redirect_stdout(dense):  # the dense JAX route: matmul closure, JAX poset functions
        assert main(["analyze", *argv, "--method", "matmul"]) == 0
    dense_lines = dense.getvalue().splitlines()
    assert [x for x in dense_lines if x.startswith("route:")] == ["route: matmul (requested)"]
    assert [x for x in out.splitlines() if not x.startswith("route:")] == [
        x for x in dense_lines if not x.startswith("route:")
    ]
    # The diagram's depth and width (host NumPy/networkx) agree with the jitted poset functions.
    d = HasseDiagram.from_mask(np.asarray(from_spec(argv[0])))
    assert (d.depth, d.width) == (longest_chain(d.cover_matrix()), width(d.order_matrix()))


def test_analyze_png_of_a_structured_spec_imports_no_jax(tmp_path):
    """``analyze --png`` draws the Hasse diagram with matplotlib alone: hassejax.plot loads its JAX modules (the
    dynamics figures, draw_mask) only when they are asked for."""
    png = tmp_path / "d.png"
    ((rc, _, loaded),) = run_fresh([["analyze", "causal(n=8) | attention_sinks(n=8, num=1)", "--png", str(png)]])
    assert rc == 0
    assert loaded == [], f"analyze --png imported {loaded}"
    assert png.stat().st_size > 0


def test_compile_cache_is_requested_without_importing_jax(tmp_path):
    """The CLI turns JAX's persistent cache on through JAX's environment variables (no JAX import);
    a dense route then writes its programs there, and ``--no-compile-cache`` leaves the folder empty."""
    code = (
        "import os, sys, json\n"
        "from hassejax._cache import request_compilation_cache\n"
        "folder = request_compilation_cache()\n"
        "print(json.dumps([str(folder), os.environ.get('JAX_COMPILATION_CACHE_DIR'), 'jax' in sys.modules]))\n"
    )
    env = {**os.environ, "HASSEJAX_CACHE_DIR": str(tmp_path / "c0")}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [str(tmp_path / "c0"), str(tmp_path / "c0"), False]

    # 8 key runs in some row, neither a Kronecker product nor a recorded union of components: the dense (JAX) route
    spec = "dilated(n=63, window=8, dilation=2) | sliding_window(n=63, left=1)"
    for flag, folder in (([], tmp_path / "on"), (["--no-compile-cache"], tmp_path / "off")):
        env["HASSEJAX_CACHE_DIR"] = str(folder)
        argv = [sys.executable, "-m", "hassejax.cli", *flag, "analyze", spec]
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert "route: matmul" in proc.stdout
        written = list(folder.iterdir()) if folder.exists() else []
        assert (len(written) > 0) == (not flag), (flag, written)


def test_unusable_cache_folder_warns_and_runs_without_cache(tmp_path, monkeypatch):
    """A HASSEJAX_CACHE_DIR that cannot be created turns the cache off with a warning naming it."""
    from hassejax._cache import request_compilation_cache

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("HASSEJAX_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.delenv("HASSEJAX_COMPILE_CACHE", raising=False)
    with pytest.warns(RuntimeWarning, match="a_file"):
        assert request_compilation_cache() is None


@pytest.mark.parametrize("value", ["banana", "2"])
def test_unknown_compile_cache_switch_warns_and_keeps_the_cache(tmp_path, monkeypatch, value):
    """HASSEJAX_COMPILE_CACHE that is neither on nor off: a warning naming the value, the cache stays on."""
    from hassejax._cache import compilation_cache_dir

    monkeypatch.setenv("HASSEJAX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HASSEJAX_COMPILE_CACHE", value)
    with pytest.warns(RuntimeWarning, match=repr(value)):
        assert compilation_cache_dir() == tmp_path / "cache"
    monkeypatch.setenv("HASSEJAX_COMPILE_CACHE", "off")
    assert compilation_cache_dir() is None


def test_cli_warnings_are_one_tagged_line_without_python_source(tmp_path):
    """A warning of a CLI call reads ``hassejax: warning: ...``, not Python's ``file:line: RuntimeWarning:`` and the
    source line ``sys.exit(main())``; Python's own warning format is back after the call."""
    env = {**os.environ, "HASSEJAX_CACHE_DIR": str(tmp_path / "c"), "HASSEJAX_COMPILE_CACHE": "maybe"}
    argv = [sys.executable, "-m", "hassejax.cli", "analyze", "causal(n=8)"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines and lines[0].startswith("hassejax: warning: HASSEJAX_COMPILE_CACHE='maybe'"), proc.stderr
    assert "RuntimeWarning" not in proc.stderr and "main()" not in proc.stderr, proc.stderr
    import warnings

    from hassejax.cli import main

    before = warnings.formatwarning
    assert main(["derive", "autoregressive", "--n", "3"]) == 0
    assert warnings.formatwarning is before
