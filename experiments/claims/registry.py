"""`CLAIMS`: every claim the README and the results pages state (a claim: what it is, its
command, its kind, its rule, whether CI checks it, its cost, how it is measured, compared
and shown). To add one, append a `Claim` here (its measurement in `data` or `runs`), record
it (`python -m experiments.check_claims --only ID --record`) and, for a table, add its
block to `blocks.BLOCKS`."""

from __future__ import annotations

from experiments.claims import data, runs
from experiments.claims.record import Claim
from experiments.claims.rules import (
    compile_band,
    inside_ci,
    most_cells_inside,
    ratio_band,
    same,
    second_cell_cached,
    show_compile,
    show_greedy,
    show_ratio,
    show_solved,
    show_startup,
    show_sweep_compile,
    show_table,
    solved_and_wall,
    solved_at_least,
    startup_band,
    sync_means_close,
)

ABLATION_DATA = "b5c21f6, c6a35c2, 6dae53a, 9a8ac49, 642dcc1, ed6639d, 672eae9"
"""The commits that added experiments/results/ablation/ablation.csv."""
FAIR_STUDY_DATA = (
    "f87b943, 08a6e09, 4ea9dbd, 82b559d, 2caef67, 062dfd7, 1afdf72, de36ec1, a2e4f65, "
    "a09b480, 5221383, d68ec86, 31512c6, a3b39af, ec3b909, 6ab0084, 0c77779, 45383da, "
    "d8b94da, 4660dba, 90dc78a, 0e277cb, 3f4e45f, 5d88802, 394a50d, 492c552, 77b09ba, "
    "2f709c7, 23799ff, cd2ca56, dbda32d, 664b022, df9455b, 417d247, ed10a2f, 015da28, "
    "2e214bb")
"""The commits that added experiments/results/fair_study/study.csv (and final.csv)."""

CLAIMS = [
    Claim("default-16-seeds", "PPO, CartPole-v1, defaults, 16 seeds in one program, 1M steps",
          "jaxvaco train --num-seeds 16", "seed-count",
          "greedy return >= 475 in at least 15 of 16 seeds", False, 5,
          runs.measure_default_16, solved_at_least(15), show_solved),
    Claim("default-1-seed", "PPO, CartPole-v1, the default job (1 seed, 1M steps)",
          "jaxvaco train", "seed-count",
          "greedy return >= 475; wall time (with compilation) at most 2× the recorded one",
          False, 2, runs.measure_default_1, solved_and_wall, show_solved),
    Claim("fast-learning", "PPO, CartPole-v1, defaults, 8 seeds, 100k steps (the learning "
          "claim CI reruns)", "jaxvaco train " + " ".join(runs.FAST_LEARNING_FLAGS), "seed-count",
          "greedy return >= 475 in at least 7 of 8 seeds (the tuned defaults solve all 8, so a "
          "CI of the mean would be a point)", True, 1, runs.measure_fast_learning,
          solved_at_least(7), show_solved),
    Claim("default-sweep", "the sweep that chose the defaults (seeds solved, mean greedy)",
          "python -m experiments.default_sweep --summary-only", "data",
          "recomputed from the committed runs.csv: identical", True, 0.1,
          data.measure_default_sweep, same, show_table, "a6323a5"),
    Claim("breakout-4-seeds", "PPO, Breakout-MinAtar, 4 seeds, 1M steps",
          "jaxvaco train " + " ".join(runs.BREAKOUT_FLAGS), "statistical",
          "new mean greedy return inside the recorded 95% bootstrap CI", False, 2,
          runs.measure_breakout, inside_ci, show_greedy),
    Claim("brax-pendulum", "PPO, Brax inverted_pendulum (spring), 2 seeds, 1.5M steps, no "
          "entropy bonus", "jaxvaco train " + " ".join(runs.BRAX_FLAGS + runs.BRAX_ENTROPY[True]),
          "statistical",
          "new mean greedy return inside the recorded 95% bootstrap CI", False, 2,
          lambda ctx: runs.measure_brax(ctx, True), inside_ci, show_greedy),
    Claim("brax-pendulum-entropy", "the same with an entropy bonus of 0.01, 1M steps",
          "jaxvaco train " + " ".join(runs.BRAX_FLAGS + runs.BRAX_ENTROPY[False]), "statistical",
          "new mean greedy return inside the recorded 95% bootstrap CI",
          False, 2, lambda ctx: runs.measure_brax(ctx, False), inside_ci, show_greedy),
    Claim("throughput-ref", "jaxvaco PPO / single-file reference (1 seed)",
          runs.THROUGHPUT.format("ref"), "speed", "ratio within 0.8–1.25× of the recorded one",
          False, 3, runs.measure_throughput("ref"), ratio_band(0.8, 1.25), show_ratio),
    Claim("throughput-vaco", "VACO (chosen defaults) / PPO at K = 0",
          runs.THROUGHPUT.format("vaco"), "speed", "ratio within 0.8–1.25× of the recorded one",
          False, 3, runs.measure_throughput("vaco"), ratio_band(0.8, 1.25), show_ratio),
    Claim("throughput-lag", "PPO at K = 16 (uniform, 4 groups) / K = 0",
          runs.THROUGHPUT.format("lag"), "speed", "ratio within 0.8–1.25× of the recorded one",
          False, 3, runs.measure_throughput("lag"), ratio_band(0.8, 1.25), show_ratio),
    Claim("throughput-seeds", "16 seeds in one program / 1 seed", runs.THROUGHPUT.format("seeds"),
          "speed", "ratio within 0.8–1.25× of the recorded one", False, 4,
          runs.measure_throughput("seeds"), ratio_band(0.8, 1.25), show_ratio),
    Claim("throughput-devices", "4 / 1 simulated CPU devices, data-parallel (global shuffle)",
          "python experiments/throughput.py --devices 4 --total 2e5 --repeats 2", "speed",
          "ratio within 0.8–1.25× of the recorded one", False, 5,
          runs.measure_throughput("devices"), ratio_band(0.8, 1.25), show_ratio),
    Claim("startup", "whole process, `jaxvaco train` vs the reference: reference / jaxvaco "
          "wall time, cold and warm compilation cache, and the default job warm", runs.STARTUP,
          "speed", "cold, warm and default-job ratios (reference / jaxvaco) each within "
          "0.8–1.25× of the recorded ones; measure on an idle CPU", False, 9,
          runs.measure_startup, startup_band(0.8, 1.25), show_startup),
    Claim("compile-programs", "cold `jaxvaco train` of each family's default job, shortened "
          "(CartPole-v1, Breakout-MinAtar, Brax inverted_pendulum): compile seconds (wall) "
          "and trace / lower / XLA seconds of the big programs", runs.PROGRAMS, "speed",
          "each env's compile seconds within 0.5–2× of the recorded ones; measure on an idle "
          "CPU", False, 4, runs.measure_compile_programs, compile_band(0.5, 2.0), show_compile),
    Claim("sweep-compile", "a two-cell CartPole sweep whose cells differ only in learning "
          "rate and entropy coefficient, fresh cache: each cell's compile seconds and XLA "
          "programs, and the sweep's compile share", runs.SWEEP_COMPILE, "speed",
          "the second cell compiles no XLA program of its own (all from the cache)", False, 1,
          runs.measure_sweep_compile, second_cell_cached, show_sweep_compile),
    Claim("vaco-prototype", "VACO prototype reproduction table (mean final greedy return)",
          "python -m experiments.vaco_design --stage prototype --summary-only", "data",
          "recomputed from the committed prototype.csv: identical", True, 0.1,
          data.measure_vaco_design("prototype"), same, show_table, "e39da00"),
    Claim("vaco-grid", "VACO design grid (mean final greedy return, IQM)",
          "python -m experiments.vaco_design --stage grid --summary-only", "data",
          "recomputed from the committed grid.csv: identical", True, 0.1,
          data.measure_vaco_design("grid"), same, show_table, "31e3ef0"),
    Claim("ablation", "lag ablation, per env: final greedy K = 0 → K = 16 / training K = 16",
          "python -m experiments.ablation --plot-only", "data",
          "recomputed from the committed ablation.csv (and final.csv): identical", True, 0.2,
          data.measure_ablation, same, show_table, ABLATION_DATA),
    Claim("ablation-robustness", "lag ablation, learner-critic cells: retention of the "
          "normalised final training and greedy return at K = 4 and 16 and difference in "
          "differences against clip β | learner | gae [95% CI], pooled and per env",
          "python -m experiments.ablation --plot-only", "data",
          "recomputed from the committed ablation.csv: identical", True, 0.2,
          data.measure_ablation_robustness, same, show_table, ABLATION_DATA),
    Claim("ablation-matched-tv", "lag ablation, PPO clip (ε) against VACO's TV batch filter "
          "(δ) on β: realised mean TV(π_θ, β) and final training and greedy return at K = 0 "
          "and 16 [95% CI]", "python -m experiments.ablation --plot-only", "data",
          "recomputed from the committed ablation.csv: identical", True, 0.1,
          data.measure_ablation_matched_tv, same, show_table, ABLATION_DATA),
    Claim("fair-study", "fair lag study: IQM of normalised final greedy / training return "
          "[95% CI], P(VACO > baseline); per env mean greedy / training return",
          "python -m experiments.fair_study --summary-only", "data",
          "recomputed from the committed study.csv (and final.csv): identical", True, 0.5,
          data.measure_fair_study, same, show_table, FAIR_STUDY_DATA),
    Claim("fair-study-robustness", "fair lag study, learner-critic variants: retention of the "
          "normalised final training and greedy return at each K and difference in "
          "differences against PPO-clip and PPO-KL with the learner's critic [95% CI], "
          "pooled as the mean over envs (beside the IQM) and per env",
          "python -m experiments.fair_study --summary-only", "data",
          "recomputed from the committed final.csv (study.csv's, checked by fair-study): "
          "identical", True, 0.5, data.measure_fair_study_robustness, same, show_table,
          FAIR_STUDY_DATA),
    Claim("entropy-swap", "the entropy confound: VACO and PPO-clip(L) with each other's "
          "entropy coefficient and with the same one; level gaps at K = 0 and 16, retention "
          "and difference in differences at K = 16 [95% CI], per pool and per env",
          "python -m experiments.entropy_swap", "data",
          "recomputed from the committed results.csv and study.csv: identical", True, 0.3,
          data.measure_entropy_swap, same, show_table, "dfe2af5"),
    Claim("held-out-2", "the second held-out pool (declared in e23be9b) so far: retention and "
          "difference in differences of VACO, PPO-clip(L) and PPO-KL(L) at K = 16 [95% CI], "
          "over the environments complete", "python -m experiments.held_out_2 --run, then "
          "python -m experiments.held_out_2", "data",
          "recomputed from the committed results.csv: identical", True, 0.2,
          data.measure_held_out_2, same, show_table,
          "708aab7, 5aaad8c, 4d9a158, ba8e292, dd18bab, d7b9d3b, bd8a0d6, c7d6b01, 81f53fe"),
    Claim("moonshot", "the search for an update that keeps more under lag (declared in "
          "cf09904): VACO+KL against PPO-KL(L) and PPO-clip(L) on the first held-out pool: "
          "retention, DiD at K = 16 and the K = 0 level [95% CI], per env, "
          "and the declared criterion", "python -m experiments.moonshot", "data",
          "recomputed from the committed moonshot.csv and study.csv: identical", True, 0.2,
          data.measure_moonshot, same, show_table, "ef5b2f2, ca6d15e, 4b7b8d9"),
    Claim("gpu-throughput", "throughput ratios on an NVIDIA H200 (2048 envs, 2e7 steps)",
          "bash experiments/gpu_check.sh (device machine; step 'cartpole')", "data",
          "read from the committed throughput_cartpole.json: identical (no GPU in CI)", True,
          0.1, data.measure_gpu_throughput, same, show_table, "4ea9dbd"),
    Claim("async-validation", "asynchronous runs against their replays and the simulator's "
          "`uniform` mode of the same mean lag: final greedy return and mean tv/total, mean "
          "[95% CI] over seeds, per env × algorithm", "python -m experiments.async_validation",
          "data", "recomputed from the committed runs.csv: identical", True, 0.1,
          data.measure_async_validation, same, show_table, "14775df"),
    Claim("async-pays", "asynchronous against synchronous on 2 simulated CPU devices: "
          "env-steps/s and time to a training return of 400, CartPole-v1, seed 0",
          "python -m experiments.async_pays", "data",
          "read from the committed async_pays.json: identical", True, 0.1,
          data.measure_async_pays, same, show_table, "4692a8f"),
    Claim("sync-sweep", "delayed sync across 4 simulated devices (mean ± std over 3 seeds)",
          "python experiments/sync_sweep.py", "data",
          "recomputed from the committed sync_sweep.csv: identical", True, 0.1,
          data.measure_sync_sweep, same, show_table, "13b4741"),
    Claim("sync-sweep-rerun", "the sync sweep, rerun on the current code",
          "python experiments/sync_sweep.py --out DIR", "statistical",
          "every S: new mean final return within 2 recorded std, lag/iterations within 0.05",
          False, 2, runs.measure_sync_rerun, sync_means_close, show_table, reruns=("sync-sweep",)),
    Claim("llm-lag", "LLM lag comparison on the working RL stage (final held-out greedy and "
          "sampled accuracy, mean ± 95% t-interval over 4 seeds)",
          "python experiments/llm_lag.py", "data",
          "read from the committed summary.csv: identical", True, 0.1,
          data.measure_llm_lag, same, show_table, "dad958e, 7de3d46, 1e70d55"),
    Claim("llm-lag-delta", "token-level VACO on β with δ = 0.005, the comparison's other "
          "settings and keys (mean ± 95% t-interval over 4 seeds)",
          "python experiments/llm_lag.py --variants vaco-beta --delta 0.005 --ks 0 4 8 "
          "--out experiments/results/llm_lag_delta", "data",
          "read from the committed summary.csv: identical", True, 0.1,
          data.measure_llm_lag_delta, same, show_table, "fa1f36d"),
    Claim("llm-lag-rerun", "4 of the LLM lag comparison's 20 cells (grpo β and vaco π_T at "
          "K = 0 and 8), rerun on the current code",
          "python experiments/llm_lag.py --variants grpo-beta vaco-pit --ks 0 8 --out DIR",
          "statistical",
          "new mean inside the recorded 95% t-interval in >= 6 of the 8 greedy and sampled "
          "cells (an independent 4-seed replicate lands inside in ≈ 85–90% of cells)", False,
          40, runs.measure_llm_lag_rerun, most_cells_inside(0.75), show_table,
          reruns=("llm-lag",)),
]

BY_ID = {claim.id: claim for claim in CLAIMS}

