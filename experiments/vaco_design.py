"""Choose VACO's defaults by experiment (spec §3.2), before the main lag sweep.

Stage `prototype` reproduces the prototype table of spec §3.2 with this implementation:
CartPole-v1, 16 envs × 128 steps, 4 epochs × 4 minibatches of whole trajectories,
lr 2.5e-4 annealed, 500k steps, `fixed` lag K ∈ {0, 4, 16}, greedy evaluation at the end.

Stage `diagnose` tests the explanation of the prototype's failure (see the README): the
per-minibatch normalisation of ρ-weighted advantages.

Stage `grid` runs the design grid on the development environments (CartPole-v1,
Acrobot-v1) at K ∈ {0, 4, 16} with 8 seeds and 300k steps; the criterion is the IQM of
the normalised final greedy return across both environments, all K and all seeds.
Breakout-MinAtar is held out. Each variant (and its K values and seeds) is one compiled program.

    python -m experiments.vaco_design --stage prototype
    python -m experiments.vaco_design --stage grid
    python -m experiments.vaco_design --stage grid --summary-only

Results: experiments/results/vaco_design/<stage>.csv (tidy, resumable) and <stage>.md.
The committed results were measured before the importance weight was made to enter once
(issue 11): there, anchor-β variants with V-trace advantages weighted by ρ_t twice
(ratio π_θ/β times ρ inside Â) and decoupled PPO with V-trace by ρ_t². A rerun measures
the corrected forms under the same names.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from experiments.common import parse_with_retries, run_variant
from jaxvaco.analysis.stats import iqm, normalize_score
from jaxvaco.config import EvalConfig, LagConfig, TrainConfig
from jaxvaco.results import last_evaluated, read_rows

OUT = Path(__file__).resolve().parent / "results" / "vaco_design"
LAGS = (0, 4, 16)

PROTOTYPE_BASE = TrainConfig(num_envs=16, num_steps=128, update_epochs=4, num_minibatches=4,
                             learning_rate=2.5e-4, anneal_lr=True, total_timesteps=500_000,
                             lag=LagConfig(mode="fixed", num_groups=1),
                             eval=EvalConfig(every_chunks=0, num_episodes=16), progress=False)

# Spec §3.1's VACO [paper]: anchor π_T, V-trace with the learner's π_T and V_T, ρ inside Â.
SPEC_VACO = {"algo": "vaco", "vaco.anchor": "learner", "vaco.critic": "learner",
             "vaco.advantages": "vtrace", "vaco.advantage_form": "weighted"}
PPO_VTRACE = {"algo": "ppo", "ppo.critic": "learner", "ppo.advantages": "vtrace"}

PROTOTYPE_VARIANTS = {
    "ppo": {"algo": "ppo"},
    "ppo learner-anchor vtrace (decoupled)": {**PPO_VTRACE, "ppo.anchor": "learner"},
    "ppo behaviour-anchor vtrace": PPO_VTRACE,
    "vaco spec 3.1": SPEC_VACO,
    "vaco align gae": {**SPEC_VACO, "vaco.critic": "behaviour", "vaco.advantages": "gae"},
    "vaco behaviour-anchor d=0.1": {**SPEC_VACO, "vaco.anchor": "behaviour", "vaco.delta": 0.1},
    "ppo values (GAE with V_T)": {"algo": "ppo", "ppo.critic": "learner"},
}


DIAGNOSE_VARIANTS = {
    "vaco spec 3.1, normalize then weight": {**SPEC_VACO,
                                             "vaco.advantage_form": "normalize_then_weight"},
    "vaco spec 3.1, no advantage normalisation": {**SPEC_VACO, "norm_adv": False},
    "ppo behaviour-anchor vtrace, normalize then weight": {
        **PPO_VTRACE, "ppo.advantage_form": "normalize_then_weight"},
}


def design_variants() -> dict[str, dict]:
    """The spec's VACO, the fix of its advantage form, and the anchor / filter / δ / align
    axes around the fixed form; PPO as the reference row."""
    fixed = {**SPEC_VACO, "vaco.advantage_form": "normalize_then_weight"}
    behaviour = {**fixed, "vaco.anchor": "behaviour"}
    return {
        "ppo": {"algo": "ppo"},
        "vaco spec 3.1": SPEC_VACO,
        "vaco ntw": fixed,
        "vaco ntw anchor=behaviour": behaviour,
        "vaco ntw anchor=behaviour filter=sample": {**behaviour, "vaco.filter": "sample"},
        "vaco ntw anchor=behaviour d=0.1": {**behaviour, "vaco.delta": 0.1},
        "vaco align=values anchor=behaviour": {**behaviour, "vaco.advantages": "gae"},
        "vaco ntw anchor=behaviour rho=c=2": {**behaviour, "vaco.rho_bar": 2.0,
                                             "vaco.c_bar": 2.0},
    }


def final_greedy(csv_path: Path) -> dict[tuple[str, str, int], list[float]]:
    """(env, variant, K) -> final greedy evaluation return of every seed."""
    out = defaultdict(list)
    for (env, variant, k, _), row in last_evaluated(read_rows(csv_path), "variant").items():
        out[(env, variant, k)].append(float(row["eval_greedy"]))
    return out


def summary_table(csv_path: Path) -> str:
    """Markdown: mean final greedy return per env and K, and the normalised IQM."""
    finals = final_greedy(csv_path)
    envs = sorted({env for env, _, _ in finals})
    variants = list(dict.fromkeys(variant for _, variant, _ in finals))
    header = ["variant"] + [f"{env} K={k}" for env in envs for k in LAGS] + ["IQM (norm.)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for variant in variants:
        cells, pooled = [], []
        for env in envs:
            for k in LAGS:
                values = finals.get((env, variant, k), [])
                cells.append(f"{np.mean(values):.0f}" if values else "—")
                pooled.extend(normalize_score(env, np.array(values)).tolist())
        lines.append(f"| {variant} | " + " | ".join(cells) + f" | {iqm(np.array(pooled)):.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=("prototype", "diagnose", "grid"), default="grid")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=None,
                        help="env steps per run (default: 500k prototype/diagnose, 300k grid)")
    parser.add_argument("--only", nargs="*", help="run only these variant names")
    parser.add_argument("--summary-only", action="store_true")
    args = parse_with_retries(parser, "experiments.vaco_design")
    OUT.mkdir(parents=True, exist_ok=True)
    csv_path = OUT / f"{args.stage}.csv"
    if args.stage == "prototype":
        envs, variants = ["CartPole-v1"], PROTOTYPE_VARIANTS
    elif args.stage == "diagnose":
        envs, variants = ["CartPole-v1"], DIAGNOSE_VARIANTS
    else:
        envs, variants = ["CartPole-v1", "Acrobot-v1"], design_variants()
    steps = args.steps or (300_000 if args.stage == "grid" else 500_000)
    if not args.summary_only:
        for env in envs:
            for name, overrides in variants.items():
                if args.only and name not in args.only:
                    continue
                run_variant(PROTOTYPE_BASE, env, name,
                            {"num_seeds": args.seeds, "total_timesteps": steps, **overrides},
                            LAGS, csv_path, OUT / "runs" / args.stage)
    table = summary_table(csv_path)
    (OUT / f"{args.stage}.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
