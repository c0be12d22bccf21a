"""The entropy confound of the fair study: does VACO's lead over PPO-clip(L) survive when
the two swap their tuned entropy coefficients? [ours]

VACO was tuned to c_e = 0.00273 and PPO-clip with the learner's critic to c_e = 0.0252
(experiments/results/tuning/chosen.json), so the study's offset between them may be the
entropy bonus rather than the update. experiments/sweeps/entropy_swap.toml reruns both
with the other's coefficient (everything else as tuned) at K ∈ {0, 16} on seeds 100..107,
the first 8 of the study's 16, so every swapped run pairs with the study's run of the same
env, K and seed. This script compares, per return kind (greedy evaluation and training):

- the **level gap** VACO − PPO-clip(L) at K = 0 and at K = 16 (normalised score, paired by
  env and seed; mean over envs of the seed means, stratified-bootstrap 95% CI), with the
  tuned coefficients, with the swapped ones, and with both at the same coefficient (the
  controlled comparison: only the update differs): the offset survives if the gap keeps
  its sign and its CI excludes 0;
- **retention** (score at K = 16 − at K = 0) of all four, and the **difference in
  differences** VACO − PPO-clip(L) with each assignment of the coefficients
  (`jaxvaco.lab.robustness`).

    python -m jaxvaco sweep experiments/sweeps/entropy_swap.toml   # the runs (resumable)
    python -m experiments.entropy_swap                             # summary.md from them

Writes experiments/results/entropy_swap/summary.md. Environments without both K for all
four variants are left out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from experiments.fair_study import (
    DEV_ENVS,
    HELD_OUT_BY_DOMAIN,
    HELD_OUT_ENVS,
    final_table,
    paired_envs,
)
from experiments.markdown import table
from jaxvaco.lab import robustness, stats
from jaxvaco.lab.results import read_results
from jaxvaco.lab.tables import format_estimate

RESULTS = Path(__file__).resolve().parent / "results"
STUDY = RESULTS / "fair_study" / "study.csv"
SWAP = RESULTS / "entropy_swap" / "entropy_swap" / "results.csv"
OUT = RESULTS / "entropy_swap"
LAG = 16
SEEDS = range(100, 108)
VARIANTS = {  # label in the data -> (method, entropy coefficient it ran with)
    "vaco": ("VACO", "tuned (0.00273)"),
    "ppo": ("PPO-clip(L)", "tuned (0.0252)"),
    "vaco (ent 0.0252)": ("VACO", "swapped (0.0252)"),
    "ppo (ent 0.00273)": ("PPO-clip(L)", "swapped (0.00273)"),
}
ASSIGNMENTS = {"tuned": ("vaco", "ppo"), "swapped": ("vaco (ent 0.0252)", "ppo (ent 0.00273)"),
               "both 0.00273": ("vaco", "ppo (ent 0.00273)"),
               "both 0.0252": ("vaco (ent 0.0252)", "ppo")}
"""Which VACO and PPO-clip(L) runs one comparison pairs: each with its own tuned entropy
coefficient, each with the other's, or both with the same one (the controlled comparison:
only the update differs)."""
PER_ENV = ("tuned", "both 0.00273", "both 0.0252")
"""The assignments the per-environment tables show."""
POOLS = {"Held-out": HELD_OUT_ENVS, "Held-out MinAtar": HELD_OUT_BY_DOMAIN["MinAtar"],
         "Held-out Brax": HELD_OUT_BY_DOMAIN["Brax"], "Development": DEV_ENVS}
KINDS = ("greedy", "training")


def final_runs(study: Path = STUDY, swap: Path = SWAP) -> list[dict]:
    """The final greedy and training return of every run of the four variants at K ∈
    {0, 16} on seeds 100..107: the study's tuned runs and the swapped ones."""
    wanted = [r for r in read_results(study)
              if r["variant"] in ("vaco", "ppo") and r["K"] in (0, LAG) and r["seed"] in SEEDS]
    return final_table(wanted) + final_table(read_results(swap))


def complete_envs(final: list[dict], envs: tuple[str, ...]) -> list[str]:
    """The envs of `envs` where every variant has the same seeds at K = 0 and K = 16."""
    return paired_envs(final, envs, tuple(VARIANTS), (0, LAG))


def level_gap(final: list[dict], envs: list[str], vaco: str, ppo: str, k: int, kind: str
              ) -> tuple[float, float, float]:
    """VACO − PPO-clip(L) normalised score at lag k, paired by env and seed: the mean over
    envs of the seed means [seeds, envs], with a stratified-bootstrap 95% CI."""
    def scores(variant, env):
        runs = sorted((r for r in final if (r["env"], r["variant"], r["K"]) == (env, variant, k)),
                      key=lambda r: r["seed"])
        return stats.normalize_score(env, np.array([r[kind] for r in runs]))

    gaps = np.stack([scores(vaco, env) - scores(ppo, env) for env in envs], axis=1)
    points, cis = stats.stratified_bootstrap_ci({"gap": gaps}, {"mean": np.mean})
    return float(points["gap"][0]), float(cis["gap"][0, 0]), float(cis["gap"][1, 0])


def columns(final: list[dict], envs: list[str], kind: str) -> dict[str, np.ndarray]:
    """The runs of `envs` as the columns `jaxvaco.lab.robustness` reads."""
    rows = [r for r in final if r["env"] in envs]
    return {"env": np.array([r["env"] for r in rows]),
            "algo": np.array([r["variant"] for r in rows]),
            "K": np.array([r["K"] for r in rows]), "seed": np.array([r["seed"] for r in rows]),
            "step": np.array([r["step"] for r in rows]),
            "return": np.array([r[kind] for r in rows], dtype=np.float64)}


def pool_rows(final: list[dict], envs: list[str], kind: str) -> list[list[str]]:
    """One table of a pool and return kind: the level gaps at K = 0 and 16 with every
    assignment of the coefficients (`ASSIGNMENTS`), then the retention of the four variants
    and the differences in differences at K = 16."""
    rows = [["statistic", "K = 0", f"K = {LAG}"]]
    for name, (vaco, ppo) in ASSIGNMENTS.items():
        rows.append([f"level gap VACO − PPO-clip(L), entropy {name}"]
                    + [format_estimate(level_gap(final, envs, vaco, ppo, k, kind), 3)
                       for k in (0, LAG)])
    cols = columns(final, envs, kind)
    for variant, (method, entropy) in VARIANTS.items():
        rows.append([f"retention {method}, entropy {entropy}", "",
                     robustness.retention(cols, variant, LAG).format()])
    for name, (vaco, ppo) in ASSIGNMENTS.items():
        did = robustness.difference_in_differences(cols, vaco, ppo, LAG)
        rows.append([f"DiD VACO − PPO-clip(L), entropy {name}", "", did.format()])
    return rows


def env_rows(final: list[dict], envs: list[str], kind: str) -> list[list[str]]:
    """Per environment: the level gap at K = 0 and the DiD at K = 16 with the tuned and the
    equal coefficients (`PER_ENV`; one environment's 8 seeds each)."""
    rows = [["environment"] + [f"{stat}, {name}" for stat in ("gap K = 0", f"DiD K = {LAG}")
                               for name in PER_ENV]]
    for env in envs:
        cols = columns(final, [env], kind)
        pairs = [ASSIGNMENTS[name] for name in PER_ENV]
        gaps = [format_estimate(level_gap(final, [env], vaco, ppo, 0, kind), 3)
                for vaco, ppo in pairs]
        dids = [robustness.difference_in_differences(cols, vaco, ppo, LAG).format()
                for vaco, ppo in pairs]
        rows.append([env] + gaps + dids)
    return rows


def swap_tables(final: list[dict]) -> dict[str, list[list[str]]]:
    """{"<pool> (<envs>), <kind> return": rows} for every pool with a complete environment
    (the `entropy-swap` claim's value)."""
    tables = {}
    for pool, envs in POOLS.items():
        present = complete_envs(final, envs)
        for kind in KINDS:
            if present:
                tables[f"{pool} ({', '.join(present)}), {kind} return"] = pool_rows(
                    final, present, kind)
    every = [env for pool in ("Held-out", "Development")
             for env in complete_envs(final, POOLS[pool])]
    for kind in KINDS:
        tables[f"Per environment, {kind} return"] = env_rows(final, every, kind)
    return tables


def summary(final: list[dict]) -> str:
    """summary.md: `swap_tables` as markdown."""
    out = ["# The entropy swap [ours]", "",
           "Normalised final return; mean over the pool's environments of the per-environment "
           "seed means (no environment trimmed away), paired by environment and seed "
           f"(seeds {SEEDS.start}..{SEEDS.stop - 1}); [95% stratified-bootstrap CI]. "
           "Made by `python -m experiments.entropy_swap`."]
    for title, rows in swap_tables(final).items():
        out += ["", f"**{title}**", "", table(rows)]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    text = summary(final_runs())
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
