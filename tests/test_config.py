"""`validate` catches impossible settings with messages that say what to change, and the
config survives a JSON round trip."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from jaxvaco.core.config import (
    ConfigError,
    EvalConfig,
    LagConfig,
    PPOConfig,
    PPOKLConfig,
    SPOConfig,
    TrainConfig,
    VacoConfig,
    VtraceConfig,
    from_dict,
    option_paths,
    to_dict,
    with_overrides,
    with_tuned_defaults,
)
from jaxvaco.core.validation import validate

BASE = TrainConfig(num_envs=8, num_steps=16, total_timesteps=1024, num_minibatches=2)


def invalid(**changes) -> str:
    """validate() must raise ConfigError for BASE with `changes`; return its message."""
    with pytest.raises(ConfigError) as info:
        validate(dataclasses.replace(BASE, **changes))
    return str(info.value)


def test_defaults_and_base_are_valid():
    assert validate(TrainConfig()) == with_tuned_defaults(TrainConfig())
    assert validate(BASE) == with_tuned_defaults(BASE)
    assert issubclass(ConfigError, ValueError)


CHOSEN = json.loads((Path(__file__).parents[1] / "experiments" / "results" / "tuning"
                     / "chosen.json").read_text())


def three_digits(x: float) -> float:
    return float(f"{x:.3g}")


@pytest.mark.parametrize("algo", sorted(CHOSEN))
def test_each_algorithm_defaults_to_the_configuration_its_tuning_chose(algo):
    """The committed search result (chosen.json), rounded to three significant digits, is
    what an algorithm runs with when nothing is given; the learner's critic everywhere."""
    chosen = CHOSEN[algo]
    config = validate(TrainConfig(algo=algo))
    assert config.update_epochs == chosen["update_epochs"]
    assert config.num_minibatches == chosen["num_minibatches"]
    assert config.learning_rate == three_digits(chosen["learning_rate"])
    assert config.ent_coef == three_digits(chosen["ent_coef"])
    knob = {"ppo": config.clip_coef, "spo": config.clip_coef,
            "ppo_kl": config.ppo_kl.target_kl, "vaco": config.vaco.delta}
    for name in ("clip_coef", "target_kl", "delta"):
        if name in chosen:
            assert knob[algo] == three_digits(chosen[name])
    if algo != "impala":
        assert getattr(config, algo).critic == "learner"


def test_explicit_values_win_over_the_tuned_defaults():
    config = validate(TrainConfig(algo="vaco", learning_rate=1e-4, update_epochs=2))
    assert (config.learning_rate, config.update_epochs) == (1e-4, 2)
    assert config.ent_coef == three_digits(CHOSEN["vaco"]["ent_coef"])


def test_minibatches_must_divide_envs_and_a_divisor_is_suggested():
    message = invalid(num_minibatches=3)
    assert "--num-minibatches" in message and "--num-envs" in message
    suggestion = re.search(r"Try --num-minibatches (\d+)", message)
    assert suggestion, message
    value = int(suggestion.group(1))
    assert BASE.num_envs % value == 0 and abs(value - 3) == 1  # 2 or 4
    message = invalid(num_envs=12, num_minibatches=5)
    value = int(re.search(r"Try --num-minibatches (\d+)", message).group(1))
    assert value in (4, 6)  # the divisors of 12 closest to 5
    validate(dataclasses.replace(BASE, num_envs=12, num_minibatches=value))


@pytest.mark.parametrize("field", ["num_seeds", "num_envs", "num_steps", "total_timesteps",
                                   "update_epochs", "num_minibatches"])
@pytest.mark.parametrize("value", [0, -4])
def test_non_positive_sizes(field, value):
    message = invalid(**{field: value})
    assert f"--{field.replace('_', '-')}" in message and "positive" in message


@pytest.mark.parametrize("field", ["learning_rate", "max_grad_norm", "clip_coef"])
def test_non_positive_rates(field):
    assert f"--{field.replace('_', '-')}" in invalid(**{field: 0.0})


@pytest.mark.parametrize("changes,flag", [
    ({"gamma": 0.0}, "--gamma"), ({"gamma": 1.5}, "--gamma"),
    ({"gae_lambda": -0.1}, "--gae-lambda"), ({"hidden_sizes": ()}, "--hidden-sizes"),
    ({"hidden_sizes": (16, 0)}, "--hidden-sizes"), ({"chunk_iterations": -1}, "--chunk-iterations"),
    ({"vaco": VacoConfig(delta=0.0)}, "--vaco.delta"),
    ({"impala": VtraceConfig(rho_bar=0.0)}, "--impala.rho-bar"),
    ({"lag": LagConfig(max_delay=-1)}, "--lag.max-delay"),
    ({"lag": LagConfig(num_groups=0)}, "--lag.num-groups"),
])
def test_other_invalid_values_name_their_flag(changes, flag):
    assert flag in invalid(**changes)


def test_total_timesteps_below_one_batch():
    message = invalid(total_timesteps=BASE.batch_size - 1)
    assert "--total-timesteps" in message and str(BASE.batch_size) in message
    validate(dataclasses.replace(BASE, total_timesteps=BASE.batch_size))  # exactly one: fine


def test_unknown_algo_suggests_close_match():
    message = invalid(algo="vacoo")
    assert "'vacoo'" in message
    hint = re.search(r"Did you mean ([^?]+)\?", message)
    assert hint and "vaco" in [s.strip() for s in hint.group(1).split(",")], message
    message = invalid(algo="ppo-kl")
    assert "ppo_kl" in message.split("Choose")[0], message


def test_unknown_env_suggests_registered_name():
    message = invalid(env="CartPole-v0")
    assert "'CartPole-v0'" in message
    assert "Did you mean" in message and "CartPole-v1" in message.split("Did you mean")[1]


def test_lag_groups_must_divide_envs():
    message = invalid(lag=LagConfig(max_delay=2, num_groups=3))
    assert "--lag.num-groups 3" in message and "--num-envs 8" in message
    validate(dataclasses.replace(BASE, lag=LagConfig(max_delay=2, num_groups=4)))


def test_spread_needs_two_groups():
    message = invalid(lag=LagConfig(max_delay=2, mode="spread", num_groups=1))
    assert "spread" in message and "--lag.num-groups" in message
    validate(dataclasses.replace(BASE, lag=LagConfig(max_delay=2, mode="spread", num_groups=2)))
    # K = 0 is synchronous whatever the mode
    validate(dataclasses.replace(BASE, lag=LagConfig(max_delay=0, mode="spread", num_groups=1)))


def test_derived_sizes():
    config = TrainConfig(num_envs=8, num_steps=16, total_timesteps=1000, update_epochs=3,
                         num_minibatches=2)
    assert config.batch_size == 128
    assert config.num_iterations == 7
    assert config.updates_per_iteration == 6


def test_to_dict_from_dict_round_trip_through_json():
    config = TrainConfig(
        env="Pendulum-v1", algo="vaco", seed=3, num_seeds=2, hidden_sizes=(32, 16, 8),
        activation="relu", normalize_obs=True, run_name="x", learning_rate=1e-3,
        lag=LagConfig(max_delay=4, mode="spread", num_groups=4),
        ppo=PPOConfig(anchor="learner", critic="learner", advantages="vtrace", rho_bar=2.0),
        ppo_kl=PPOKLConfig(kl_coef=0.5, adaptive=False),
        impala=VtraceConfig(rho_bar=1.5, c_bar=0.5),
        spo=SPOConfig(critic="learner"),
        vaco=VacoConfig(delta=0.1, filter="sample", advantages="vtrace", anchor="behaviour"),
        eval=EvalConfig(every_chunks=2, num_episodes=4),
    )
    data = json.loads(json.dumps(to_dict(config)))
    assert data["lag"] == {"max_delay": 4, "mode": "spread", "num_groups": 4, "replay": ""}
    restored = from_dict(data)
    assert restored == config
    assert isinstance(restored.hidden_sizes, tuple) and isinstance(restored.lag, LagConfig)
    assert from_dict(to_dict(TrainConfig())) == TrainConfig()


def test_legacy_behavior_spelling_loads_as_behaviour(tmp_path):
    """config.json files and sweep TOMLs written before the rename spell it "behavior"."""
    from jaxvaco.host.run_dir import load_run_dir
    from jaxvaco.lab.sweep import load_sweep_file

    config = TrainConfig(algo="vaco", ppo=PPOConfig(critic="behaviour", anchor="behaviour"),
                         vaco=VacoConfig(anchor="behaviour", critic="behaviour"))
    old = json.loads(json.dumps(to_dict(config)).replace('"behaviour"', '"behavior"'))
    assert old["ppo"]["critic"] == "behavior" and old["vaco"]["anchor"] == "behavior"
    (tmp_path / "config.json").write_text(json.dumps(old))
    assert load_run_dir(tmp_path)[0] == config
    sweep = tmp_path / "old.toml"
    sweep.write_text('name = "old"\n[base.ppo]\ncritic = "behavior"\n')
    assert load_sweep_file(sweep).base.ppo.critic == "behaviour"
    with pytest.raises(ConfigError, match="one of"):
        from_dict({"ppo": {"critic": "behaviours"}})


def test_overrides_by_dotted_path_or_nested_table_set_the_same_options():
    dotted = with_overrides(BASE, {"vaco.delta": 0.1, "lag.max_delay": 4, "gamma": 0.9,
                                   "hidden_sizes": [32]}, "script")
    nested = with_overrides(BASE, {"vaco": {"delta": 0.1}, "lag": {"max_delay": 4},
                                   "gamma": 0.9, "hidden_sizes": [32]}, "script")
    expected = dataclasses.replace(BASE, gamma=0.9, hidden_sizes=(32,),
                                   vaco=VacoConfig(delta=0.1), lag=LagConfig(max_delay=4))
    assert dotted == nested == expected
    assert with_overrides(BASE, {}) == BASE
    assert option_paths({"ppo": {"critic": "learner"}, "ppo.anchor": "learner", "seed": 1}) == {
        "ppo.critic": "learner", "ppo.anchor": "learner", "seed": 1}


@pytest.mark.parametrize("overrides, message", [
    ({"vaco.delt": 0.1}, "variant x: unknown option vaco.delt; did you mean vaco.delta?"),
    ({"gama": 0.9}, "variant x: unknown option gama; did you mean gamma?"),
    ({"vaco.delta": "big"}, "variant x: vaco.delta must be a number, got 'big'."),
    ({"num_envs": 1.5}, "variant x: num_envs must be an integer, got 1.5."),
    ({"ppo.critic": "mine"},
     "variant x: ppo.critic must be one of 'behaviour', 'learner', got 'mine'."),
    ({"gamma.value": 0.9},
     "variant x: gamma is an option, not a table of options; cannot set gamma.value."),
])
def test_override_errors_name_the_source_and_the_key(overrides, message):
    with pytest.raises(ConfigError) as error:
        with_overrides(BASE, overrides, "variant x")
    assert str(error.value) == message
