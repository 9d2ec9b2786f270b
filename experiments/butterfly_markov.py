"""Butterfly, causal and Block Two-Stream Transformers on Markov-chain data with a known answer.

Trains three models of the same size with the same optimiser on sequences of a random
first-order Markov chain (spec hasse.md §3.1–3.3 layouts, §4 models) and compares the
held-out per-token losses with the exact conditional entropies:

- ``H1 = H(X_t | X_{t−1})`` (the floor of next-token prediction),
- ``H2 = H(X_t | X_{t−1}, X_{t+1})`` (the interior floor of Butterfly prediction),
- and the exact floor of every layout averaged over the positions it actually predicts
  (boundaries included: Butterfly's first and last tokens have one neighbour; Block
  Two-Stream predicts block `b` from the prefix `w_1..w_{bl}`).

Acceptance (issue 4): Butterfly ≤ H1 − ½(H1 − H2) and ≤ 1.1·H2 (with H1 − H2 ≥ 0.2 nats);
causal ≤ 1.1·H1. Also recorded: the float32 training–inference consistency of the trained
Block Two-Stream model and a bit-for-bit leak check of the trained models.

Writes ``OUT/butterfly_markov/butterfly_markov.json`` (every number, seeds, versions) and
``training_curves.png`` / ``.pdf``. Usage::

    python experiments/butterfly_markov.py [--out paper_figures] [--quick]
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from _common import Output, cli

from hassejax.nn import (
    TrainConfig,
    Transformer,
    bayes_loss,
    block_two_stream_layout,
    butterfly_layout,
    causal_layout,
    entropy_rate,
    generate_blocks,
    layout_loss,
    optimal_loss,
    random_markov_chain,
    stationary_distribution,
    train,
    two_sided_entropy,
)

NAME = "butterfly_markov"


# The sequences below are sampled from the chain (or its tokens shifted mod V): valid ids by
# construction, so the programs skip the model's id check, an eqx.error_if host callback that
# would keep them out of JAX's persistent compilation cache.
@eqx.filter_jit
def _logits(model, layout, seq):
    return layout.logits(model, seq, check_ids=False)


@eqx.filter_jit
def _per_sequence_loss(model, layout, seqs):
    return jax.vmap(lambda s: layout_loss(model, layout, s[None], check_ids=False))(seqs)


def _versions() -> dict:
    out = {"python": sys.version.split()[0], "platform": platform.platform(), "backend": jax.default_backend()}
    for pkg in ("jax", "jaxlib", "equinox", "optax", "numpy", "scipy", "matplotlib", "hassejax"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _pick_chain(vocab: int, concentration: float, first_seed: int, min_gap: float):
    """The first seed >= first_seed whose chain has H1 − H2 >= min_gap (all seeds tried are recorded)."""
    tried = []
    for seed in range(first_seed, first_seed + 100):
        chain = random_markov_chain(jax.random.key(seed), vocab, concentration)
        h1, h2 = entropy_rate(chain), two_sided_entropy(chain)
        tried.append({"seed": seed, "H1": h1, "H2": h2})
        if h1 - h2 >= min_gap:
            return seed, chain, tried
    raise RuntimeError(f"no chain with H1 - H2 >= {min_gap} among seeds {first_seed}..{first_seed + 99}")


def _consistency_float32(model, layout, seqs, block_size: int) -> dict:
    """Max |training-layout logits − teacher-forced generate_blocks logits| over the sequences."""
    n = layout.sequence_length
    worst, scale = 0.0, 0.0
    for seq in seqs:
        par = np.asarray(_logits(model, layout, seq))[n:].reshape(n // block_size, block_size, -1)
        gen = np.asarray(generate_blocks(model, seq[:0], n // block_size, teacher=seq, block_size=block_size).logits)
        worst = max(worst, float(np.abs(gen - par).max()))
        scale = max(scale, float(np.abs(par).max()))
    return {
        "max_abs_diff": worst,
        "logit_scale": scale,
        "relative": worst / scale,
        "sequences": len(seqs),
        "dtype": "float32",
        "passes_1e-5_relative": worst <= 1e-5 * scale,
    }


def _leak_check(model, layout, seq, positions) -> dict:
    """Change w_k: the slot predicting w_k must keep its logits bit for bit."""
    slot_of = {int(t): s for s, t in enumerate(np.asarray(layout.target_index)) if t >= 0}
    base = np.asarray(_logits(model, layout, seq))
    identical, elsewhere = 0, 0
    for k in positions:
        other = seq.at[k].set((int(seq[k]) + 1) % model.vocab_size)
        out = np.asarray(_logits(model, layout, other))
        identical += int(np.array_equal(out[slot_of[k]], base[slot_of[k]]))
        elsewhere += int(np.any(out != base))
    return {
        "positions": len(positions),
        "bit_identical": identical,
        "changed_elsewhere": elsewhere,
        "passes": identical == len(positions) and elsewhere > 0,
    }


def _plot(results: dict, h: dict, out_dir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    colours = {"causal": "tab:blue", "block_two_stream": "tab:green", "butterfly": "tab:red"}
    for name, res in results.items():
        c = colours[name]
        tl = np.asarray(res["train_loss"])
        w = max(1, len(tl) // 40)
        smooth = np.convolve(tl, np.ones(w) / w, mode="valid")
        ax.plot(np.arange(w, len(tl) + 1), smooth, color=c, alpha=0.3, lw=1)
        ax.plot(res["eval_steps"], res["eval_loss"], color=c, lw=2, marker="o", ms=3, label=f"{name} (held-out)")
        ax.axhline(res["optimal_loss"], color=c, ls=":", lw=1.2)
    ax.axhline(h["H1"], color="k", ls="--", lw=1, label=f"H1 = H(X_t | X_t−1) = {h['H1']:.3f}")
    ax.axhline(h["H2"], color="0.4", ls="-.", lw=1, label=f"H2 = H(X_t | X_t±1) = {h['H2']:.3f}")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("per-token cross-entropy (nats)")
    top = max(h["H_pi"], h["H1"]) * 1.25
    ax.set_ylim(h["H2"] * 0.85, top)
    ax.set_title(
        "Markov chain (V = 8): held-out loss vs exact entropies\n"
        "dotted: each layout's exact floor; faint: training batch loss (smoothed)",
        fontsize=9,
    )
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    paths = []
    for ext in ("png", "pdf"):
        p = out_dir / f"training_curves.{ext}"
        fig.savefig(p, dpi=150)
        paths.append(str(p))
    plt.close(fig)
    return paths


def main(out: Path, quick: bool = False) -> dict:
    """Train the three layouts, write the figure and JSON into ``out / NAME``; return a summary with "key"."""
    t_start = time.time()

    n, block_size, vocab, concentration = (8, 4, 8, 0.5) if quick else (16, 4, 8, 0.5)
    seeds = {"chain_first": 0, "model": 1, "train": 2, "held_out": 3, "checks": 4}
    steps = 40 if quick else 500
    cfg = TrainConfig(steps=steps, batch_size=64, learning_rate=3e-3, warmup_steps=steps // 10, eval_every=steps // 10)
    model_cfg = {"num_layers": 2, "d_model": 64, "num_heads": 4, "mlp_ratio": 4, "dtype": "float32"}
    if quick:  # smoke run: one small layer (the compiled training step is about half the size)
        model_cfg.update(num_layers=1, d_model=16, num_heads=2, mlp_ratio=1)
    held_out_size = 256 if quick else 4096

    seed, chain, tried = _pick_chain(vocab, concentration, seeds["chain_first"], 0.2)
    pi = stationary_distribution(chain.transition)
    h = {
        "H1": entropy_rate(chain),
        "H2": two_sided_entropy(chain),
        "H_pi": float(-(pi * np.log(pi)).sum()),
        "log_V": float(np.log(vocab)),
    }
    print(f"chain seed {seed}: H1 = {h['H1']:.4f}, H2 = {h['H2']:.4f}, H(pi) = {h['H_pi']:.4f} nats", flush=True)

    t0 = time.time()
    layouts = {
        "causal": causal_layout(n),
        "block_two_stream": block_two_stream_layout(n, block_size),
        "butterfly": butterfly_layout(n),
    }
    layout_seconds = time.time() - t0
    held = chain.sample(jax.random.key(seeds["held_out"]), held_out_size, n)

    results, models = {}, {}
    for name, lay in layouts.items():
        t0 = time.time()
        model = Transformer(
            model_cfg["num_layers"],
            model_cfg["d_model"],
            model_cfg["num_heads"],
            vocab_size=vocab,
            num_positions=n + 1,
            key=jax.random.key(seeds["model"]),
            mlp_ratio=model_cfg["mlp_ratio"],
            dtype=jnp.float32,
        )
        opt = optimal_loss(chain, lay, num_layers=model_cfg["num_layers"])

        def report(step, loss, name=name, opt=opt):
            print(f"  {name:17s} step {step:5d}  held-out {loss:.4f}  (floor {opt:.4f})", flush=True)

        model, hist = train(
            model,
            lay,
            lambda k: chain.sample(k, cfg.batch_size, n),
            cfg,
            key=jax.random.key(seeds["train"]),
            held_out=held,
            callback=report,
        )
        models[name] = model
        per_seq = np.asarray(_per_sequence_loss(model, lay, held), dtype=np.float64)
        bayes = bayes_loss(chain, lay, held, num_layers=model_cfg["num_layers"])
        results[name] = {
            "slots": lay.num_slots,
            "labelled_slots": int(np.sum(np.asarray(lay.labelled))),
            "optimal_loss": opt,
            "final_held_out_loss": hist.final_eval_loss,
            "held_out_standard_error": float(per_seq.std(ddof=1) / np.sqrt(len(per_seq))),
            "bayes_loss_on_held_out": bayes,
            "excess_over_bayes_on_held_out": hist.final_eval_loss - bayes,
            "gap_to_optimum": hist.final_eval_loss - opt,
            "eval_steps": hist.eval_steps.tolist(),
            "eval_loss": hist.eval_loss.tolist(),
            "train_loss": hist.train_loss.tolist(),
            "seconds": time.time() - t0,
        }

    bf, ca = results["butterfly"]["final_held_out_loss"], results["causal"]["final_held_out_loss"]
    acceptance = {
        "H1_minus_H2": h["H1"] - h["H2"],
        "gap_at_least_0.2": h["H1"] - h["H2"] >= 0.2,
        "butterfly_threshold_H1_minus_half_gap": h["H1"] - 0.5 * (h["H1"] - h["H2"]),
        "butterfly_below_midpoint": bf <= h["H1"] - 0.5 * (h["H1"] - h["H2"]),
        "butterfly_over_H2": bf / h["H2"],
        "butterfly_within_10pct_of_H2": bf <= 1.1 * h["H2"],
        "butterfly_over_its_exact_floor": bf / results["butterfly"]["optimal_loss"],
        "causal_over_H1": ca / h["H1"],
        "causal_within_10pct_of_H1": ca <= 1.1 * h["H1"],
    }
    t0 = time.time()
    check_seqs = chain.sample(jax.random.key(seeds["checks"]), 4, n)
    checks = {
        "block_two_stream_consistency": _consistency_float32(
            models["block_two_stream"], layouts["block_two_stream"], check_seqs, block_size
        ),
        "leak_block_two_stream": _leak_check(
            models["block_two_stream"], layouts["block_two_stream"], check_seqs[0], range(n)
        ),
        "leak_butterfly": _leak_check(models["butterfly"], layouts["butterfly"], check_seqs[1], range(n)),
    }

    check_seconds = time.time() - t0
    out_dir = Path(out) / NAME
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = _plot(results, h, out_dir)
    record = {
        "experiment": NAME,
        "quick": quick,
        "entropies_nats": h,
        "chain": {
            "vocab_size": vocab,
            "concentration": concentration,
            "seed": seed,
            "seeds_tried": tried,
            "transition": np.asarray(chain.transition).tolist(),
            "stationary": pi.tolist(),
        },
        "sequence_length": n,
        "block_size": block_size,
        "model": model_cfg,
        "train_config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__},
        "held_out_sequences": held_out_size,
        "results": results,
        "acceptance": acceptance,
        "checks": checks,
        "layout_seconds": layout_seconds,
        "check_seconds": check_seconds,
        "total_seconds": time.time() - t_start,
        "figures": figures,
    }
    payload = {k: v for k, v in record.items() if k not in ("experiment", "seeds", "versions")}
    path = Output(out, NAME).write_json({"platform": _versions(), **payload}, seeds=seeds)
    print(f"wrote {path} and {', '.join(figures)}")
    fin = {k: v["final_held_out_loss"] for k, v in results.items()}
    record["key"] = (
        f"butterfly {fin['butterfly']:.3f} vs H2 {h['H2']:.3f} (x{fin['butterfly'] / h['H2']:.3f}); "
        f"causal {fin['causal']:.3f} vs H1 {h['H1']:.3f} (x{fin['causal'] / h['H1']:.3f})"
    )
    return record


if __name__ == "__main__":
    cli(main, NAME, __doc__)
