"""The ``hassejax analyze`` command, end to end."""

import json
import math
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.cli import main
from hassejax.order import HasseDiagram


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def edge_lines(out):
    return [line.strip() for line in out.splitlines() if line.startswith("  ") and "->" in line]


def field(out, name):
    (line,) = [x for x in out.splitlines() if x.startswith(name + ":")]
    return line.split(":", 1)[1].strip()


def sliding(n, w):
    i, j = np.indices((n, n))
    return (j <= i) & (i - j <= w)


def test_causal(capsys):
    rc, out, err = run(capsys, "analyze", "causal(n=5)")
    assert rc == 0 and err == ""
    assert field(out, "n (positions)") == "5"
    assert field(out, "classes").split()[0] == "5"
    assert field(out, "route").startswith("structured")
    assert field(out, "convergence depth L*") == "1"  # a closed mask (spec §1.3)
    assert field(out, "depth (longest chain of classes)") == "5"
    assert field(out, "width (largest antichain of classes)") == "1"
    assert edge_lines(out) == [f"{{{k}}} -> {{{k + 1}}}" for k in range(4)]


@pytest.mark.parametrize("layers", [7, 8])
def test_sliding_window_layers(capsys, layers, tmp_path):
    n, w = 16, 2
    lstar = math.ceil((n - 1) / w)  # closed form, spec §1.3
    rc, out, _ = run(capsys, "analyze", f"sliding_window(n={n}, left={w})", "--layers", str(layers))
    assert rc == 0
    assert field(out, "convergence depth L*") == str(lstar)
    line = field(out, f"layers L = {layers}")
    if layers >= lstar:
        assert line.startswith(f"limit reached (R^({layers}) = R);")
        assert line.endswith("max 16, 100.00% of the limit")
    else:
        # R^(7) misses exactly the pairs at distance 15 (w * 7 = 14 < 15): only (15, 0).
        assert line.startswith(f"limit not reached (R^({layers}) misses 1 of {n * (n + 1) // 2} dependent pairs of R);")
        assert "max 15," in line
    # The same mask from a .npy file gives the same report (apart from the spec line).
    path = tmp_path / "sw.npy"
    np.save(path, sliding(n, w))
    rc, out2, _ = run(capsys, "analyze", str(path), "--layers", str(layers))
    assert rc == 0 and out2.splitlines()[1:] == out.splitlines()[1:]


def test_block_causal_and_full(capsys):
    rc, out, _ = run(capsys, "analyze", "block_causal(n=6, block_size=2)")
    assert rc == 0 and field(out, "classes").split()[0] == "3"
    assert edge_lines(out) == ["{0, 1} -> {2, 3}", "{2, 3} -> {4, 5}"]
    rc, out, _ = run(capsys, "analyze", "full(n=8)")
    assert rc == 0 and field(out, "classes").split()[0] == "1"
    assert "(none; classes: {0..7})" in out
    assert edge_lines(out) == []


def test_max_edges(capsys, tmp_path):
    """The edges left off point to the files asked for, else say how to get them (it said "all in --json / --dot"
    with neither given); --max-edges 0 prints the counts only, as its help says (it printed the edges' header and
    "... and 29 more", a fresh user)."""
    rc, out, _ = run(capsys, "analyze", "causal(n=30)", "--max-edges", "5")
    assert rc == 0
    assert len(edge_lines(out)) == 5
    assert out.endswith("  ... and 24 more (--max-edges 29 prints all; --json FILE or --dot FILE writes them)\n")
    files = [str(tmp_path / "c.json"), str(tmp_path / "c.dot")]
    rc, out, _ = run(capsys, "analyze", "causal(n=30)", "--max-edges", "5", "--json", files[0], "--dot", files[1])
    assert rc == 0 and out.endswith(f"  ... and 24 more (all in {files[0]} and {files[1]})\n")
    rc, out, _ = run(capsys, "analyze", "causal(n=30)", "--max-edges", "0")  # the counts only (review: refused)
    assert rc == 0 and edge_lines(out) == [] and "Hasse edges (29;" not in out and "more" not in out
    assert out.splitlines()[-1] == "Hasse edges (covering pairs): 29"
    rc, out, _ = run(capsys, "analyze", "butterfly_mask(n=4)", "--max-edges", "0")  # the report's case
    assert rc == 0 and out.splitlines()[-1] == "Hasse edges (covering pairs): 10" and "->" not in out
    rc, out, _ = run(capsys, "analyze", "full(n=8)", "--max-edges", "0")  # no edges: no "(none; classes: ...)" either
    assert rc == 0 and out.splitlines()[-1] == "Hasse edges (covering pairs): 0"


def test_outputs(capsys, tmp_path):
    rng = np.random.default_rng(0)
    m = np.tril(rng.random((12, 12)) < 0.3)
    m[0, 3] = m[5, 9] = True  # cycles
    src = tmp_path / "m.npy"
    np.save(src, m)
    files = {k: tmp_path / f"out.{k}" for k in ("json", "dot", "png")}
    rc, out, err = run(
        capsys, "analyze", str(src), "--layers", "2",
        "--json", str(files["json"]), "--dot", str(files["dot"]), "--png", str(files["png"]),
    )  # fmt: skip
    assert rc == 0, err
    expected = HasseDiagram.from_mask(jnp.asarray(m))
    data = json.loads(files["json"].read_text())
    assert HasseDiagram.from_dict(data["diagram"]) == expected
    assert data["n"] == 12 and data["num_classes"] == expected.num_classes
    assert (data["depth"], data["width"], data["layers"]) == (expected.depth, expected.width, [2])
    assert data["num_hasse_edges"] == len(expected.edges) and data["mask_spec"] == str(src)
    (reach,) = data["reach"]
    r2 = np.asarray(expected.reachability())
    assert reach["num_layers"] == 2 and data["limit"]["pairs"] == int(r2.sum())
    assert reach["limit_reached"] == (reach["pairs"] == data["limit"]["pairs"])
    assert files["dot"].read_text() == expected.to_dot()
    png = files["png"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000
    assert len(edge_lines(out)) == len(expected.edges)


def test_analyze_takes_the_derived_masks_as_export_and_tiles_do(capsys, tmp_path):
    """Review: `export` and `tiles` take ``butterfly_mask(...)``/``block_two_stream_mask(...)`` specs, `analyze` said
    "unknown mask". Now its JSON equals the analysis of the family's dense closed form."""
    from hassejax.tasks import block_two_stream_mask, butterfly_mask

    for spec, dense in [
        ("butterfly_mask(n=6)", butterfly_mask(6)),
        ("butterfly_mask(n=5, sparse=True)", butterfly_mask(5, sparse=True)),
        (
            "block_two_stream_mask(n=6, block_size=2) | causal(n=12)",
            block_two_stream_mask(6, 2) | np.tri(12, dtype=bool),
        ),
    ]:
        out_json = tmp_path / "a.json"
        rc, _, err = run(capsys, "analyze", spec, "--json", str(out_json))
        assert rc == 0, err
        data = json.loads(out_json.read_text())
        expected = HasseDiagram.from_mask(jnp.asarray(dense))
        assert HasseDiagram.from_dict(data["diagram"]) == expected and data["n"] == dense.shape[0]
    rc, _, err = run(capsys, "analyze", "butterfly_mask(n=6, bogus=1)")
    assert rc == 2 and "unknown argument 'bogus' for butterfly_mask" in err
    # a fresh user: `form='bogus'` was accepted and ignored (Python's butterfly_mask refuses it)
    for spec in ("butterfly_mask(n=4, form='bogus')", "block_two_stream_mask(n=8, block_size=2, form=3)"):
        rc, _, err = run(capsys, "analyze", spec)
        assert rc == 2 and "`form` must be one of ('dense', 'intervals')" in err, err
    rc, _, err = run(capsys, "analyze", "butterfly_mask(n=4, form='intervals')", "--json", str(out_json))
    assert rc == 0 and json.loads(out_json.read_text())["n"] == 10, err


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["analyze", "bogus(3)"], "unknown mask 'bogus'"),
        (["analyze", "causal("], "not valid syntax"),
        (["analyze", "missing.npy"], "no such .npy file"),
        (["analyze", "masks.npz"], "a .npz file is not read; pass a Boolean mask saved with numpy.save as a .npy file"),
    ],
)
def test_bad_specs(capsys, argv, fragment):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("hassejax: error: ") and fragment in err


def test_unknown_mask_lists_every_spec_analyze_takes(capsys):
    """A new user: ``analyze "bogus_mask(n=3)"`` listed the known masks without ``butterfly_mask`` and
    ``block_two_stream_mask``, which `analyze` takes (and a bare ``butterfly_mask`` was an "unknown mask")."""
    from hassejax.masks import structured

    for spec in ("bogus_mask(n=3)", "bogus", "causal(n=4) | bogus(n=4)"):
        rc, out, err = run(capsys, "analyze", spec)
        assert rc == 2 and out == ""
        known = err.split("known masks: ")[1].rstrip(".\n").split(", ")
        assert known == sorted([*structured.MASKS, "block_two_stream_mask", "butterfly_mask"]), err
    rc, _, err = run(capsys, "analyze", "1 + 2")
    assert rc == 2 and "block_two_stream_mask, butterfly_mask, causal" in err
    rc, _, err = run(capsys, "analyze", "butterfly_mask")
    assert rc == 2 and "names a mask without arguments; write a call: butterfly_mask(n" in err


@pytest.mark.parametrize(
    "array, fragment",
    [
        (np.eye(3, dtype=np.int32), "dtype bool (True = may attend); got dtype int32. Save it as Boolean first, e.g. "
         "`numpy.save(path, mask.astype(bool))`"),
        (np.ones((2, 3), bool), "must be square"),
        (np.ones(3, bool), "rank 2, shape (n, n); got shape (3,) (rank 1)"),
        (np.ones((0, 0), bool), "must have n >= 1 positions; got shape (0, 0)"),  # it said "must have rank 2"
    ],
)  # fmt: skip
def test_bad_npy(capsys, tmp_path, array, fragment):
    """The file named as the command line's argument (MASK_SPEC), and advice for a file, not for Python (review)."""
    path = tmp_path / "bad.npy"
    np.save(path, array)
    rc, _, err = run(capsys, "analyze", str(path))
    assert rc == 2 and err.count("\n") == 1 and fragment in err
    assert err.startswith(f"hassejax: error: MASK_SPEC {str(path)!r}: the array must")


def test_npy_name_without_npy_content(capsys, tmp_path):
    """A text file named .npy: np.load took it for a pickle ("pickled (object) data ... allow_pickle", a review)."""
    path = tmp_path / "notes.npy"
    path.write_text("garbage text\n")
    rc, out, err = run(capsys, "analyze", str(path))
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "not a NumPy .npy file (no .npy header)" in err and "pickle" not in err


def test_npy_upper_case_directory_and_truncated(capsys, tmp_path):
    """A second review: `GOOD.NPY` was read as a mask spec, a directory named `x.npy` was "no such .npy file", a
    truncated file said "mmap length is greater than file size"."""
    upper = tmp_path / "GOOD.NPY"
    with open(upper, "wb") as fh:
        np.save(fh, np.tril(np.ones((4, 4), bool)))
    rc, out, _ = run(capsys, "analyze", str(upper))
    assert rc == 0 and "n (positions): 4" in out
    (tmp_path / "x.npy").mkdir()
    rc, _, err = run(capsys, "analyze", str(tmp_path / "x.npy"))
    assert rc == 2 and "a directory, not a .npy file" in err
    whole = tmp_path / "whole.npy"
    np.save(whole, np.tril(np.ones((64, 64), bool)))
    data = whole.read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[: len(data) // 2])
    rc, _, err = run(capsys, "analyze", str(tmp_path / "cut.npy"))
    assert rc == 2 and err.count("\n") == 1 and "shorter than its header says: truncated" in err


def test_unwritable_output_is_refused_before_the_work(capsys, tmp_path, monkeypatch):
    """An output path in a missing folder (or a directory, or below a file) is bad input, exit code 2, before the work:
    `analyze "causal(8)" --json /nonexistent/dir/x.json` ran the whole analysis (minutes at n = 1M) and only then said
    "cannot write" with exit code 1 (a fresh user). The same for every subcommand's output files."""
    from hassejax.cli import _analyze, _derive, _export, _tiles

    def never(*args, **kwargs):
        raise AssertionError("the command's work started")

    work = {_analyze: "analyze", _derive: "derive", _export: "_kernel_mask", _tiles: "_kernel_mask"}
    for module, name in work.items():
        monkeypatch.setattr(module, name, never)
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    missing = str(tmp_path / "no_such_dir" / "out.json")
    for argv, option, path, why in [
        (["analyze", "causal(n=3)", "--json"], "--json", missing, f"no such folder '{tmp_path / 'no_such_dir'}'"),
        (["analyze", "causal(n=3)", "--dot"], "--dot", str(tmp_path), "it is a directory; give a file name"),
        (["analyze", "causal(n=3)", "--png"], "--png", str(a_file / "x" / "d.png"), f"'{a_file}' is a file"),
        (["derive", "autoregressive", "--n", "4", "--json"], "--json", missing, "no such folder"),
        (["derive", "autoregressive", "--n", "4", "--png"], "--png", str(tmp_path), "it is a directory"),
        (["export", "causal(n=4)", "--to", "mask_mod", "--out"], "--out", missing, "no such folder"),
        (["export", "causal(n=4)", "--to", "npy", "--out"], "--out", str(a_file / "m.npy"), "is a file, not a folder"),
        (["tiles", "causal(n=4)", "--json"], "--json", missing, "no such folder"),
    ]:
        rc, out, err = run(capsys, *argv, path)
        assert rc == 2 and out == "" and err.count("\n") == 1, (argv, err)
        assert err.startswith(f"hassejax: error: {option} {path!r}: cannot write it: ") and why in err, err


def test_an_existing_writable_file_in_a_read_only_folder_is_written(capsys, tmp_path, monkeypatch):
    """An existing file is written in place, so its own permission counts, not its folder's (a review: `--json
    /dev/stdout` was refused for users other than root, `/dev` not being writable); a new file needs the folder.
    The permissions are simulated (the suite may run as root, for whom every `os.access` is True)."""
    read_only = tmp_path / "ro"
    read_only.mkdir()
    existing = read_only / "out.json"
    existing.write_text("")
    real_access = os.access

    def access(path, mode):
        return False if os.fspath(path) == str(read_only) else real_access(path, mode)

    monkeypatch.setattr(os, "access", access)
    rc, out, err = run(capsys, "analyze", "causal(n=3)", "--json", str(existing))
    assert rc == 0 and err == "" and json.loads(existing.read_text())["n"] == 3, err
    new = read_only / "new.json"
    rc, out, err = run(capsys, "analyze", "causal(n=3)", "--json", str(new))
    assert rc == 2 and f"the folder '{read_only}' is not writable" in err and not new.exists(), err


def test_two_outputs_to_one_file_are_refused(capsys, tmp_path):
    """`analyze --json same --dot same` wrote the DOT, then the JSON over it, with exit code 0 (a fresh user)."""
    same = str(tmp_path / "same")
    rc, out, err = run(capsys, "analyze", "causal(n=3)", "--json", same, "--dot", same)
    assert rc == 2 and out == "" and f"name the same file {same!r}" in err, err
    assert not (tmp_path / "same").exists()


def test_an_empty_output_path_is_refused_naming_its_option(capsys, tmp_path, monkeypatch):
    """`--json ""` was refused as "it is a directory" (Path("") is the current folder): an empty path is refused as
    such, naming the option, before the work, for every subcommand's outputs."""
    from hassejax.cli import _analyze, _derive, _export, _tiles

    def never(*args, **kwargs):
        raise AssertionError("the command's work started")

    work = {_analyze: "analyze", _derive: "derive", _export: "_kernel_mask", _tiles: "_kernel_mask"}
    for module, name in work.items():
        monkeypatch.setattr(module, name, never)
    monkeypatch.chdir(tmp_path)
    for argv, option, want in [
        (["analyze", "causal(n=3)", "--json"], "--json", "a file path or '-'"),
        (["analyze", "causal(n=3)", "--dot"], "--dot", "a file path or '-'"),
        (["analyze", "causal(n=3)", "--png"], "--png", "a file path"),
        (["derive", "autoregressive", "--n", "4", "--json"], "--json", "a file path or '-'"),
        (["derive", "autoregressive", "--n", "4", "--png"], "--png", "a file path"),
        (["export", "causal(n=4)", "--to", "mask_mod", "--out"], "--out", "a file path or '-'"),
        (["export", "causal(n=4)", "--to", "npy", "--out"], "--out", "a file path or '-'"),
        (["tiles", "causal(n=4)", "--json"], "--json", "a file path or '-'"),
    ]:
        rc, out, err = run(capsys, *argv, "")
        assert rc == 2 and out == "" and err == f"hassejax: error: {option}: expected {want}, got an empty string\n", (
            argv,
            err,
        )
    assert list(tmp_path.iterdir()) == []


def test_two_outputs_to_a_character_device_are_written(capsys, tmp_path):
    """`--json /dev/null --dot /dev/null` was refused as "the same file twice": a character device is not truncated by
    the second output (nothing written there is lost), so both go there. Two outputs to one regular file, or to the
    command's stdout through /dev/stdout, are still refused."""
    rc, out, err = run(capsys, "analyze", "causal(n=3)", "--json", "/dev/null", "--dot", "/dev/null")
    assert rc == 0 and err == "" and out.startswith("mask: causal(n=3)\n"), err
    rc, out, err = run(capsys, "derive", "autoregressive", "--n", "4", "--json", "/dev/null")
    assert rc == 0 and err == "", err
    script = os.path.join(os.path.dirname(sys.executable), "hassejax")
    report = tmp_path / "report.txt"
    with open(report, "w") as fh:
        argv = [script, "analyze", "causal(n=3)", "--json", "/dev/stdout", "--dot", "/dev/stdout"]
        proc = subprocess.run(argv, stdout=fh, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 2 and "--json and --dot name the command's stdout" in proc.stderr, proc.stderr
    assert report.read_text() == ""
    # in a script whose stdout or stderr is /dev/null itself (a review: "name the command's stdout", exit 2)
    argv = [script, "analyze", "causal(n=3)", "--json", "/dev/null", "--dot", "/dev/null"]
    for streams in (
        {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE},
        {"stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL},
    ):
        proc = subprocess.run(argv, text=True, **streams)
        assert proc.returncode == 0, proc.stderr


def test_an_output_to_the_report_s_stream_is_written_after_it_not_over_it(tmp_path):
    """`analyze SPEC --json /dev/stdout > report.txt` opened /dev/stdout anew with mode "w": the JSON truncated the
    text report written there a moment before (a fresh user). A path that is the command's stdout (/dev/stdout, or the
    very file stdout goes to) is written through stdout after the report; the same for stderr."""
    script = os.path.join(os.path.dirname(sys.executable), "hassejax")
    report = tmp_path / "report.txt"
    for argv in (["--json", "/dev/stdout"], ["--json", str(report)], ["--dot", "/dev/fd/1"]):
        with open(report, "w") as fh:
            ok = subprocess.run([script, "analyze", "causal(n=3)", *argv], stdout=fh, stderr=subprocess.PIPE, text=True)
        assert ok.returncode == 0, ok.stderr
        text = report.read_text()
        assert text.startswith("mask: causal(n=3)\nn (positions): 3\n") and "  {1} -> {2}\n" in text, (argv, text)
        tail = text[text.index("  {1} -> {2}\n") + len("  {1} -> {2}\n") :]
        if argv[0] == "--json":
            assert json.loads(tail)["n"] == 3, tail
        else:
            assert tail.startswith("digraph") and tail.endswith("}\n"), tail
    log = tmp_path / "log.txt"
    with open(log, "w") as fh:
        ok = subprocess.run(
            [script, "analyze", "causal(n=3)", "--json", "/dev/stderr"], stdout=subprocess.PIPE, stderr=fh
        )
    assert ok.returncode == 0 and b"n (positions): 3" in ok.stdout and json.loads(log.read_text())["n"] == 3


def test_an_output_given_as_dash_is_stdout_instead_of_the_report(capsys, tmp_path, monkeypatch):
    """`--json -` (or `--dot -`): that output alone on stdout, for a pipe (`| jq`); it wrote a file named '-'. Two
    outputs to stdout, and --png to it, are refused before the work."""
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(capsys, "analyze", "causal(n=3)", "--json", "-", "--dot", str(tmp_path / "d.dot"))
    assert rc == 0 and err == "" and json.loads(out)["n"] == 3, out
    assert (tmp_path / "d.dot").read_text().startswith("digraph")
    rc, out, err = run(capsys, "analyze", "causal(n=3)", "--dot", "-")
    assert rc == 0 and out.startswith("digraph") and "mask:" not in out, out
    rc, out, err = run(capsys, "analyze", "causal(n=3)", "--json", "-", "--dot", "-")
    assert rc == 2 and out == "" and "--json and --dot name the command's stdout; give each its own file" in err, err
    rc, out, err = run(capsys, "analyze", "causal(n=3)", "--png", "-")
    assert rc == 2 and out == "" and "--png '-': it is the command's stdout, where the text goes" in err, err
    assert not os.path.exists("-")
    # too many classes to draw: no diagram on stdout, so the report is printed there (a review: "The counts are in
    # None." and the counts nowhere)
    rc, out, err = run(capsys, "analyze", "causal(n=2100)", "--dot", "-")
    assert rc == 2 and out.startswith("mask: causal(n=2100)") and "The counts are printed above" in err, (out, err)


def test_two_outputs_one_file_on_a_case_insensitive_file_system_are_refused(capsys, tmp_path):
    """`--json OUT.json --dot out.json`: two files on Linux, one on macOS or Windows, where the second output silently
    overwrote the first; refused before the work, naming both."""
    upper, lower = str(tmp_path / "OUT.json"), str(tmp_path / "out.json")
    rc, out, err = run(capsys, "analyze", "causal(n=3)", "--json", upper, "--dot", lower)
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert f"--json {upper!r} and --dot {lower!r} differ only in case: one file on a case-insensitive" in err, err
    assert not os.path.exists(upper) and not os.path.exists(lower)


def test_an_output_file_that_fails_all_the_same_is_exit_code_1(capsys, tmp_path, monkeypatch):
    """A write that fails although its folder is there (a full disk): exit code 1, one line naming the file."""
    import pathlib

    def full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_text", full)
    target = tmp_path / "out.json"
    rc, out, err = run(capsys, "analyze", "causal(n=3)", "--json", str(target))
    assert rc == 1 and err.count("\n") == 1 and f"cannot write '{target}': [Errno 28] No space left" in err
    assert "n (positions): 3" in out


def test_usage_errors(capsys):
    rc, _, err = run(capsys, "analyze", "causal(n=3)", "--layers", "0")
    assert rc == 2 and "expected a positive integer, got 0" in err
    rc, _, err = run(capsys)
    assert rc == 2 and "COMMAND" in err


def test_console_script_subprocess(tmp_path):
    script = os.path.join(os.path.dirname(sys.executable), "hassejax")
    assert os.path.exists(script), "the console script is installed with the package (pyproject [project.scripts])"
    cmd = [script, "analyze", "block_causal(n=4, block_size=2)"]
    ok = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "{0, 1} -> {2, 3}" in ok.stdout
    bad = subprocess.run([script, "analyze", "bogus(3)"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().startswith("hassejax: error:") and "unknown mask" in bad.stderr


def test_derive_block_generation_prints_the_spec_mask(tmp_path, capsys):
    import json

    from hassejax.tasks import block_two_stream_mask

    png, js = tmp_path / "d.png", tmp_path / "d.json"
    assert (
        main(["derive", "block_generation", "--n", "6", "--block-size", "2", "--png", str(png), "--json", str(js)]) == 0
    )
    out = capsys.readouterr().out
    assert "slots: 12" in out and "0 leak(s)" in out and "100.0% of sequence tokens" in out
    assert "  mask3 1 1 . . . . . . 1 1 . ." in out
    data = json.loads(js.read_text())
    assert data["mask"] == np.asarray(block_two_stream_mask(6, 2)).astype(int).tolist()
    assert data["audit"]["leaks"] == []
    assert png.stat().st_size > 10_000


def test_derive_butterfly_and_errors(capsys):
    assert main(["derive", "butterfly", "--n", "5"]) == 0
    out = capsys.readouterr().out
    assert "slots: 13" in out and "sparsest variant: 27 nonzeros, L* = 4" in out
    # --boundary pad printed the neighbour family under a 'boundary = pad' header; it is no longer offered
    assert main(["derive", "butterfly", "--n", "4", "--boundary", "pad"]) == 2
    assert "invalid choice: 'pad' (choose from 'neighbour')" in capsys.readouterr().err
    assert main(["derive", "block_generation", "--n", "8", "--block-size", "3"]) == 2
    assert "`--block-size` must divide `--n`" in capsys.readouterr().err
    assert main(["derive", "block_generation", "--n", "8"]) == 2
    assert "--block-size" in capsys.readouterr().err


def test_derive_rejects_options_of_other_families_and_large_n(capsys):
    assert main(["derive", "butterfly", "--n", "4", "--group", "causal"]) == 2
    assert "--group do(es) not apply to the butterfly family" in capsys.readouterr().err
    assert main(["derive", "autoregressive", "--n", "4", "--block-size", "2"]) == 2
    assert "--block-size" in capsys.readouterr().err
    assert main(["derive", "autoregressive", "--n", "100000"]) == 2
    assert "too large for derive" in capsys.readouterr().err


def test_a_quotient_too_large_to_draw_prints_the_counts_and_writes_the_json(tmp_path, capsys):
    """--png/--dot of a quotient over the drawing limit: exit 2 naming the limit, but (as the message says)
    the counts printed and --json written; no figure."""
    png, js = tmp_path / "q.png", tmp_path / "q.json"
    rc, out, err = run(capsys, "analyze", "sliding_window(n=4096, left=2)", "--png", str(png), "--json", str(js))
    assert rc == 2
    assert (
        "too many to draw (the limit is 2048; --quotient-limit raises it); no diagram written" in err and str(js) in err
    )
    assert field(out, "n (positions)") == "4096" and field(out, "classes").startswith("4096")
    assert json.loads(js.read_text())["num_classes"] == 4096
    assert not png.exists()
    rc, out, err = run(capsys, "analyze", "sliding_window(n=4096, left=2)", "--dot", str(tmp_path / "q.dot"))
    assert rc == 2 and "--json writes them" in err and field(out, "n (positions)") == "4096"


def test_a_reader_that_stops_early_ends_the_printing_not_the_command(tmp_path):
    """``hassejax analyze ... | head``: the closed pipe is no traceback, and --json is still written."""
    script = os.path.join(os.path.dirname(sys.executable), "hassejax")
    js = tmp_path / "c.json"
    cmd = [script, "analyze", "block_causal(n=64, block_size=2)", "--json", str(js), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before the command prints anything: its first write meets a closed pipe
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err
    assert json.loads(js.read_text())["num_classes"] == 32


def test_long_classes_are_cut_on_the_terminal_not_in_json(capsys, tmp_path):
    """Four classes of 30 strided positions each: written out, a class is ~150 characters (750 positions: 4,000); the
    terminal shows its start and its size, `--json` every member."""
    out_json = tmp_path / "d.json"
    code, out, _ = run(capsys, "analyze", "dilated(n=120, window=8, dilation=4)", "--json", str(out_json))
    assert code == 0
    line = next(s for s in out.splitlines() if s.startswith("  (none; classes:"))
    assert line.count("(30 positions)") == 4 and len(line) < 400
    data = json.loads(out_json.read_text())
    assert sorted(len(c) for c in data["diagram"]["classes"]) == [30, 30, 30, 30]


def test_analyze_method_picks_the_route_and_changes_no_number(capsys):
    """``--method`` (flow_summary's `method`): the bit-packed route reports what the structured route reports; the
    structured route's refusal names it for the command line too."""
    spec = "sliding_window(n=64, left=3) | attention_sinks(n=64, num=2)"
    rc, auto, _ = run(capsys, "analyze", spec, "--layers", "2", "8")
    assert rc == 0 and "route: structured" in auto
    rc, packed, _ = run(capsys, "analyze", spec, "--layers", "2", "8", "--method", "bitpacked")
    assert rc == 0 and "route: bitpacked (requested)" in packed
    strip = lambda text: [x for x in text.splitlines() if not x.startswith("route:")]
    assert strip(packed) == strip(auto)
    rc, _, err = run(capsys, "analyze", spec, "--method", "fast")
    assert rc == 2 and "--method" in err and "bitpacked" in err


def test_quotient_limit_option_and_an_accurate_message(capsys, tmp_path):
    """A fresh user: a dense mask of 3000 classes (a random sparse DAG) got depth, width and edges "not computed" from
    ``analyze`` with no way to raise the limit, and ``FlowSummary.diagram()`` said they were in the summary. Now
    ``--quotient-limit`` raises it (the numbers equal networkx's: longest path, edges of the transitive reduction),
    and the message says what the summary holds."""
    import networkx as nx

    from hassejax.errors import MaskError
    from hassejax.order import flow_summary

    m = np.tril(np.random.default_rng(0).random((3000, 3000)) < 0.002, -1)
    path = tmp_path / "m.npy"
    np.save(path, m)
    assert main(["analyze", str(path), "--max-edges", "0"]) == 0
    assert "depth (longest chain of classes): not computed" in capsys.readouterr().out
    with pytest.raises(MaskError, match="The summary has no depth, width or number of edges either"):
        flow_summary(m).diagram()
    assert main(["analyze", str(path), "--max-edges", "0", "--quotient-limit", "4000"]) == 0
    out = capsys.readouterr().out
    g = nx.transitive_reduction(nx.DiGraph([(int(j), int(i)) for i, j in zip(*np.nonzero(m))]))  # key j -> query i
    assert f"depth (longest chain of classes): {nx.dag_longest_path_length(g) + 1}" in out
    assert f"Hasse edges (covering pairs): {g.number_of_edges()}" in out


def test_derive_in_python_refuses_an_unknown_family_or_option_by_name():
    """A docstring review: `derive` let a raw KeyError (unknown family) or TypeError (an option the family does not
    take) escape; both are TaskErrors naming what the family takes."""
    from hassejax.cli import derive
    from hassejax.errors import TaskError

    with pytest.raises(
        TaskError, match=r"`family` must be one of \['autoregressive', 'block_generation', 'butterfly'\]"
    ):
        derive("nope", 4)
    with pytest.raises(TaskError, match=r"the butterfly family takes the options \['boundary'\]; got \['block_size'\]"):
        derive("butterfly", 4, block_size=2)
    with pytest.raises(TaskError, match=r"the block_generation family needs the options \[.block_size.\]"):
        derive("block_generation", 4)
    assert derive("butterfly", 4, boundary="neighbour")["audit"].ok


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--n", "1", "butterfly"], "`--n` must be an int >= 2; got 1."),
        (
            ["block_generation", "--n", "7", "--block-size", "2"],
            "`--block-size` must divide `--n`; got --n 7, --block-size 2 (pad the sequence to a multiple of "
            "--block-size).",
        ),
    ],
)
def test_derive_errors_name_the_flags(capsys, argv, message):
    """A fresh user: ``derive butterfly --n 1`` said "`n` must be an int >= 2", the library's argument, where the
    command line has the flag ``--n`` (and ``--block-size`` for `block_size`)."""
    rc, _, err = run(capsys, "derive", *argv)
    assert rc == 2 and err.strip() == f"hassejax: error: {message}", err
