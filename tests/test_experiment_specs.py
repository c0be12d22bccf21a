"""The experiments are sweep specs (experiments/sweeps/*.toml): each spec gives every
(env, variant) exactly the TrainConfig and lag grid that its script built before the port
(commit 6deee9f: `experiments.common.run_variant` on a Python BASE and named overrides,
frozen below as the reference), and the scripts append a finished cell's rows to their CSV
as `run_variant` did."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path

import pytest

from experiments import ablation, fair_study, vaco_design
from experiments.common import experiment_spec, run_spec
from jaxvaco.core.config import ConfigError, EvalConfig, LagConfig, TrainConfig, with_overrides
from jaxvaco.core.envs import BRAX_ENV_NAMES
from jaxvaco.lab.results import read_results
from jaxvaco.lab.sweep import cell_setup, cells, load_sweep_file

# ------------------------------------------------- the scripts' configurations at 6deee9f


def old_config(base: TrainConfig, env: str, overrides: dict, lags) -> TrainConfig:
    """run_variant's config, less its run_name and results_dir (paths)."""
    return with_overrides(base, {"env": env, **overrides, "lag.max_delay": max(lags)})


def pinned(**fields) -> TrainConfig:
    """A TrainConfig under the defaults of 6deee9f (before issue 30's tuned defaults): what
    the scripts' `TrainConfig(...)` meant then."""
    config = TrainConfig(**{"update_epochs": 4, "num_minibatches": 4, "learning_rate": 2e-3,
                            "clip_coef": 0.2, "ent_coef": 0.01, **fields})
    return with_overrides(config, {"ppo.critic": "behaviour", "ppo_kl.critic": "behaviour",
                                     "ppo_kl.target_kl": 0.01, "spo.critic": "behaviour",
                                     "vaco.delta": 0.2})


EVAL = EvalConfig(every_chunks=0, num_episodes=16)
UNIFORM = LagConfig(mode="uniform", num_groups=4)
DEV_BUDGETS = {"CartPole-v1": 300_000, "Acrobot-v1": 300_000, "Breakout-MinAtar": 500_000}

ABLATION_BASE = pinned(num_envs=16, num_steps=128, update_epochs=4, num_minibatches=4,
                            learning_rate=1e-3, anneal_lr=True, gamma=0.99, gae_lambda=0.95,
                            clip_coef=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5,
                            lag=UNIFORM, eval=EVAL, progress=False)
OBJECTIVES = {
    "clip β": ("ppo", {"anchor": "behaviour"}),
    "clip π_T (decoupled)": ("ppo", {"anchor": "learner"}),
    "TV batch β": ("vaco", {"anchor": "behaviour", "filter": "batch"}),
    "TV batch π_T": ("vaco", {"anchor": "learner", "filter": "batch"}),
    "TV sample β": ("vaco", {"anchor": "behaviour", "filter": "sample"}),
    "none (IS gradient)": ("vaco", {"anchor": "behaviour", "filter": "none"}),
}


def ablation_cell(objective: str, critic: str, estimator: str, **extra) -> dict:
    algo, options = OBJECTIVES[objective]
    options = {**options, "critic": critic, "advantages": estimator,
               "advantage_form": "normalize_then_weight", **extra}
    return {"algo": algo, **{f"{algo}.{k}": v for k, v in options.items()}}


def ablation_runs() -> dict[tuple[str, str], TrainConfig]:
    """The old script's cells, plus PPO's ε cells (added to the spec on 2026-12-05)."""
    variants = {f"{o} | {c} | {e}": ablation_cell(o, c, e) for o in OBJECTIVES
                for c in ("behaviour", "learner") for e in ("gae", "vtrace")}
    for delta in (0.05, 0.1, 0.4):
        variants[f"TV batch β | learner | gae | δ={delta}"] = ablation_cell(
            "TV batch β", "learner", "gae", delta=delta)
    for epsilon in (0.05, 0.1, 0.4):
        variants[f"clip β | learner | gae | ε={epsilon}"] = {
            **ablation_cell("clip β", "learner", "gae"), "clip_coef": epsilon}
    return {(env, name): old_config(ABLATION_BASE, env, {
        "num_seeds": 8, "total_timesteps": DEV_BUDGETS[env], **overrides}, (0, 4, 16))
        for env in ("Acrobot-v1", "CartPole-v1", "Breakout-MinAtar")
        for name, overrides in variants.items()}


CHOSEN = {"ppo": {"config": 3, "update_epochs": 2, "num_minibatches": 8,
                  "learning_rate": 0.0012345678901234567, "ent_coef": 0.01, "clip_coef": 0.15},
          "ppo_kl": {"config": 1, "update_epochs": 4, "num_minibatches": 4,
                     "learning_rate": 2e-4, "ent_coef": 0.003, "target_kl": 0.02},
          "spo": {"config": 7, "update_epochs": 8, "num_minibatches": 2,
                  "learning_rate": 1e-05, "ent_coef": 0.0271, "clip_coef": 0.3},
          "impala": {"config": 2, "update_epochs": 2, "num_minibatches": 2,
                     "learning_rate": 3e-3, "ent_coef": 0.001},
          "vaco": {"config": 0, "update_epochs": 8, "num_minibatches": 2,
                   "learning_rate": 5e-4, "ent_coef": 0.02, "delta": 0.3}}


def fair_study_runs(variants: dict[str, dict]) -> dict[tuple[str, str], TrainConfig]:
    base = pinned(num_envs=16, num_steps=128, anneal_lr=True, lag=UNIFORM, eval=EVAL,
                  progress=False)
    envs = {**DEV_BUDGETS, "Asterix-MinAtar": 500_000, "SpaceInvaders-MinAtar": 500_000,
            "Freeway-MinAtar": 500_000, "hopper": 1_000_000,
            "inverted_double_pendulum": 1_000_000, "reacher": 1_000_000}
    brax = {"normalize_obs": True, "reward_scale": 0.1}
    return {(env, name): old_config(base, env, {
        **overrides, **(brax if env in BRAX_ENV_NAMES else {}), "num_seeds": 16,
        "seed": 100,  # changed on purpose after the port: fresh seeds, not tuning's 0..3
        "total_timesteps": steps}, (0, 2, 4, 8, 16))
        for env, steps in envs.items() for name, overrides in variants.items()}


def vaco_design_runs(stage: str) -> dict[tuple[str, str], TrainConfig]:
    base = pinned(num_envs=16, num_steps=128, update_epochs=4, num_minibatches=4,
                  learning_rate=2.5e-4, anneal_lr=True, total_timesteps=500_000,
                       lag=LagConfig(mode="fixed", num_groups=1), eval=EVAL, progress=False)
    spec_vaco = {"algo": "vaco", "vaco.anchor": "learner", "vaco.critic": "learner",
                 "vaco.advantages": "vtrace", "vaco.advantage_form": "weighted"}
    ppo_vtrace = {"algo": "ppo", "ppo.critic": "learner", "ppo.advantages": "vtrace"}
    fixed = {**spec_vaco, "vaco.advantage_form": "normalize_then_weight"}
    behaviour = {**fixed, "vaco.anchor": "behaviour"}
    variants = {
        "prototype": {
            "ppo": {"algo": "ppo"},
            "ppo learner-anchor vtrace (decoupled)": {**ppo_vtrace, "ppo.anchor": "learner"},
            "ppo behaviour-anchor vtrace": ppo_vtrace,
            "vaco spec 3.1": spec_vaco,
            "vaco align gae": {**spec_vaco, "vaco.critic": "behaviour",
                               "vaco.advantages": "gae"},
            "vaco behaviour-anchor d=0.1": {**spec_vaco, "vaco.anchor": "behaviour",
                                            "vaco.delta": 0.1},
            "ppo values (GAE with V_T)": {"algo": "ppo", "ppo.critic": "learner"}},
        "diagnose": {
            "vaco spec 3.1, normalize then weight": {
                **spec_vaco, "vaco.advantage_form": "normalize_then_weight"},
            "vaco spec 3.1, no advantage normalisation": {**spec_vaco, "norm_adv": False},
            "ppo behaviour-anchor vtrace, normalize then weight": {
                **ppo_vtrace, "ppo.advantage_form": "normalize_then_weight"}},
        "grid": {
            "ppo": {"algo": "ppo"},
            "vaco spec 3.1": spec_vaco,
            "vaco ntw": fixed,
            "vaco ntw anchor=behaviour": behaviour,
            "vaco ntw anchor=behaviour filter=sample": {**behaviour, "vaco.filter": "sample"},
            "vaco ntw anchor=behaviour d=0.1": {**behaviour, "vaco.delta": 0.1},
            "vaco align=values anchor=behaviour": {**behaviour, "vaco.advantages": "gae"},
            "vaco ntw anchor=behaviour rho=c=2": {**behaviour, "vaco.rho_bar": 2.0,
                                                 "vaco.c_bar": 2.0}}}[stage]
    envs = ["CartPole-v1", "Acrobot-v1"] if stage == "grid" else ["CartPole-v1"]
    steps = 300_000 if stage == "grid" else 500_000
    return {(env, name): old_config(base, env, {"num_seeds": 8, "total_timesteps": steps,
                                                **overrides}, (0, 4, 16))
            for env in envs for name, overrides in variants.items()}


# --------------------------------------------------------------------------- the checks


def assert_spec_builds(spec, expected: dict[tuple[str, str], TrainConfig], lags, tmp_path):
    """Every cell of `spec` is one expected (env, variant), in the old scripts' order, with
    its config (paths aside) and the lag grid {"lag_delay": lags}."""
    assert [(c.env, c.label) for c in cells(spec)] == list(expected)
    for cell in cells(spec):
        config, grid = cell_setup(spec, cell, tmp_path / spec.name)
        assert grid == {"lag_delay": tuple(lags)}
        paths = {"run_name": "", "results_dir": ""}
        want = dataclasses.replace(expected[(cell.env, cell.label)], **paths)
        assert dataclasses.replace(config, **paths) == want, (cell.env, cell.label)
        assert config.run_name == cell.name
        assert config.results_dir == str(tmp_path / spec.name / "runs")


def test_ablation_spec_is_the_old_script_plus_the_epsilon_cells(tmp_path):
    spec = experiment_spec(ablation.SPEC, tmp_path)
    assert spec.lag_delays == ablation.LAGS
    assert_spec_builds(spec, ablation_runs(), ablation.LAGS, tmp_path)


@pytest.mark.parametrize("stage", vaco_design.STAGES)
def test_vaco_design_specs_are_the_old_script(tmp_path, stage):
    spec = experiment_spec(vaco_design.spec_path(stage), vaco_design.OUT)
    assert spec.lag_delays == vaco_design.LAGS and spec.name == stage
    spec = dataclasses.replace(spec, results_dir=str(tmp_path / "runs"))
    assert_spec_builds(spec, vaco_design_runs(stage), vaco_design.LAGS, tmp_path / "runs")


def test_fair_study_spec_from_chosen_is_the_old_script(tmp_path):
    path = fair_study.write_study_spec(CHOSEN, tmp_path / "study.toml")
    spec = experiment_spec(path, tmp_path)
    assert spec.lag_delays == fair_study.LAGS
    assert spec.envs == fair_study.DEV_ENVS + fair_study.HELD_OUT_ENVS
    assert list(spec.variants) == ["ppo", "ppo (behaviour critic)", "ppo_kl",
                                   "ppo_kl (learner critic)", "spo", "spo (learner critic)",
                                   "impala", "vaco"]
    assert_spec_builds(spec, fair_study_runs(fair_study.tuned_variants(CHOSEN)),
                       fair_study.LAGS, tmp_path)
    # the tuned values survive the TOML exactly; the template alone is a valid spec
    assert spec.variants["ppo"]["learning_rate"] == CHOSEN["ppo"]["learning_rate"]
    assert not load_sweep_file(fair_study.SPEC).variants


def test_fair_study_dev_and_held_out_choose_envs(tmp_path):
    path = fair_study.write_study_spec({"vaco": CHOSEN["vaco"]}, tmp_path / "study.toml")
    spec = experiment_spec(path, tmp_path, envs=["hopper"], seeds=2, steps=4096)
    (cell,) = cells(spec)
    config, _ = cell_setup(spec, cell, tmp_path)
    assert (config.env, config.algo, config.num_seeds, config.total_timesteps) == (
        "hopper", "vaco", 2, 4096)
    assert config.normalize_obs and config.reward_scale == 0.1  # the env's other options
    assert config.vaco.delta == 0.3 and config.update_epochs == 8


def test_experiment_spec_options_and_bad_names(tmp_path):
    spec = experiment_spec(ablation.SPEC, tmp_path, variants=["clip β | learner | gae"],
                           steps=2048, seeds=1, envs=["CartPole-v1"])
    assert [c.name for c in cells(spec)] == ["CartPole-v1__clip-β-learner-gae__K0-4-16"]
    assert spec.base.num_seeds == 1
    spec = experiment_spec(fair_study.SPEC, tmp_path, algos=["vaco", "ppo"])
    assert [c.label for c in cells(spec)][:2] == ["vaco", "ppo"]
    with pytest.raises(ConfigError, match="no variant 'clip b'"):
        experiment_spec(ablation.SPEC, tmp_path, variants=["clip b"])


def test_specs_are_plain_toml_with_the_documented_folders():
    for path in sorted(ablation.SPEC.parent.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        experiment = path.stem.removeprefix("vaco_design_")
        folder = "vaco_design" if path.stem.startswith("vaco_design") else path.stem
        # run_spec-driven specs keep their run folders (git-ignored) under runs/; a spec run
        # by `jaxvaco sweep` writes its results.csv into results_dir/<name>/ directly.
        assert Path(data["results_dir"]).parts[:3] == ("experiments", "results", folder), path
        assert data["name"] == experiment, path


def test_run_spec_appends_new_cells_and_skips_those_in_the_csv(tmp_path, monkeypatch):
    """run_spec runs only (env, variant) pairs the CSV lacks and adds their rows (the
    schema rows of the run's metrics rows); rows already there stay, a CSV written before
    the schema (the committed ones) read under the schema's names."""
    import experiments.common as common
    from jaxvaco.core.config import to_dict
    from jaxvaco.host.run_folder import write_json
    from jaxvaco.lab.sweep import SweepResult, cell_config

    spec = experiment_spec(fair_study.SPEC, tmp_path, envs=["CartPole-v1"],
                           algos=["ppo", "vaco"])
    csv_path = tmp_path / "study.csv"
    csv_path.write_text("env,algo,variant,K,seed,step,return,eval_greedy,filter/fraction\n"
                        "CartPole-v1,ppo,ppo,0,0,2048,9.0,30.0,0.125\n")
    ran = []

    def fake_sweep(spec, control=None, only=None):
        directory = tmp_path / "runs" / spec.name
        for cell in only:
            ran.append(cell.label)
            cell_dir = directory / "runs" / cell.name
            cell_dir.mkdir(parents=True)  # what the runner records of the cell
            write_json(cell_dir / "config.json", to_dict(cell_config(spec, cell)))
            write_json(cell_dir / "runs.json", {"grid": {"lag_delay": list(cell.delays)}})
            rows = [{"run": r, "seed": s, "lag_delay": k, "env_steps": 2048, "chunk": 0,
                     "episode/return": 10.0 + r, "tv/total": 0.25, "vaco/filtered_fraction":
                     0.5, "eval/greedy_return": 20.0} for r, (k, s) in enumerate(
                         [(k, s) for k in spec.lag_delays for s in (0, 1)])]
            (cell_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n"
                                                            for r in rows))
            (cell_dir / "DONE").write_text("{}")
        return SweepResult(directory, ran, [], {})

    monkeypatch.setattr(common, "run_sweep", fake_sweep)
    run_spec(spec, csv_path)
    assert ran == ["vaco"]
    text = csv_path.read_text()
    committed, *rows = read_results(csv_path)
    assert (committed["variant"], committed["eval/greedy_return"], committed["return"],
            committed["ppo/clipped_fraction"]) == ("ppo", 30.0, 9.0, 0.125)
    assert len(rows) == len(spec.lag_delays) * 2
    assert {(r["env"], r["algo"], r["variant"]) for r in rows} == {("CartPole-v1", "vaco",
                                                                    "vaco")}
    assert [r["K"] for r in rows[::2]] == list(spec.lag_delays)
    assert [r["seed"] for r in rows[:2]] == [0, 1] and rows[1]["return"] == 11.0
    assert rows[0]["vaco/filtered_fraction"] == 0.5 and rows[0]["eval/greedy_return"] == 20.0
    run_spec(spec, csv_path)  # everything is in the CSV now: nothing runs, nothing appended
    assert ran == ["vaco"] and csv_path.read_text() == text
