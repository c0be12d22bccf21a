"""The LLM lag comparison's report, from its results.csv (the one results schema) and
warm_start.json: summary.csv (read by the claims `llm-lag`, `llm-lag-delta`,
`llm-lag-rerun`), summary.md and llm_lag.png.

    python experiments/llm_report.py experiments/results/llm_lag_working

summary.csv has one row per variant (`method`) and K: the final held-out greedy and sampled
accuracy (mean ± 95% t-interval over seeds, gain over the warm start), the final greedy
accuracy per level, and the metrics averaged over training (reward, length, token TVs,
groups with a signal, entropy, the objective's clip or filter `fraction`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib
import numpy as np
from scipy import stats

from jaxvaco.lab.results import read_results, write_rows

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LEVELS = (1, 2, 3)
LEVEL_COLUMNS = tuple(f"accuracy/level{lv}" for lv in LEVELS)
METRICS = ("reward", "length", "tv/backward", "tv/forward", "tv/total", "groups/mixed",
           "entropy")
FRACTION_COLUMNS = ("grpo/clipped_fraction", "vaco/filtered_fraction")


def slug(variant: str) -> str:
    """A folder name for a variant: "grpo π_T" -> "grpo_pi_T"."""
    text = variant.replace("β", "beta").replace("π", "pi")
    return "".join(c if c.isalnum() or c == "_" else "_" for c in text).strip("_")


def refuse_old_folder(out: Path) -> None:
    """Exit with a message when `out` holds curves written before the comparison ran through
    `jaxvaco.llm.run` (curves.csv, no runs/): they cannot be continued."""
    if (out / "curves.csv").exists() and not (out / "runs").exists():
        raise SystemExit(f"{out} was written by llm_lag.py before it ran through "
                         "jaxvaco.llm.run (curves.csv, no runs/): its runs cannot be "
                         "continued. Choose another --out; its summary.csv stays readable.")


def warm_start_figures(config, out: Path) -> dict:
    """warm_start.json: the held-out greedy accuracy per level and the sampled accuracy
    (key(99), `config.eval.samples` per problem) of the warm start cached in `out`."""
    import jax

    from jaxvaco.llm.evaluation import accuracy, sampled_accuracy
    from jaxvaco.llm.model import Transformer
    from jaxvaco.llm.runner import problems, warm_started
    from jaxvaco.llm.train import model_config

    pool, test = problems(config)
    model, params = Transformer(model_config(config)), warm_started(config, pool, out)
    greedy = np.asarray(jax.jit(lambda p: accuracy(model, p, test))(params))
    sampled = jax.jit(lambda p: sampled_accuracy(model, p, test, jax.random.key(99), 1.0,
                                                 config.eval.samples))(params)
    figures = {"accuracy_by_level": greedy.tolist(), "sampled_accuracy":
               float(np.asarray(sampled).mean())}
    (out / "warm_start.json").write_text(json.dumps(figures, indent=1) + "\n")
    return figures


def mean_ci(x: np.ndarray) -> tuple[float, float]:
    """Mean and half-width of its 95% Student-t interval."""
    half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else 0
    return float(x.mean()), float(half)


def fraction_of(row: dict) -> float:
    """The clip or filter fraction of a row, whichever column its objective filled."""
    return next(row[f] for f in FRACTION_COLUMNS if row.get(f) is not None)


def summarize(rows: list[dict], warm_acc: float, warm_sampled: float | None = None
              ) -> list[dict]:
    """Per variant and K: final greedy and sampled held-out accuracy (mean ± 95% CI over
    seeds, gain over the warm start) and the metrics averaged over training."""
    last = max(r["step"] for r in rows)
    out = []
    for method in dict.fromkeys(r["variant"] for r in rows):
        for k in sorted({r["K"] for r in rows if r["variant"] == method}):
            runs = [r for r in rows if r["variant"] == method and r["K"] == k]
            final = [r for r in runs if r["step"] == last]
            acc, ci = mean_ci(np.array([r["accuracy"] for r in final]))
            sampled, sampled_ci = mean_ci(np.array([r["sampled_accuracy"] for r in final]))
            out.append({"method": method, "K": k, "seeds": len(final), "final_acc": acc,
                        "ci95": ci, "gain": acc - warm_acc, "sampled_acc": sampled,
                        "sampled_ci95": sampled_ci,
                        "sampled_gain": None if warm_sampled is None else sampled - warm_sampled,
                        **{f"acc/level{lv}": np.mean([r[c] for r in final])
                           for lv, c in zip(LEVELS, LEVEL_COLUMNS, strict=True)},
                        **{m: np.mean([r[m] for r in runs]) for m in METRICS},
                        "fraction": np.mean([fraction_of(r) for r in runs])})
    return out


def markdown(summary: list[dict], warm: np.ndarray, warm_sampled: float, steps: int) -> str:
    """The accuracy tables (greedy, sampled: variant × K) and one line per variant and K."""
    head = (f"Warm start: held-out greedy accuracy {warm.mean():.3f} (levels 1/2/3: "
            + "/".join(f"{a:.3f}" for a in warm) + f"), sampled {warm_sampled:.3f}. After "
            f"{steps} RL steps (mean ± 95% t-interval over seeds):")
    ks = sorted({s["K"] for s in summary})
    methods = list(dict.fromkeys(s["method"] for s in summary))
    by = {(s["method"], s["K"]): s for s in summary}
    lines = [head, ""]
    for label, key, ci in (("greedy", "final_acc", "ci95"),
                           ("sampled", "sampled_acc", "sampled_ci95")):
        lines += [f"| {label} accuracy | " + " | ".join(f"K = {k}" for k in ks) + " |",
                  "|---|" + "---|" * len(ks)]
        lines += [f"| {m} | " + " | ".join(
            f"{by[m, k][key]:.3f} ± {by[m, k][ci]:.3f}" if (m, k) in by else "" for k in ks)
            + " |" for m in methods]
        lines.append("")
    lines += ["| method | K | greedy acc (95% CI) | gain | L1 / L2 / L3 | sampled acc (95% CI) "
              "| reward | tv/backward | tv/forward | tv/total | clip/filter frac |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        levels = " / ".join(f"{s[f'acc/level{lv}']:.2f}" for lv in LEVELS)
        lines.append(f"| {s['method']} | {s['K']} | {s['final_acc']:.3f} ± {s['ci95']:.3f} "
                     f"| {s['gain']:+.3f} | {levels} "
                     f"| {s['sampled_acc']:.3f} ± {s['sampled_ci95']:.3f} | {s['reward']:.3f} "
                     f"| {s['tv/backward']:.4f} | {s['tv/forward']:.4f} | {s['tv/total']:.4f} "
                     f"| {s['fraction']:.4f} |")
    return "\n".join(lines) + "\n"


def plot_curves(axes, rows: list[dict], colors: dict, warm_acc: float, warm_sampled: float
                ) -> None:
    """One panel per K: held-out accuracy against the step (solid greedy, dotted sampled)."""
    ks = sorted({r["K"] for r in rows})
    for ax, k in zip(axes, ks, strict=False):
        for m, color in colors.items():
            runs = [r for r in rows if r["variant"] == m and r["K"] == k]
            steps = sorted({r["step"] for r in runs})
            for key, warm, style in (("accuracy", warm_acc, "-"),
                                     ("sampled_accuracy", warm_sampled, ":")):
                mean = [np.mean([r[key] for r in runs if r["step"] == s]) for s in steps]
                ax.plot([0] + steps, [warm] + mean, style, color=color,
                        label=m if key == "accuracy" else None)
        ax.set(title=f"K = {k}", xlabel="RL generation step",
               ylabel="held-out accuracy (mean of seeds)")
    for ax in axes[len(ks):]:
        ax.axis("off")
    axes[0].legend(fontsize=7, title="solid greedy, dotted sampled", title_fontsize=7)


def plot_against_k(axes, summary: list[dict], colors: dict, warm_acc: float,
                   warm_sampled: float) -> None:
    """Final greedy and sampled accuracy (95% CIs), token TVs and the fraction against K."""
    ax_g, ax_s, ax_tv, ax_f = axes[:4]
    ks = sorted({s["K"] for s in summary})
    for i, (m, color) in enumerate(colors.items()):
        sel = [s for s in summary if s["method"] == m]
        x = np.array([s["K"] for s in sel]) + 0.08 * (i - (len(colors) - 1) / 2)
        for ax, key, ci in ((ax_g, "final_acc", "ci95"), (ax_s, "sampled_acc", "sampled_ci95")):
            ax.errorbar(x, [s[key] for s in sel], yerr=[s[ci] for s in sel], marker="o",
                        capsize=3, color=color, label=m)
        for metric, style in (("tv/backward", "-o"), ("tv/forward", "--v")):
            ax_tv.plot(x, [s[metric] for s in sel], style, color=color, label=f"{m} {metric}")
        ax_f.plot(x, [s["fraction"] for s in sel], "-o", color=color, label=m)
    for ax, warm, what in ((ax_g, warm_acc, "greedy"), (ax_s, warm_sampled, "sampled")):
        ax.axhline(warm, color="grey", lw=0.8, ls="--", label="warm start")
        ax.set(xlabel="lag K (generation steps)", ylabel=f"final {what} accuracy (95% CI)")
    ax_tv.set(xlabel="lag K (generation steps)", ylabel="token TV ½|r − 1|, mean over training",
              title="token TV: solid backward, dashed forward")
    ax_f.set(xlabel="lag K (generation steps)", ylabel="share of valid tokens",
             title="GRPO clip / VACO filter fraction")
    for ax in (ax_g, ax_s, ax_tv, ax_f):
        ax.set_xticks(ks)
    for ax in (ax_g, ax_s, ax_f):
        ax.legend(fontsize=7)
    for ax in axes[4:]:
        ax.axis("off")


def plot(rows: list[dict], summary: list[dict], warm_acc: float, warm_sampled: float,
         path: Path) -> None:
    """Top: accuracy curves per K; bottom: the figures against K (`plot_against_k`)."""
    methods = list(dict.fromkeys(r["variant"] for r in rows))
    colors = dict(zip(methods, plt.cm.tab10(np.arange(len(methods))), strict=True))
    cols = max(4, len({r["K"] for r in rows}))
    fig, axes = plt.subplots(2, cols, figsize=(4 * cols, 8), squeeze=False)
    plot_curves(list(axes[0]), rows, colors, warm_acc, warm_sampled)
    plot_against_k(list(axes[1]), summary, colors, warm_acc, warm_sampled)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(out: Path) -> str:
    """summary.csv, summary.md and llm_lag.png of `out`'s results.csv; returns the table."""
    rows = read_results(out / "results.csv")
    warm = json.loads((out / "warm_start.json").read_text())
    warm_acc = np.array(warm["accuracy_by_level"])
    summary = summarize(rows, float(warm_acc.mean()), warm["sampled_accuracy"])
    write_rows(out / "summary.csv", summary)
    table = markdown(summary, warm_acc, warm["sampled_accuracy"], max(r["step"] for r in rows))
    (out / "summary.md").write_text(table)
    plot(rows, summary, float(warm_acc.mean()), warm["sampled_accuracy"], out / "llm_lag.png")
    return table


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="an llm_lag.py --out folder")
    print(report(parser.parse_args().out))
