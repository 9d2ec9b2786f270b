"""The twisted softmax energy is not convex along `W2` geodesics (Castin et al., arXiv:2501.18322; spec dynamics.md §6).

Softmax attention with `V = I`, `A = −I` (`V = −A`, `A` symmetric) is the gradient flow of
`E(μ) = ½ ∬ exp(xᵀAy) dμ dμ` for the twisted Wasserstein metric (derived). On Gaussians
`E = ½ det(I − Σ²)^{-1/2} exp(−αᵀ(I + Σ)⁻¹α)` (:func:`hassejax.dynamics.energy.gaussian_interaction_energy`).
Along three `W2` (Bures–Wasserstein) geodesics `s ↦ N(α_s, Σ_s)` between Gaussians in `R²`
(:func:`hassejax.dynamics.wasserstein.gaussian_geodesic`), `d²E/ds²` by a central difference
(:func:`hassejax.dynamics.convexity.energy_along_geodesic`, step `h = 10⁻³`, checked against
`h = 2·10⁻³` and, on the translation, against the analytic second derivative):

- a translation at fixed `Σ` through `α = 0` (`E'' < 0` near the middle: spec §6's example);
- a centred (anisotropic) scaling `0.05 I → diag(0.6, 0.4)` at `α = 0` (`E'' > 0` on this geodesic);
- a geodesic that moves the mean and changes the covariance.

Only `W2` geodesics are examined; the twisted metric's own geodesics are not computed.
"""

from __future__ import annotations

import jax

FLOAT64 = True  # JAX's float64 mode: on here, and again before main() when reproduce.py runs it
jax.config.update("jax_enable_x64", FLOAT64)

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli

from hassejax.dynamics.convexity import energy_along_geodesic, negative_intervals
from hassejax.dynamics.wasserstein import gaussian_w2
from hassejax.plot.style import TEXT_WIDTH, figsize

NAME = "energy_convexity"
A = -np.eye(2)
STEP = 1e-3
S_T = np.array([[0.5, 0.1], [0.1, 0.3]])
GEODESICS = {
    "translation": {
        "label": "translation, $\\Sigma$ fixed",
        "mean0": np.array([-1.5, -0.5]), "cov0": S_T, "mean1": np.array([1.5, 0.5]), "cov1": S_T,
    },
    "centred_scaling": {
        "label": "centred scaling $0.05I \\to \\mathrm{diag}(0.6, 0.4)$",
        "mean0": np.zeros(2), "cov0": 0.05 * np.eye(2), "mean1": np.zeros(2), "cov1": np.diag([0.6, 0.4]),
    },
    "mixed": {
        "label": "mixed: mean and covariance",
        "mean0": np.array([-1.0, 0.5]), "cov0": np.diag([0.1, 0.6]),
        "mean1": np.array([1.0, 0.0]), "cov1": np.array([[0.7, -0.2], [-0.2, 0.3]]),
    },
}  # fmt: skip


def translation_exact(g: dict, s: np.ndarray) -> np.ndarray:
    """Analytic `d²E/ds²` on the translation: `E(α) = c exp(−αᵀPα)`, `P = (I + Σ)⁻¹`, `α_s = α0 + s u`:
    `E'' = E((2uᵀPα_s)² − 2uᵀPu)` (derived, `A = −I`)."""
    u, S = g["mean1"] - g["mean0"], g["cov0"]
    P = np.linalg.inv(np.eye(2) + S)
    alpha = g["mean0"] + s[:, None] * u
    e = 0.5 / np.sqrt(np.linalg.det(np.eye(2) - S @ S)) * np.exp(-np.einsum("ki,ij,kj->k", alpha, P, alpha))
    return e * ((2 * alpha @ P @ u) ** 2 - 2 * u @ P @ u)


def main(out: Path, quick: bool = False) -> dict:
    o = Output(out, NAME)
    s = np.linspace(0.0, 1.0, 41 if quick else 201)
    results = {}
    for key, g in GEODESICS.items():
        args = (g["mean0"], g["cov0"], g["mean1"], g["cov1"], A, s)
        cur = energy_along_geodesic(*args, step=STEP)
        coarse = energy_along_geodesic(*args, step=2 * STEP)
        d2 = cur.second_derivative
        i = int(np.argmin(d2))
        results[key] = {
            "mean0": g["mean0"], "cov0": g["cov0"], "mean1": g["mean1"], "cov1": g["cov1"],
            "w2_length": gaussian_w2(g["mean0"], g["cov0"], g["mean1"], g["cov1"]),
            "energy": cur.energy, "second_derivative": d2,
            "min_second_derivative": float(d2[i]), "argmin_s": float(s[i]),
            "negative_intervals": negative_intervals(s, d2),
            "step_check_max_abs_diff": float(np.max(np.abs(d2 - coarse.second_derivative))),
        }  # fmt: skip
    exact = translation_exact(GEODESICS["translation"], s)
    results["translation"]["analytic_max_abs_diff"] = float(
        np.max(np.abs(results["translation"]["second_derivative"] - exact))
    )

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=figsize(TEXT_WIDTH, 0.62), layout="constrained")
    for c, (key, g) in enumerate(GEODESICS.items()):
        r = results[key]
        ax1.plot(s, r["energy"], color=f"C{c}", lw=1.3, label=g["label"])
        ax2.plot(s, r["second_derivative"], color=f"C{c}", lw=1.3,
                 label=f"{key.replace('_', ' ')}: min ${r['min_second_derivative']:.3f}$ at $s = {r['argmin_s']:.3f}$")  # fmt: skip
        for a, b in r["negative_intervals"]:
            ax2.axvspan(a, b, color=f"C{c}", alpha=0.12, lw=0)
    ax2.plot(s, exact, color="k", lw=0.8, ls=":", label="translation, analytic")
    ax2.axhline(0.0, color="k", lw=0.6)
    ax1.set_xlabel("$s \\in [0, 1]$ on the $W_2$ geodesic (normalised)")
    ax1.set_ylabel("$E(\\mathcal{N}(\\alpha_s, \\Sigma_s))$")
    ax1.set_title("energy $E = \\iint \\exp(x^\\top A y)\\,d\\mu\\,d\\mu\\;/\\;2$")
    ax1.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1)
    ax1.grid(alpha=0.3)
    ax2.set_xlabel("$s \\in [0, 1]$ on the $W_2$ geodesic (normalised)")
    ax2.set_ylabel("$d^2E/ds^2$ (central difference)")
    tr, mx = results["translation"]["negative_intervals"], results["mixed"]["negative_intervals"]
    ax2.set_title(
        "shaded: $d^2E/ds^2 < 0$ on $s \\in$\n"
        + " (translation), ".join(", ".join(f"[{a:.3f}, {b:.3f}]" for a, b in iv) for iv in (tr, mx))
        + " (mixed)"
    )
    ax2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1)
    ax2.grid(alpha=0.3)
    fig.suptitle(
        "The twisted softmax energy (Castin et al., arXiv:2501.18322), $V = I$, $A = -I$, is not convex\n"
        "along $W_2$ geodesics of Gaussians in $\\mathbb{R}^2$: $d^2E/ds^2$ reaches "
        f"${results['translation']['min_second_derivative']:.3f}$ (translation) and "
        f"${results['mixed']['min_second_derivative']:.3f}$ (mixed);\nalong the centred scaling it stays convex "
        f"(min ${results['centred_scaling']['min_second_derivative']:.3f}$);\n$s$ is normalised to $[0, 1]$ on each "
        "geodesic: the minima are not comparable convexity constants"
    )
    o.savefig(fig, NAME)
    o.write_json(
        {
            "setup": {
                "V": np.eye(2),
                "A": A,
                "energy": "E = 1/2 det(I - Sigma^2)^(-1/2) exp(-alpha^T (I + Sigma)^-1 alpha)",
                "geodesic": "W2 (Bures-Wasserstein) geodesic between Gaussians, closed form "
                "(hassejax.dynamics.wasserstein.gaussian_geodesic)",
                "second_derivative": f"central difference, step {STEP}; checked against step {2 * STEP} "
                "(step_check_max_abs_diff) and, on the translation, the analytic E''",
                "not_examined": "geodesics of the twisted metric itself",
            },
            "s": s,
            "geodesics": results,
        }
    )
    return {
        "key": f"min d2E/ds2: translation {results['translation']['min_second_derivative']:.3f}, "
        f"mixed {results['mixed']['min_second_derivative']:.3f}, centred scaling {results['centred_scaling']['min_second_derivative']:.3f}"
    }


if __name__ == "__main__":
    cli(main, NAME, __doc__)
