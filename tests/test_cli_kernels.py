"""`hassejax export` and `hassejax tiles`: the printed code runs and gives the mask; tiles match tile_stats."""

import json

import numpy as np
import pytest

from hassejax.cli import main
from hassejax.kernels import tile_stats
from hassejax.masks import from_mask_mod, from_spec, structured
from hassejax.tasks import block_two_stream_mask, butterfly_mask

pytest.importorskip("jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask")


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_export_mask_mod_source_runs(capsys):
    code, out, _ = _run(
        capsys,
        "export",
        "sliding_window(n=32, left=4) | attention_sinks(n=32, num=2)",
        "--to",
        "mask_mod",
        "--framework",
        "jax",
    )
    assert code == 0
    namespace = {}
    exec(out, namespace)
    got = from_mask_mod(namespace["mask_mod"], 32)
    np.testing.assert_array_equal(
        np.asarray(got), np.asarray(from_spec("sliding_window(n=32, left=4) | attention_sinks(n=32, num=2)"))
    )


@pytest.mark.parametrize(
    "argv,want",
    [
        (["block_generation", "--n", "8", "--block-size", "2"], lambda: block_two_stream_mask(8, 2)),
        (["butterfly", "--n", "5"], lambda: butterfly_mask(5)),
        (["autoregressive", "--n", "6"], lambda: from_spec("causal(n=5)")),
    ],
)
def test_export_families_through_their_closed_forms(capsys, tmp_path, argv, want):
    code, out, _ = _run(capsys, "export", *argv, "--to", "mask_mod", "--framework", "numpy")
    assert code == 0
    namespace = {}
    exec(out, namespace)
    dense = np.asarray(want())
    n = dense.shape[0]
    q, k = np.arange(n)[:, None], np.arange(n)[None, :]
    np.testing.assert_array_equal(np.broadcast_to(namespace["mask_mod"](0, 0, q, k), (n, n)), dense)
    path = tmp_path / "m.npy"
    assert _run(capsys, "export", *argv, "--to", "npy", "--out", str(path))[0] == 0
    np.testing.assert_array_equal(np.load(path), dense)


def test_export_splash_structured_and_numpy(capsys, tmp_path):
    code, out, _ = _run(capsys, "export", "sliding_window(n=256, left=16) & causal(n=256)", "--to", "splash")
    assert code == 0 and "LocalMask" in out and "NumpyMask" not in out
    namespace = {}
    exec(out, namespace)
    np.testing.assert_array_equal(namespace["mask"][:, :], np.asarray(from_spec("sliding_window(n=256, left=16)")))
    # no structured splash form (documents of 2 then 3: not chunked): needs --out for the NumpyMask array
    code, _, err = _run(capsys, "export", "document(segments=[2, 3])", "--to", "splash")
    assert code == 2 and "--out" in err
    path = tmp_path / "doc.npy"
    code, out, _ = _run(capsys, "export", "document(segments=[2, 3])", "--to", "splash", "--out", str(path))
    assert code == 0
    namespace = {}
    exec(out, namespace)
    np.testing.assert_array_equal(namespace["mask"][:, :], np.asarray(from_spec("document(segments=[2, 3])")))


def test_export_splash_python_file_writes_its_array_next_to_it(capsys, tmp_path):
    """`--to splash --out pl.py` for a mask with no structured splash form was refused ("give --out FILE.npy") though
    the help offers a .py file for the Python, and with FILE.npy the Python only went to stdout (a fresh user). Now
    FILE.py gets the Python and FILE.npy next to it the NumpyMask's array, which the Python loads."""
    spec = "prefix_lm(n=64, prefix=10) | sliding_window(n=64, left=3)"
    want = np.asarray(from_spec(spec))
    py, npy = tmp_path / "pl.py", tmp_path / "pl.npy"
    code, out, err = _run(capsys, "export", spec, "--to", "splash", "--out", str(py))
    assert code == 0, err
    assert out == f"wrote {py} (Python building the splash NumpyMask) and {npy} (its array, loaded by that path)\n"
    np.testing.assert_array_equal(np.load(npy), want)
    namespace = {"__file__": str(py)}
    exec(py.read_text(), namespace)
    np.testing.assert_array_equal(namespace["mask"][:, :], want)
    # FILE.npy: the array there and the Python printed, as before; no --out: refused, naming both ways
    code, out, _ = _run(capsys, "export", spec, "--to", "splash", "--out", str(tmp_path / "a.npy"))
    assert code == 0 and f"np.load({str(tmp_path / 'a.npy')!r})" in out
    code, out, err = _run(capsys, "export", spec, "--to", "splash")
    assert code == 2 and out == "" and "--out FILE.npy" in err and "--out FILE.py" in err
    # a structured mask: the Python in FILE.py and no array
    code, out, _ = _run(capsys, "export", "causal(n=64)", "--to", "splash", "--out", str(tmp_path / "c.py"))
    assert code == 0 and out == f"wrote {tmp_path / 'c.py'} (Python building the splash mask)\n"
    assert not (tmp_path / "c.npy").exists()
    assert "mask_lib.CausalMask" in (tmp_path / "c.py").read_text()
    # the array's path is checked before the work, as the output paths are
    (tmp_path / "d.npy").mkdir()
    code, out, err = _run(capsys, "export", spec, "--to", "splash", "--out", str(tmp_path / "d.py"))
    assert code == 2 and out == "" and "its array" in err and "it is a directory" in err
    assert not (tmp_path / "d.py").exists()


def test_export_python_to_a_file_says_where_it_went(capsys, tmp_path):
    """`--to mask_mod --out FILE.py` and `--to splash --out FILE.py` of a structured mask wrote the file and printed
    nothing, where `--to npy` and a splash NumpyMask say "wrote FILE" on stdout (a fresh user). They say it too;
    printed source (no --out, or '-') stays alone on stdout."""
    mm, sp = tmp_path / "mm.py", tmp_path / "sp.py"
    code, out, err = _run(capsys, "export", "causal(n=8)", "--to", "mask_mod", "--out", str(mm))
    assert code == 0 and err == "" and out == f"wrote {mm} (Python source of mask_mod(b, h, q_idx, kv_idx))\n", out
    assert "def mask_mod(" in mm.read_text()
    code, out, err = _run(capsys, "export", "causal(n=8)", "--to", "splash", "--out", str(sp))
    assert code == 0 and err == "" and out == f"wrote {sp} (Python building the splash mask)\n", out
    assert "mask_lib.CausalMask" in sp.read_text()
    for to in ("mask_mod", "splash"):
        for extra in ([], ["--out", "-"]):
            code, out, err = _run(capsys, "export", "causal(n=8)", "--to", to, *extra)
            assert code == 0 and err == "" and "wrote" not in out and out.startswith(("import", "from")), out


def test_export_splash_python_file_loads_its_array_from_its_own_folder(capsys, tmp_path, monkeypatch):
    """A relative --out: the Python loaded `np.load('sub/m.npy')`, the path as typed, which failed when the script ran
    from its own folder (a fresh user); it loads the array next to itself wherever it runs from."""
    spec = "prefix_lm(n=64, prefix=10) | sliding_window(n=64, left=3)"
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(capsys, "export", spec, "--to", "splash", "--out", "sub/m.py")
    assert code == 0, err
    monkeypatch.chdir(tmp_path / "sub")
    namespace = {"__file__": "m.py"}
    exec((tmp_path / "sub" / "m.py").read_text(), namespace)
    np.testing.assert_array_equal(namespace["mask"][:, :], np.asarray(from_spec(spec)))


def test_export_splash_refuses_an_out_that_cannot_have_its_array_next_to_it(capsys, tmp_path):
    """`--to splash --out /dev/stdout` for a mask with no structured splash form wrote its array to /dev/stdout.npy (as
    root, a new file in /dev; a fresh user). An --out that is a device, a FIFO or the command's stdout gets no sibling
    FILE.npy: refused with exit code 2 before any array or file is written, naming --out and the two ways that work.
    A structured mask has no array: such an --out takes its Python."""
    import os
    import subprocess
    import sys

    spec = "prefix_lm(n=64, prefix=10) | sliding_window(n=64, left=3)"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a writer does not block (the old code wrote the Python)
    created = [p for p in ("/dev/null.npy", "/dev/stdout.npy") if not os.path.exists(p)]
    try:
        for out, what in [("/dev/null", "a character device"), (str(fifo), "a FIFO (named pipe)")]:
            code, printed, err = _run(capsys, "export", spec, "--to", "splash", "--out", out)
            assert code == 2 and printed == "" and err.count("\n") == 1, err
            assert f"--out {out!r}: it is {what}, not a regular file; " in err, err
            assert "give --out FILE.py" in err and "--out FILE.npy" in err, err
        assert not (tmp_path / "pipe.npy").exists() and os.read(reader, 100) == b""
        # the reported command: stdout redirected to a file
        script = os.path.join(os.path.dirname(sys.executable), "hassejax")
        with open(tmp_path / "x.py", "w") as fh:
            proc = subprocess.run(
                [script, "export", spec, "--to", "splash", "--out", "/dev/stdout"], stdout=fh, stderr=subprocess.PIPE
            )
        assert proc.returncode == 2 and b"--out '/dev/stdout': it is the command's stdout" in proc.stderr, proc.stderr
        assert (tmp_path / "x.py").read_text() == ""
        # a structured mask: its Python to the device
        assert _run(capsys, "export", "causal(n=8)", "--to", "splash", "--out", "/dev/null") == (
            0,
            "wrote /dev/null (Python building the splash mask)\n",
            "",
        )
        assert not any(os.path.exists(p) for p in created)
    finally:
        os.close(reader)
        for p in created:  # what the old code made
            if os.path.exists(p):
                os.remove(p)


def test_export_npy_names_in_any_case(capsys, tmp_path):
    """`--out m.NPY` was the Python's file for --to splash (the array went to m.npy beside it: one file on a
    case-insensitive file system) and refused by --to npy ("give a name ending in .npy"). A .npy name in any case is
    the array's, written under exactly that name (np.save appended .npy to m.NPY)."""
    spec = "prefix_lm(n=64, prefix=10) | sliding_window(n=64, left=3)"
    want = np.asarray(from_spec(spec))
    code, out, err = _run(capsys, "export", spec, "--to", "npy", "--out", str(tmp_path / "a.NPY"))
    assert code == 0 and err == "" and out.startswith(f"wrote {tmp_path / 'a.NPY'}: Boolean (64, 64)"), err
    np.testing.assert_array_equal(np.load(tmp_path / "a.NPY"), want)
    code, out, err = _run(capsys, "export", spec, "--to", "splash", "--out", str(tmp_path / "m.Npy"))
    assert code == 0 and err == "" and f"np.load({str(tmp_path / 'm.Npy')!r})" in out, err
    namespace = {}
    exec(out, namespace)
    np.testing.assert_array_equal(namespace["mask"][:, :], want)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.NPY", "m.Npy"]
    code, out, err = _run(capsys, "export", "causal(n=8)", "--to", "splash", "--out", str(tmp_path / "c.NPY"))
    assert code == 2 and "is a structured splash mask (no array to write)" in err, err
    # --to npy's name is checked before the work
    code, out, err = _run(capsys, "export", "causal(n=8)", "--to", "npy", "--out", str(tmp_path / "c.npz"))
    assert code == 2 and "give a name ending in .npy" in err
    # --to mask_mod wrote its Python source into m.npy (a fresh user): refused before the work, nothing written
    code, out, err = _run(capsys, "export", "causal(n=8)", "--to", "mask_mod", "--out", str(tmp_path / "mm.npy"))
    assert code == 2 and "--to mask_mod writes Python source" in err, err
    assert not (tmp_path / "mm.npy").exists()


def test_export_usage_errors(capsys):
    assert _run(capsys, "export", "block_generation", "--to", "mask_mod")[0] == 2  # no --n
    assert _run(capsys, "export", "causal(n=4)", "--n", "4", "--to", "mask_mod")[0] == 2
    assert _run(capsys, "export", "causl(n=4)", "--to", "mask_mod")[0] == 2
    assert _run(capsys, "export", "causal(n=4)", "--to", "npy")[0] == 2  # npy needs --out


@pytest.mark.parametrize(
    "argv, option, where",
    [
        (("tiles", "butterfly", "--n", "100", "--block-size", "4"), "--block-size", "the butterfly family"),
        (("tiles", "butterfly", "--n", "100", "--group", "causal"), "--group", "the butterfly family"),
        (("export", "butterfly", "--n", "6", "--block-size", "4", "--to", "mask_mod"), "--block-size", "the butterfly"),
        (("export", "autoregressive", "--n", "6", "--group", "diagonal", "--to", "mask_mod"), "--group", "the auto"),
        (("tiles", "causal(n=100)", "--content", "causal"), "--content", "a mask spec or .npy file"),
        (("derive", "butterfly", "--n", "4", "--block-size", "3"), "--block-size", "the butterfly family"),
    ],
)
def test_family_options_that_do_not_apply_are_refused(capsys, argv, option, where):
    """``tiles`` and ``export`` refuse a task-family option that does not apply, as ``derive`` does (a fresh user:
    ``tiles butterfly --block-size 4`` counted 128 x 128 tiles with the option ignored)."""
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == "" and f"error: {option} do(es) not apply to {where}" in err, err
    code, out, _ = _run(capsys, "export", "block_generation", "--n", "8", "--block-size", "2", "--group", "causal",
                        "--no-keep-last-block", "--to", "mask_mod")  # fmt: skip
    assert code == 0 and "def mask_mod" in out


def test_options_are_not_abbreviated(capsys):
    """``analyze ... --n 3`` was read as ``--no-progress`` (a fresh user: "unrecognized arguments: 3")."""
    code, _, err = _run(capsys, "analyze", "causal(n=4)", "--n", "3")
    assert code == 2 and "unrecognized arguments: --n 3" in err, err


def test_export_npy_too_large_is_refused_before_the_array_in_the_command_line_s_words(capsys, tmp_path, monkeypatch):
    """`--to npy` of a 1M-token mask: refused from its size before any array, naming `--to npy` and the options that
    need no array (it gave to_splash's Python advice about a NumpyMask, a fresh-user review): --to splash only where
    splash has a structured mask (a diff review) or with --fallback lazy, --to mask_mod always."""
    from hassejax.kernels import _splash_write

    def never(*args, **kwargs):
        raise AssertionError("the dense array was started")

    monkeypatch.setattr(_splash_write, "_dense_rule", never)
    path = tmp_path / "big.npy"
    n = 1048576
    code, out, err = _run(capsys, "export", f"sliding_window(n={n}, left=4096)", "--to", "npy", "--out", str(path))
    assert code == 2 and out == "" and not path.exists()
    assert f"`--to npy`: the dense Boolean array of sliding_window(n={n}, left=4096, right=0)" in err
    assert "1024.00 GiB" in err and "--to splash or --to mask_mod" in err and "NumpyMask" not in err
    for spec in (f"prefix_lm(n={n}, prefix=1024)", f"dilated(n={n}, window=4, dilation=2)"):  # no splash structure
        code, out, err = _run(capsys, "export", spec, "--to", "npy", "--out", str(path))
        assert code == 2 and "--to mask_mod writes code that evaluates the mask per tile" in err and not path.exists()
        assert "--to splash or" not in err and "--to splash --fallback lazy builds" in err  # no structured splash mask


@pytest.mark.parametrize("command", [["tiles"], ["export", "--to", "mask_mod"]])
def test_kernel_commands_name_their_argument_and_refuse_other_files(capsys, tmp_path, command):
    """`tiles` and `export` call their argument SPEC_OR_FAMILY, take (heads, n, n) stacks, and refuse a .npz as a
    file (they said MASK_SPEC, "must have rank 2", and parsed the .npz name as a spec; diff review)."""
    code, _, err = _run(capsys, command[0], str(tmp_path / "masks.npz"), *command[1:])
    assert code == 2 and "SPEC_OR_FAMILY" in err and "a .npz file is not read" in err
    path = tmp_path / "four.npy"
    np.save(path, np.ones((2, 2, 3, 3), bool))
    code, _, err = _run(capsys, command[0], str(path), *command[1:])
    shapes = (
        "rank 2 or 3, (n_q, n_k) or (heads, n_q, n_k)" if command == ["tiles"] else "rank 2, shape (n, n), or rank 3"
    )
    assert code == 2 and f"SPEC_OR_FAMILY {str(path)!r}: the array must have {shapes}" in err


@pytest.mark.parametrize(
    "command", [["tiles"], ["export", "--to", "mask_mod"], ["export", "--to", "mask_mod", "--n", "8"]]
)
def test_kernel_commands_list_what_spec_or_family_takes_for_an_unknown_name(capsys, command):
    """``hassejax export nosuchfamily`` said "unknown mask 'nosuchfamily'; known masks: ..." (a mask spec's error),
    never naming the task families that SPEC_OR_FAMILY takes; now an unknown bare name lists all it takes: the
    families, the masks of a spec and a .npy file. A known mask's bare name keeps the spec's own advice (its call)."""
    code, out, err = _run(capsys, command[0], "nosuchfamily", *command[1:])
    assert code == 2 and out == ""
    assert "SPEC_OR_FAMILY 'nosuchfamily': no task family or mask of that name" in err, err
    assert "task family (autoregressive, block_generation, butterfly) with --n N" in err
    assert "sliding_window" in err and "butterfly_mask" in err and ".npy file" in err
    if "--n" not in command:
        code, _, err = _run(capsys, command[0], "causal", *command[1:])
        assert code == 2 and "names a mask without arguments; write a call: causal(n)" in err, err


def test_tiles_long_context_and_json(capsys, tmp_path):
    n = 131072
    spec = f"sliding_window(n={n}, left=4096) | attention_sinks(n={n}, num=4)"
    path = tmp_path / "tiles.json"
    code, out, _ = _run(capsys, "tiles", spec, "--block", "128", "--json", str(path))
    assert code == 0 and "1024 x 1024 tiles" in out
    want = tile_stats(structured.sliding_window(n, 4096) | structured.attention_sinks(n, 4), block_size=128)
    got = json.loads(path.read_text())
    assert (got["empty"], got["partial"], got["full"]) == (want.empty, want.partial, want.full)
    # a ragged size: never negative sparsity
    code, out, _ = _run(capsys, "tiles", "causal(n=100)", "--block", "128")
    assert code == 0 and "sparsity 0.00%" in out


def test_export_splash_lazy_fallback_builds_a_long_mask_with_no_array(capsys, tmp_path):
    """A fresh user: the README's long-context mask (a window with sinks, n = 131,072) had no structured splash form
    and the command line offered only a NumpyMask of 16 GiB. ``--fallback lazy`` writes Python that builds
    hassejax's lazy splash mask from the spec; the refusal names it and the array's size."""
    from hassejax.kernels import from_splash

    long = "sliding_window(n=131072, left=4096) | attention_sinks(n=131072, num=4)"
    code, _, err = _run(capsys, "export", long, "--to", "splash")
    assert code == 2 and "(16 GiB)" in err and "--fallback lazy" in err
    assert err.index("--fallback lazy") < err.index("--out FILE.npy")  # the lazy mask first (1 TiB at n = 2^20)
    spec = "sliding_window(n=4096, left=64) | attention_sinks(n=4096, num=4)"
    path = tmp_path / "lazy.py"
    code, out, err = _run(capsys, "export", spec, "--to", "splash", "--fallback", "lazy", "--out", str(path))
    assert code == 0, err
    assert not list(tmp_path.glob("*.npy"))  # no array written
    namespace = {}
    exec(path.read_text(), namespace)
    assert from_splash(namespace["mask"]) == structured.sliding_window(4096, 64) | structured.attention_sinks(4096, 4)
    np.testing.assert_array_equal(namespace["mask"][100:300, 0:400], np.asarray(from_spec(spec))[100:300, 0:400])
    # a structured mask is written as such; the option belongs to --to splash; a .npy input or output is refused
    code, out, _ = _run(capsys, "export", "causal(n=64)", "--to", "splash", "--fallback", "lazy")
    assert code == 0 and "CausalMask" in out and "fallback" not in out
    code, _, err = _run(capsys, "export", spec, "--to", "mask_mod", "--fallback", "lazy")
    assert code == 2 and "--fallback lazy is for --to splash" in err
    code, _, err = _run(
        capsys, "export", spec, "--to", "splash", "--fallback", "lazy", "--out", str(tmp_path / "m.npy")
    )
    assert code == 2 and "writes Python (no array)" in err
    npy = tmp_path / "doc.npy"
    np.save(npy, np.asarray(from_spec("document(segments=[2, 3])")))
    code, _, err = _run(capsys, "export", str(npy), "--to", "splash", "--fallback", "lazy")
    assert code == 2 and "a .npy file is an array already" in err


def test_tiles_counts_a_rectangular_npy_as_tile_stats_does(capsys, tmp_path):
    """A fresh user: ``hassejax tiles`` refused a (128, 256) array as not square ("queries and keys are the same
    positions"), a closure's reason; tile_stats counts it. Counted here against a loop over the tiles; ``export``
    still needs a square mask."""
    rng = np.random.default_rng(3)
    for shape, block in (((128, 256), (64, 64)), ((2, 40, 70), (16, 32))):
        mask = rng.random(shape) < 0.6
        mask[..., :8, :] = True  # a full tile row or two
        path = tmp_path / f"rect{len(shape)}.npy"
        np.save(path, mask)
        code, out, _ = _run(
            capsys, "tiles", str(path), "--block", str(block[0]), "--block-kv", str(block[1]), "--json", "-"
        )
        got = json.loads(out)
        flat = mask.reshape((-1, *shape[-2:]))
        kinds = [
            0 if not t.any() else 2 if t.all() and t.shape == block else 1
            for m in flat
            for i in range(0, shape[-2], block[0])
            for j in range(0, shape[-1], block[1])
            for t in [m[i : i + block[0], j : j + block[1]]]
        ]
        assert code == 0 and (got["empty"], got["partial"], got["full"]) == tuple(kinds.count(k) for k in (0, 1, 2))
    code, _, err = _run(capsys, "export", str(tmp_path / "rect2.npy"), "--to", "mask_mod")
    assert code == 2 and "must be square" in err


def test_kernel_commands_name_what_is_wrong_with_a_stack_of_heads(capsys, tmp_path):
    """A review: a non-Boolean or empty (heads, n_q, n_k) .npy was told "must have rank 2 or 3 ...; got rank 3", and
    `export` of rectangular heads "rank 3, (heads, n, n); got (rank 3)" without saying square."""
    cases = {
        "int3d": (np.ones((2, 3, 4), np.int8), "tiles", "must have dtype bool"),
        "int3d_sq": (np.ones((2, 3, 3), np.int8), "export", "must have dtype bool"),
        "empty3d": (np.ones((2, 0, 4), bool), "tiles", "must have n >= 1 positions"),
        "rect3d": (np.ones((2, 3, 4), bool), "export", "each head must be square (n, n)"),
        "zero_heads": (np.ones((0, 8, 8), bool), "tiles", "the stack must hold at least one head"),
        "zero_heads_export": (np.ones((0, 8, 8), bool), "export", "the stack must hold at least one head"),
    }
    for name, (arr, command, want) in cases.items():
        path = tmp_path / f"{name}.npy"
        np.save(path, arr)
        extra = ["--to", "mask_mod"] if command == "export" else []
        code, _, err = _run(capsys, command, str(path), *extra)
        assert code == 2 and want in err, (name, err)


def test_export_splash_of_a_rectangular_array(capsys, tmp_path):
    """A fresh user: ``export rect.npy --to splash`` refused a rectangular (KV-cache) array as "must be square",
    which the Python ``to_splash`` takes: bottom-right causal is splash's CausalMask with its offset, any other
    rectangular array a NumpyMask read from the file given."""
    from hassejax.kernels import from_splash

    for name, array in (("causal", np.tri(4, 8, 4, dtype=bool)), ("other", np.eye(3, 5, k=1, dtype=bool))):
        path = tmp_path / f"{name}.npy"
        np.save(path, array)
        code, out, err = _run(capsys, "export", str(path), "--to", "splash")
        assert code == 0, err
        assert ("CausalMask(shape=(4, 8), offset=4)" in out) == (name == "causal")
        namespace = {}
        exec(out, namespace)
        np.testing.assert_array_equal(np.asarray(from_splash(namespace["mask"], form="dense")), array)
    code, _, err = _run(capsys, "export", str(path), "--to", "splash", "--out", str(tmp_path / "o.npy"))
    assert code == 2 and "is the file given" in err
    code, _, err = _run(capsys, "export", str(path), "--to", "splash", "--fallback", "lazy")  # was ignored
    assert code == 2 and "a .npy file is an array already" in err
    code, _, err = _run(capsys, "export", str(path), "--to", "mask_mod")  # a rule is square
    assert code == 2 and "must be square" in err
    np.save(tmp_path / "heads.npy", np.ones((2, 3, 5), bool))
    code, _, err = _run(capsys, "export", str(tmp_path / "heads.npy"), "--to", "splash")
    assert code == 2 and "per-head masks must be square" in err


@pytest.mark.parametrize("command", ["export", "tiles"])
def test_a_block_size_that_does_not_divide_n_names_the_flags(capsys, command):
    """A fresh user: ``export block_generation --n 8 --block-size 3`` said "`block_size` must divide `n`" inside the
    family's internal spec, not the command line's flags."""
    extra = ("--to", "mask_mod") if command == "export" else ()
    code, out, err = _run(capsys, command, "block_generation", "--n", "8", "--block-size", "3", *extra)
    assert code == 2 and out == ""
    assert "`--block-size` must divide `--n`; got --n 8, --block-size 3" in err and "block_two_stream_mask" not in err


def test_export_of_an_unstructured_npy_names_the_file(capsys, tmp_path):
    """A fresh user: ``export zeros.npy --to splash`` said "key runs: splash has no structured mask" (no input
    named), and the Python written for it was headed "# key runs"; both now name the file."""
    path = tmp_path / "random.npy"
    np.save(path, np.random.default_rng(0).random((6, 6)) < 0.5)
    code, _, err = _run(capsys, "export", str(path), "--to", "splash")
    assert code == 2 and f"error: {path} (key runs): splash has no structured mask" in err
    code, _, err = _run(capsys, "export", str(path), "--to", "splash", "--out", str(tmp_path / "o.py"))
    assert code == 0, err
    assert f"# {path} (key runs): row = query" in (tmp_path / "o.py").read_text()
    np.save(path, np.tri(5, dtype=bool))
    code, out, _ = _run(capsys, "export", str(path), "--to", "splash")
    assert code == 0 and f"# {path} (key runs): row = query" in out and "CausalMask(shape=(5, 5), offset=0)" in out


def test_a_file_name_with_a_line_break_stays_inside_the_comment(capsys, tmp_path):
    """A review: a .npy name holding a newline put a line of its own into the Python written (``print("INJECTED")``
    ran); the name is now written as its repr where it is not printable."""
    path = tmp_path / 'm\nprint("INJECTED")\n#.npy'
    np.save(path, np.tri(5, dtype=bool))
    for array in (np.tri(5, dtype=bool), np.tri(4, 6, 2, dtype=bool)):  # square and rectangular
        np.save(path, array)
        code, out, err = _run(capsys, "export", str(path), "--to", "splash")
        assert code == 0, err
        assert not any(line.startswith("print(") for line in out.splitlines())
        assert repr(str(path)) in out
        namespace = {}
        exec(out, namespace)


@pytest.mark.parametrize("extra", [(), ("--fallback", "lazy")])
def test_a_spec_with_a_line_break_gives_python_that_runs(capsys, extra):
    """A review: a spec written over two lines put its second line outside the comment of the Python written
    (``SyntaxError: unmatched ')'`` when run); the label is now written as its repr there."""
    for spec in ("causal(n=8) & sliding_window(n=8,\nleft=2)", "dilated(n=8,\nwindow=4, dilation=2)"):
        code, out, err = _run(capsys, "export", spec, "--to", "splash", *extra)
        if code == 2 and "--fallback lazy" in err:  # an unstructured spec without --fallback lazy: the usage error
            continue
        assert code == 0, err
        assert repr(spec) in out
        exec(out, {})
