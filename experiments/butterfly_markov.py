"""Butterfly, causal and Block Two-Stream Transformers on Markov-chain data with a known answer.

Trains three models of the same size with the same optimiser on sequences of a random
first-order Markov chain (spec hasse.md §3.1–3.3 layouts, §4 models) and compares the
held-out per-token losses with the exact conditional entropies:

- ``H1 = H(X_t | X_{t−1})`` (the floor of next-token prediction),
- ``H2 = H(X_t | X_{t−1}, X_{t+1})`` (the interior floor of Butterfly prediction),
- and each layout's own exact floor (:func:`hassejax.nn.floors.target_floors`): per target,
  ``H(X_t | X_seen)`` with the positions the slot sees through ``R^(L)`` of its mask, and their
  mean (:func:`hassejax.nn.optimal_loss`). Boundaries count: Butterfly's first and last tokens
  see one neighbour, so its floor is above H2; Block Two-Stream predicts block `b` from the
  prefix ``w_1..w_{bl}`` only.

Each model is drawn and stated against its own floor (``final_over_own_floor``).
Acceptance (issue 4): Butterfly ≤ H1 − ½(H1 − H2) and ≤ 1.1·H2 (with H1 − H2 ≥ 0.2 nats);
causal ≤ 1.1·H1. Also recorded and drawn (``checks.png``): the float32 training–inference
consistency of the trained Block Two-Stream model block by block, a bit-for-bit leak check of
the three trained models, and the leak audit and supervision densities of the three merged
tasks (:func:`hassejax.tasks.audit`).

Writes ``OUT/butterfly_markov/butterfly_markov.json`` (every number, seeds, versions),
``training_curves.png`` / ``.pdf`` and ``checks.png`` / ``.pdf``. Usage::

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
import matplotlib.pyplot as plt
import numpy as np
from _common import Output, cli, sci_tex
from matplotlib.ticker import MaxNLocator

from hassejax.nn import (
    TrainConfig,
    Transformer,
    bayes_loss,
    block_two_stream_layout,
    butterfly_layout,
    causal_layout,
    entropy_rate,
    generate_blocks,
    optimal_loss,
    random_markov_chain,
    stationary_distribution,
    train,
    two_sided_entropy,
)
from hassejax.nn.floors import target_floors
from hassejax.plot.bounds import fmt_upper
from hassejax.plot.style import figsize
from hassejax.tasks import audit, autoregressive, block_generation, butterfly

FLOAT64 = False  # JAX's default precision, as when run on its own; reproduce.py sets it before main()

NAME = "butterfly_markov"


# The sequences below are sampled from the chain (or its tokens shifted mod V): valid ids by
# construction, so the programs skip the model's id check, an eqx.error_if host callback that
# would keep them out of JAX's persistent compilation cache.
@eqx.filter_jit
def _logits(model, layout, seq):
    return layout.logits(model, seq, check_ids=False)


@eqx.filter_jit
def _slot_nll(model, layout, seqs):
    """NLL (nats) of every slot's target on every sequence, float `(m, slots)`; 0 at unlabelled slots."""

    def one(seq):
        logp = jax.nn.log_softmax(layout.logits(model, seq, check_ids=False), axis=-1)
        tgt = layout.target_index
        nll = -jnp.take_along_axis(logp, seq[jnp.maximum(tgt, 0)][:, None], axis=1)[:, 0]
        return jnp.where(tgt >= 0, nll, 0.0)

    return jax.vmap(one)(seqs)


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
    per_block = np.zeros(n // block_size)
    scale = 0.0
    for seq in seqs:
        par = np.asarray(_logits(model, layout, seq))[n:].reshape(n // block_size, block_size, -1)
        gen = np.asarray(generate_blocks(model, seq[:0], n // block_size, teacher=seq, block_size=block_size).logits)
        per_block = np.maximum(per_block, np.abs(gen - par).max(axis=(1, 2)))
        scale = max(scale, float(np.abs(par).max()))
    worst = float(per_block.max())
    return {
        "max_abs_diff_per_block": per_block.tolist(),
        "max_abs_diff": worst,
        "logit_scale": scale,
        "relative": worst / scale,
        "sequences": len(seqs),
        "dtype": "float32",
        "passes_1e-5_relative": worst <= 1e-5 * scale,
    }


def _leak_check(model, layout, seq, positions) -> dict:
    """Change w_k: the slot predicting w_k must keep its logits bit for bit (k over `positions`, all targets).

    `changed_elsewhere` counts the k whose change moved some logit at all (the perturbation took
    effect); a token that is no slot's input (w_n in the causal layout) moves none.
    """
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
        "passes": identical == len(positions),
    }


COLOURS = {"causal": "tab:blue", "block_two_stream": "tab:green", "butterfly": "tab:red"}
LABELS = {"causal": "causal", "block_two_stream": "Block Two-Stream", "butterfly": "Butterfly"}


def _plot_curves(results: dict, h: dict, o: Output) -> None:
    """Held-out loss against each model's own floor (left) and per target position (right)."""
    fig, (ax, bx) = plt.subplots(1, 2, layout="constrained", figsize=figsize(6.5, 0.52))
    offsets = dict(zip(results, (-0.25, 0.0, 0.25)))
    for name, res in results.items():
        c = COLOURS[name]
        tl = np.asarray(res["train_loss"])
        w = max(1, len(tl) // 40)
        smooth = np.convolve(tl, np.ones(w) / w, mode="valid")
        ax.plot(np.arange(w, len(tl) + 1), smooth, color=c, alpha=0.25, lw=0.8)
        label = (
            f"{LABELS[name]}: final {res['final_held_out_loss']:.4f} = "
            f"{res['final_over_own_floor']:.3f} × floor {res['optimal_loss']:.4f} "
            f"(held-out s.e. {res['held_out_standard_error']:.4f})"
        )
        if res["gap_to_optimum"] < 0:  # below its exact floor: the held-out sample, not the model
            label += (
                f"\n    {-res['gap_to_optimum']:.4f} = {-res['gap_to_optimum_in_standard_errors']:.1f} s.e. below its floor: "
                f"a finite held-out sample (the Bayes predictor scores {res['bayes_loss_on_held_out']:.4f} on it);\n"
                f"    {res['excess_over_bayes_on_held_out']:.4f} above the Bayes predictor on the same held-out sequences"
            )
        ax.plot(res["eval_steps"], res["eval_loss"], color=c, lw=1.4, marker="o", ms=2.5, label=label)
        ax.axhline(res["optimal_loss"], color=c, ls=":", lw=1.2)
        floors = res["target_floors"]
        t = np.asarray(floors["targets"]) + 1 + offsets[name]
        # one floor per discrete target: a short bar, no line joining targets
        bx.plot(t, floors["floors"], "_", color=c, ms=7, mew=1.3, alpha=0.9)
        bx.plot(t, res["held_out_loss_per_target"], "o", color=c, ms=2.5)
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("held-out cross-entropy (nats)")
    top = max(max(res["eval_loss"]) for res in results.values())  # the step-0 losses, above H(pi)
    ax.set_ylim(h["H2"] * 0.9, max(top, h["H_pi"], h["H1"]) * 1.03)
    ax.set_title("held-out loss;\ndotted: each model's floor")
    ax.plot([], [], color="0.4", alpha=0.35, lw=0.8, label="faint: training loss of the same model (running mean)")
    bx.set_xlabel("target position $t$")
    bx.set_ylabel("cross-entropy (nats)")
    bx.set_xticks(range(1, h["n"] + 1, 1 if h["n"] <= 8 else 3))
    bx.set_title(
        "per target: final loss (dots), floor $H(X_t \\mid X_{\\mathrm{seen}})$ (bars);\n"
        "models side by side at $t - 0.25$, $t$, $t + 0.25$\n(" + ", ".join(LABELS[k] for k in offsets) + ")"
    )
    lo, hi = bx.get_ylim()
    right = bx.twinx()
    right.set_ylim(lo, hi)
    marks = [(h["H2"], f"$H_2$ {h['H2']:.3f}"), (h["H1"], f"$H_1$ {h['H1']:.3f}")]
    if lo <= h["H_pi"] <= hi:  # the first block's Block Two-Stream floor (its queries see no token)
        marks.append((h["H_pi"], f"$H(\\pi)$ {h['H_pi']:.3f}"))
    right.set_yticks([v for v, _ in marks], [t for _, t in marks])
    for value, _ in marks:
        bx.axhline(value, color="0.6", lw=0.6, ls="--", zorder=0)
    fig.legend(loc="outside lower center", ncol=1, frameon=False)
    fig.suptitle(
        f"Markov chain (vocabulary size {h['V']}, $n = {h['n']}$): each model against its own exact floor\n"
        "(Li & Guo, arXiv:2606.09951)"
    )
    o.savefig(fig, "training_curves")


def _plot_checks(results: dict, checks: dict, audits: dict, o: Output) -> None:
    """Training-inference consistency, leak audit and supervision density in one figure."""
    fig, (ax, bx, cx) = plt.subplots(
        1, 3, layout="constrained", figsize=figsize(6.5, 0.62), gridspec_kw={"width_ratios": [0.8, 1.2, 1.0]}
    )
    cons = checks["block_two_stream_consistency"]
    diffs = np.asarray(cons["max_abs_diff_per_block"])
    blocks = np.arange(1, len(diffs) + 1)
    floor = 1e-10
    ax.bar(blocks, np.maximum(diffs, floor), color=COLOURS["block_two_stream"])
    for b_, d_ in zip(blocks, diffs):
        if d_ == 0:
            ax.text(b_, floor, "0", ha="center", va="bottom")
        else:  # inside the bar, at its geometric middle
            ax.text(
                b_, np.sqrt(d_ * floor), sci_tex(fmt_upper(d_, 2)), ha="center", va="center", rotation=90, color="w"
            )
    ax.axhline(cons["threshold"], color="k", ls="--", lw=0.8)
    ax.text(0.5, cons["threshold"] * 1.5, "$10^{-5}$ × logit scale", va="bottom")
    ax.set_yscale("log")
    ax.set_ylim(floor, cons["threshold"] * 100)
    ax.set_xticks(blocks)
    ax.set_xlabel("block $b$")
    ax.set_ylabel(r"max $|\Delta$ logit$|$ (float32)")
    ax.set_title(
        f"Block Two-Stream, {cons['sequences']} sequences:\n"
        f"training = inference, max {sci_tex(fmt_upper(cons['max_abs_diff'], 2))}\n"
        f"= {sci_tex(fmt_upper(cons['relative'], 2))} × logit scale"
    )
    names = list(results)
    y = np.arange(len(names))[::-1]
    hgt = 0.26
    bars = (
        ([audits[k]["labelled_slots"] for k in names], "#9ecae1", "labelled slots"),
        (
            [checks[f"leak_{k}"]["bit_identical"] for k in names],
            "#3182bd",
            "of them bit-identical when\ntheir target token changes",
        ),
        ([audits[k]["leaks"] for k in names], "tab:red", "leaks found by the audit"),
    )
    for i, (val, col, label) in enumerate(bars):
        pos = y + (1 - i) * hgt
        bx.barh(pos, val, hgt, color=col, label=label)
        for p_, v_ in zip(pos, val):  # the leak count named: a bar of length 0 has nothing else to show
            txt = f" {v_} leak{'' if v_ == 1 else 's'}" if i == 2 else f" {v_}"
            bx.text(v_, p_, txt, va="center", color=col if i == 2 else "k")
    bx.set_yticks(y, [LABELS[k] for k in names])
    bx.set_xlim(0, max(audits[k]["labelled_slots"] for k in names) * 1.3)
    bx.set_xlabel("slots")
    bx.xaxis.set_major_locator(MaxNLocator(integer=True))
    bx.set_title("leak audit (mask closure)\nand leak check (trained model)")
    dens = (
        ([100 * audits[k]["token_density"] for k in names], "#a1d99b", "sequence tokens that are targets"),
        ([100 * audits[k]["slot_density"] for k in names], "#31a354", "slots that are labelled"),
    )
    for i, (val, col, label) in enumerate(dens):
        pos = y + (0.5 - i) * hgt * 1.4
        cx.barh(pos, val, hgt * 1.4, color=col, label=label)
        for p_, v_ in zip(pos, val):
            cx.text(v_, p_, f" {v_:.1f}", va="center")
    cx.set_yticks(y, [])
    cx.set_xlim(0, 135)
    cx.set_xticks([0, 50, 100])
    cx.set_xlabel("supervised share (%)")
    cx.set_title("supervision density")
    fig.legend(loc="outside lower center", ncol=2, frameon=False)
    fig.suptitle(
        f"The three layouts of the Markov experiment ($n = {audits['n']}$): Block Two-Stream training = inference;\n"
        "no leak and supervision density for all three (Li & Guo, arXiv:2606.09951)"
    )
    o.savefig(fig, "checks")


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
        nll = np.asarray(_slot_nll(model, lay, held), dtype=np.float64)  # (sequences, slots)
        floors = target_floors(chain, lay, num_layers=model_cfg["num_layers"])
        per_seq = nll[:, floors.slots].mean(axis=1)
        bayes = bayes_loss(chain, lay, held, num_layers=model_cfg["num_layers"])
        results[name] = {
            "slots": lay.num_slots,
            "labelled_slots": int(np.sum(np.asarray(lay.labelled))),
            "optimal_loss": opt,
            "target_floors": {
                "targets": floors.targets,
                "slots": floors.slots,
                "floors": floors.floors,
                "seen": [list(v) for v in floors.seen],
                "num_layers": model_cfg["num_layers"],
            },
            "final_held_out_loss": hist.final_eval_loss,
            "final_over_own_floor": hist.final_eval_loss / opt,
            "held_out_loss_per_target": nll[:, floors.slots].mean(axis=0),
            "held_out_standard_error": float(per_seq.std(ddof=1) / np.sqrt(len(per_seq))),
            "bayes_loss_on_held_out": bayes,
            "excess_over_bayes_on_held_out": hist.final_eval_loss - bayes,
            "gap_to_optimum": hist.final_eval_loss - opt,
            "gap_to_optimum_in_standard_errors": (hist.final_eval_loss - opt)
            / float(per_seq.std(ddof=1) / np.sqrt(len(per_seq))),
            "bayes_minus_floor_on_held_out": bayes - opt,
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
        "leak_causal": _leak_check(models["causal"], layouts["causal"], check_seqs[2], range(1, n)),
    }
    checks["block_two_stream_consistency"]["threshold"] = 1e-5 * checks["block_two_stream_consistency"]["logit_scale"]
    checks["leak_causal"]["note"] = "w_n is no slot's input in the causal layout: changing it moves no logit"
    audits = {"n": n}
    for name, task in (
        ("causal", autoregressive(n).merge()),
        ("block_two_stream", block_generation(n, block_size).merge()),
        ("butterfly", butterfly(n).merge()),
    ):
        report = audit(task)
        audits[name] = {
            "slots": task.n,
            "labelled_slots": len(report.slots),
            "leaks": len(report.leaks),
            "differ_from_source_task": len(report.mismatches),
            "token_density": report.token_density,
            "slot_density": report.slot_density,
            "mask_equals_layout": bool(np.array_equal(np.asarray(task.mask), np.asarray(layouts[name].mask))),
        }

    check_seconds = time.time() - t0
    o = Output(out, NAME)
    _plot_curves(results, {**h, "V": vocab, "n": n}, o)
    _plot_checks(results, checks, audits, o)
    figures = [str(f.relative_to(o.dir)) for f in o.files]  # relative to the output folder (this JSON's)
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
        "audits": audits,
        "layout_seconds": layout_seconds,
        "check_seconds": check_seconds,
        "total_seconds": time.time() - t_start,
        "figures": figures,
    }
    payload = {k: v for k, v in record.items() if k not in ("experiment", "seeds", "versions")}
    path = o.write_json({"platform": _versions(), **payload}, seeds=seeds)
    print(f"wrote {path} and {', '.join(figures)} in {o.dir}")
    fin = {k: v["final_held_out_loss"] for k, v in results.items()}
    record["key"] = "; ".join(
        f"{k} {fin[k]:.4f} = {fin[k] / results[k]['optimal_loss']:.3f} x its floor {results[k]['optimal_loss']:.4f}"
        for k in ("butterfly", "causal", "block_two_stream")
    )
    return record


if __name__ == "__main__":
    cli(main, NAME, __doc__)
