"""Typed, validated configuration for every jaxvaco run.

The dataclasses here (their option groups in `jaxvaco.core.option_groups`, and each algorithm's
in its `AlgorithmSpec`) are the single source of truth for the CLI (tyro turns each field
into a flag: `--num-envs`, `--lag.max-delay`, `--vaco.delta`, ...) and for the Python API.
`jaxvaco.core.validation.validate(config)` runs before anything is compiled and raises
`ConfigError` with a message that says what to change.

Files and scripts set options through one path: `from_table` reads a (nested) table of a
config file, and `with_overrides` sets options on a config from dotted paths or nested
tables (a sweep's variants and env overrides, the experiment scripts), both with the same
checks and messages.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from typing import Any, Literal

from jaxvaco.core.algos import registry
from jaxvaco.core.algos.impala import VtraceConfig
from jaxvaco.core.algos.ppo import PPOConfig
from jaxvaco.core.algos.ppo_kl import PPOKLConfig
from jaxvaco.core.algos.spec import SHARED_TUNED, AlgorithmSpec
from jaxvaco.core.algos.spo import SPOConfig
from jaxvaco.core.algos.vaco import VacoConfig
from jaxvaco.core.errors import ConfigError, RunFileError
from jaxvaco.core.option_groups import (
    AsyncConfig,
    DistributedConfig,
    EvalConfig,
    LagConfig,
)

__all__ = ["AsyncConfig", "ConfigError", "DistributedConfig", "EvalConfig", "LagConfig",
           "PPOConfig", "PPOKLConfig", "RunFileError", "SPOConfig", "TrainConfig", "VacoConfig",
           "VtraceConfig", "register_algorithm"]
"""The built-in algorithms' option groups are re-exported here, where they were defined before
each algorithm declared its own (`jaxvaco.core.algos.<name>`)."""


@dataclasses.dataclass(frozen=True)
class SharedOptions:
    """The options of a run that every algorithm shares; `TrainConfig` adds one option group
    per registered algorithm (`--ppo.*`, `--vaco.*`, ...)."""

    env: str = "CartPole-v1"
    """A gymnax id (CartPole-v1, Acrobot-v1, Breakout-MinAtar, ...) or a Brax name
    (inverted_pendulum, ant, ...)."""
    algo: str = "ppo"
    """The algorithm: ppo, ppo_kl, spo, impala, vaco, or one a plugin registers; its own
    options are the group of the same name (--vaco.delta, ...)."""
    seed: int = 0
    """Seed of the first run; run i uses seed + i."""
    num_seeds: int = 1
    """S: independent runs vmapped in one program."""
    num_envs: int = 16
    """N: parallel environments per seed."""
    num_steps: int = 128
    """L: rollout length per iteration."""
    total_timesteps: int = 1_000_000
    """Env steps per seed; iterations = total // (N·L)."""
    update_epochs: int | None = None
    """E: passes over each batch. Default (None): the algorithm's tuned value."""
    num_minibatches: int | None = None
    """M: minibatches per epoch; each holds whole trajectories (N/M envs × L steps).
    Default (None): the algorithm's tuned value."""
    learning_rate: float | None = None
    """Adam step size. Default (None): the algorithm's tuned value (ppo 2.95e-3,
    ppo_kl 6.65e-4, spo 2.89e-3, impala 1.28e-4, vaco 2.28e-3)."""
    anneal_lr: bool = True
    """Linearly anneal the learning rate to 0 over training."""
    gamma: float = 0.99
    """Discount factor γ."""
    gae_lambda: float = 0.95
    """λ of GAE and of V-trace's traces."""
    clip_coef: float | None = None
    """ε of PPO's clip and of SPO's penalty. Default (None): the tuned value of ppo (0.166)
    or spo (0.168); 0.2 for the algorithms that have no clip."""
    ent_coef: float | None = None
    """c_e: weight of the entropy bonus. Default (None): the algorithm's tuned value
    (ppo 0.0252, ppo_kl 0.0152, spo 0.0113, impala 0.00241, vaco 0.00273)."""
    vf_coef: float = 0.5
    """c_v: weight of the value loss ½·(V(s) − v)²."""
    max_grad_norm: float = 0.5
    """Global-norm gradient clipping (actor and critic together)."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this for learning (not for the reported returns). Brax
    returns are large: with global-norm clipping over actor and critic together, big value
    errors would otherwise starve the policy gradient."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Widths of the actor and of the critic MLP."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Activation of the hidden layers."""
    normalize_obs: bool = False
    """Running observation normalisation (statistics updated once per iteration)."""
    brax_backend: str = "spring"
    """Physics backend for Brax environments: spring (fastest on CPU), mjx, generalized,
    positional."""
    chunk_iterations: int = 0
    """Iterations per compiled chunk; 0 picks about 20 chunks per run."""
    run_name: str = ""
    """Folder name under --results-dir; empty = <env>__<algo>__<timestamp>."""
    results_dir: str = "results"
    """Where run folders are written."""
    progress: bool = True
    """Show a progress bar."""
    lag: LagConfig = LagConfig()
    eval: EvalConfig = EvalConfig()
    distributed: DistributedConfig = DistributedConfig()
    asynchronous: AsyncConfig = AsyncConfig()

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.batch_size

    @property
    def updates_per_iteration(self) -> int:
        resolved = with_tuned_defaults(self)
        return resolved.update_epochs * resolved.num_minibatches


def train_config_class(specs: dict[str, AlgorithmSpec]) -> type:
    """`SharedOptions` plus one option group per algorithm, each defaulting to its
    options' defaults (the algorithm's tuned values)."""
    groups = [(name, spec.options, dataclasses.field(default=spec.options()))
              for name, spec in specs.items()]
    cls = dataclasses.make_dataclass("TrainConfig", groups, bases=(SharedOptions,), frozen=True)
    cls.__module__ = __name__  # pickling and `repr` find it here
    cls.__doc__ = "One training run (or S seeds of it in one program)."
    return cls


TrainConfig = train_config_class(registry.algorithms())
"""One training run (or S seeds of it in one program): `SharedOptions` and the option group
of every registered algorithm. Rebuilt by `register_algorithm`; read it as
`jaxvaco.TrainConfig` (or from this module) after registering."""


def register_algorithm(spec: AlgorithmSpec) -> type:
    """Register an algorithm declared in user code and rebuild `TrainConfig` (returned)
    with its option group; then `TrainConfig(algo=spec.name, ...)`, `jaxvaco.run`, sweeps
    and the CLI (`jaxvaco.cli.main`) run it like a built-in one."""
    global TrainConfig
    registry.add(spec)
    TrainConfig = train_config_class(registry.algorithms())
    return TrainConfig


def option_path(algo: str, name: str) -> str:
    """The (dotted) field of a hyperparameter of `algo`, as a grid or a tuning names it: a
    shared option is itself (learning_rate, update_epochs, ...), one of the algorithm's own
    options is in its group (delta -> vaco.delta, target_kl -> ppo_kl.target_kl)."""
    return name if name in SharedOptions.__dataclass_fields__ else f"{algo}.{name}"


def with_tuned_defaults(config: TrainConfig) -> TrainConfig:
    """`config` with every shared option left at None set to its algorithm's tuned value
    (`AlgorithmSpec.tuned`, with its `provenance`); an unknown algorithm is left as it is
    (validation names it). An option given explicitly (flag, config file, Python) always
    wins; a run records the values it used in config.json, so a run started under other
    defaults resumes with its own."""
    spec = registry.spec_of(config.algo)
    if spec is None:
        return config
    unset = {name: spec.tuned_value(name) for name in SHARED_TUNED
             if getattr(config, name) is None}
    return dataclasses.replace(config, **unset) if unset else config


def tuned_settings(config: TrainConfig) -> bool:
    """True when the (resolved) config runs its algorithm as tuned: the tuned values of the
    shared options (ε only where the algorithm has a clip) and of its `tuned_options`."""
    config = with_tuned_defaults(config)
    spec = registry.spec_of(config.algo)
    relevant = [n for n in SHARED_TUNED if n != "clip_coef" or spec.uses_clip]
    return spec.runs_as_tuned(getattr(config, config.algo)) and all(
        getattr(config, n) == spec.tuned_value(n) for n in relevant)


def to_dict(config: TrainConfig) -> dict:
    """JSON-ready nested dict of the config."""
    return dataclasses.asdict(config)


RUN_RECORD_KEYS = ("control", "resume_changes")
"""Keys of a run's config.json besides the TrainConfig: the host-loop options
(`jaxvaco.host.run_dir.RunControl`) and the changes accepted by --resume-with-changes."""


def from_dict(data: dict, source: str = "config") -> TrainConfig:
    """Inverse of to_dict (used by resume and by experiment scripts).

    Missing keys take their defaults; an unknown key or a value of the wrong type raises
    ConfigError naming `source` (e.g. the file) and the key.
    """
    fields = {k: v for k, v in data.items() if k not in RUN_RECORD_KEYS}
    return from_table(TrainConfig, fields, source)


def from_table(cls: type, data: Any, source: str, prefix: str = "") -> Any:
    """Dataclass `cls` from a JSON/TOML table, every value checked against its field type."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: {prefix.rstrip('.') or 'the file'} must be a table "
                          f"(key = value pairs), got {data!r}.")
    hints = typing.get_type_hints(cls)
    unknown = [key for key in data if key not in hints]
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(hints), n=1, cutoff=0.6)
        hint = f"; did you mean {prefix}{close[0]}?" if close else f"; known: {', '.join(hints)}."
        raise ConfigError(f"{source}: unknown option {prefix}{unknown[0]}{hint}")
    return cls(**{key: _typed(value, hints[key], source, prefix + key)
                  for key, value in data.items()})


def _typed(value: Any, kind: Any, source: str, name: str) -> Any:
    """`value` as field type `kind` (tuples from lists); ConfigError when it is not one."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any:  # checked by whoever reads it (a sweep's variants and env_overrides)
        return value
    if dataclasses.is_dataclass(kind):
        return from_table(kind, value, source, f"{name}.")
    if origin is Literal:
        if value == "behavior" and "behaviour" in args:
            value = "behaviour"  # legacy spelling of config.json / sweep TOMLs written before
        if value in args:
            return value
        return _wrong_type(source, name, value, f"one of {', '.join(map(repr, args))}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            return _wrong_type(source, name, value, "a list")
        return tuple(_typed(v, args[0], source, f"{name}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            return _wrong_type(source, name, value, "a table")
        return {k: _typed(v, args[1], source, f"{name}.{k}") for k, v in value.items()}
    if type(None) in args:  # an optional value: None, or one of the other type
        if value is None:
            return None
        kind = next(arg for arg in args if arg is not type(None))
    accepted = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}[kind]
    if isinstance(value, accepted) and (kind is bool or not isinstance(value, bool)):
        return value
    what = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[kind]
    return _wrong_type(source, name, value, what)


def _wrong_type(source: str, name: str, value: Any, expected: str) -> Any:
    raise ConfigError(f"{source}: {name} must be {expected}, got {value!r}.")


def option_paths(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A (nested) table of options as {dotted path: value}; "ppo.critic" keys and
    {"ppo": {"critic": ...}} tables give the same path."""
    out = {}
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(option_paths(value, path + "."))
        else:
            out[path] = value
    return out


def with_overrides(config: TrainConfig, overrides: dict[str, Any], source: str = "overrides"
                   ) -> TrainConfig:
    """`config` with `overrides` set: a nested table ({"vaco": {"delta": 0.1}}) or dotted
    paths ({"vaco.delta": 0.1}), as a sweep's variants, a config file or a script give them.

    Every key and value is checked as in a config file (`from_table`): an unknown option
    (with the closest known name), a value of the wrong type, or a path through an option
    that is not a group raises ConfigError naming `source` and the key.
    """
    data = to_dict(config)
    for path, value in option_paths(overrides).items():
        *groups, field = path.split(".")
        table = data
        for i, group in enumerate(groups):
            table = table.setdefault(group, {})  # an unknown group: from_table names it
            if not isinstance(table, dict):
                raise ConfigError(f"{source}: {'.'.join(groups[:i + 1])} is an option, not "
                                  f"a table of options; cannot set {path}.")
        table[field] = value
    return from_table(TrainConfig, data, source)
