"""Use what you trained: load a run's policy and act with it.

`load_policy(path, run=0, checkpoint=None)` reads

- a run directory (`results/<run>`): one of its runs (an index, or its labels: seed and
  swept values) from one of its checkpoints (the newest by default). Only the parameters
  and the observation statistics are read from the checkpoint (an orbax partial restore),
  never the optimiser or the rest of the training state;
- a policy directory written by `jaxvaco.host.policy_export.export_policy` (`jaxvaco export`):
  `manifest.json` (env, network shape, observation normaliser, labels, where it came from)
  and the parameters in flax's msgpack serialisation (`params.msgpack`); no training state
  at all.

The returned `Policy` acts like the run did: `act(obs, key=None, greedy=True)` normalises
observations with the checkpoint's statistics (when the run normalised them) and returns
the greedy action (arg-max / Gaussian mean) or a sample. Finding the run and checkpoint
is `jaxvaco.host.policy_source`'s; evaluating is `jaxvaco.host.policy_eval`'s.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from jaxvaco.core.config import RunFileError, TrainConfig
from jaxvaco.core.envs import env_spec
from jaxvaco.core.envs.base import EnvSpec
from jaxvaco.core.networks import ActorCritic, greedy_action, make_network
from jaxvaco.core.normalize import RunningMeanStd, init_running_stats, normalize_obs
from jaxvaco.host.policy_source import (
    RunChoice,
    Source,
    abstract_params,
    choose_checkpoint,
    open_source,
    restore_checkpoint,
    select_run,
    shapes,
    spec_from_manifest,
)
from jaxvaco.host.run_folder import ExportFolder


def policy_action(network: ActorCritic, spec: EnvSpec, params: Any,
                  obs_stats: RunningMeanStd | None, obs: jax.Array, key: jax.Array | None,
                  greedy: bool) -> jax.Array:
    """The action for `obs` [..., *obs_shape]: normalised with `obs_stats` (None: as is),
    greedy (arg-max / mean) or drawn with `key`; continuous actions clipped to the env's
    bounds, as the env adapters clip them."""
    if obs_stats is not None:
        obs = normalize_obs(obs_stats, obs)
    pi, _ = network.apply(params, obs)
    action = greedy_action(pi) if greedy else pi.sample(seed=key)
    if not spec.discrete:
        action = jnp.clip(action, jnp.asarray(spec.action_low, action.dtype),
                          jnp.asarray(spec.action_high, action.dtype))
    return action


class Policy:
    """A trained policy: `act(obs, key=None, greedy=True)`, and what it came from.

    Attributes: `params` (the network's flax variables), `obs_stats` (the observation
    normaliser's `RunningMeanStd`, None when the run did not normalise), `config` (the
    run's `TrainConfig`), `labels` (the run's seed and grid values), `spec` (the env's
    `EnvSpec`), `network` (the `ActorCritic` module), `source` (path, run index and
    checkpoint it was read from)."""

    def __init__(self, network: ActorCritic, spec: EnvSpec, config: TrainConfig, params: Any,
                 obs_stats: RunningMeanStd | None, labels: dict, source: dict):
        self.network, self.spec, self.config = network, spec, config
        self.params, self.obs_stats = params, obs_stats
        self.labels, self.source = dict(labels), dict(source)
        self._act = jax.jit(functools.partial(policy_action, network, spec),
                            static_argnames=("greedy",))

    def act(self, obs: Any, key: jax.Array | None = None, greedy: bool = True) -> jax.Array:
        """Actions for observations `obs` [B, *obs_shape] (or one observation
        [*obs_shape]): greedy (arg-max for discrete actions, the Gaussian's mean for
        continuous ones), or with `greedy=False` drawn from the policy with `key`.
        Continuous actions are clipped to the env's bounds. Runs as one compiled program
        with the parameters as its arguments; it is also jittable inside a function of
        yours (`jax.jit(policy.act)`: the parameters then become constants of that program,
        and XLA may round the last bit differently). `greedy` must be a Python bool."""
        obs = jnp.asarray(obs, jnp.float32)
        shape = self.spec.obs_shape
        if obs.ndim < len(shape) or obs.shape[obs.ndim - len(shape):] != shape:
            batched = ", ".join(["B", *map(str, shape)])
            raise ValueError(f"act() takes observations of shape {shape} or [{batched}] "
                             f"({self.spec.name}), got {obs.shape}.")
        if not greedy and key is None:
            raise ValueError("act(greedy=False) draws actions: pass a key "
                             "(jax.random.PRNGKey(...)).")
        return self._act(self.params, self.obs_stats, obs, None if greedy else key,
                         greedy=bool(greedy))

    def __repr__(self) -> str:
        labels = ", ".join(f"{k}={v}" for k, v in self.labels.items())
        return (f"Policy({self.config.algo} on {self.spec.name}, {labels}, from "
                f"{self.source.get('path')} checkpoint {self.source.get('checkpoint')})")


def load_export(source: Source) -> Policy:
    """The policy of an exported directory (manifest.json and params.msgpack)."""
    from flax import serialization

    manifest, path, export = source.manifest, source.path, ExportFolder(source.path)
    net = manifest["network"]
    spec = spec_from_manifest(manifest)
    network = make_network(spec, net["hidden_sizes"], net["activation"])
    params_path = path / manifest.get("params_file", export.PARAMS)
    try:
        data = params_path.read_bytes()
    except OSError as error:
        raise RunFileError(f"cannot read {params_path} ({error.strerror}): export the policy "
                           "again.") from None
    if manifest.get("params_sha256") not in (None, hashlib.sha256(data).hexdigest()):
        raise RunFileError(f"{params_path} differs from the digest in {export.manifest}: it is "
                           "damaged or another export's; export the policy again.")
    try:
        params = serialization.msgpack_restore(data)
    except Exception as error:  # noqa: BLE001 - msgpack raises many kinds
        raise RunFileError(f"{params_path} cannot be read ({type(error).__name__}); export "
                           "the policy again.") from None
    if shapes(params) != shapes(abstract_params(network, spec)):
        raise RunFileError(f"{params_path} does not fit the network of {export.manifest} "
                           f"(hidden sizes {net['hidden_sizes']}, observations "
                           f"{spec.obs_shape}): export the policy again.")
    params = jax.tree.map(jnp.asarray, params)
    stats = manifest.get("obs_normalization")
    obs_stats = None if stats is None else RunningMeanStd(
        *(jnp.asarray(stats[name], jnp.float32).reshape(shape) for name, shape in
          (("mean", spec.obs_shape), ("var", spec.obs_shape), ("count", ()))))
    return Policy(network, spec, source.config, params, obs_stats, manifest["labels"],
                  {"path": str(path), "kind": "export", "run": 0,
                   "checkpoint": manifest["source"].get("checkpoint"),
                   "exported_from": manifest["source"]})


def load_policy(path: str | Path, run: RunChoice = 0, checkpoint: int | None = None
                ) -> Policy:
    """The policy of one run of a run directory, or of an exported policy directory.

    `run`: an index into the directory's runs (runs.json: seeds × grid values) or labels
    that exactly one run matches, e.g. {"seed": 1, "lag_delay": 4}; `checkpoint`: the
    iteration of a checkpoint (default: the newest). ConfigError (RunFileError for a
    damaged file) names the choices when the path, run or checkpoint does not exist."""
    source = open_source(path)
    index = select_run(source, run)
    step = choose_checkpoint(source, checkpoint)
    if source.kind == "export":
        return load_export(source)
    return run_policy(source, index, step, *source_state(source, step))


def run_policy(source: Source, index: int, step: int, params: Any, obs_stats: RunningMeanStd
               ) -> Policy:
    """Run `index` of a run directory's restored [R, ...] parameters and statistics."""
    config = source.config
    spec = env_spec(config.env, config.brax_backend)
    network = make_network(spec, config.hidden_sizes, config.activation)
    pick = lambda tree: jax.tree.map(lambda x: x[index], tree)  # noqa: E731
    return Policy(network, spec, config, pick(params),
                  pick(obs_stats) if config.normalize_obs else None, source.runs[index],
                  {"path": str(source.path), "kind": "run", "run": index, "checkpoint": step})


def source_policy(source: Source, index: int, step: int | None,
                  state: tuple[Any, RunningMeanStd] | None = None) -> Policy:
    """The policy of run `index` of `source` (`state`: its restored [R, ...] arrays)."""
    if source.kind == "export":
        return load_export(source)
    return run_policy(source, index, step, *(state or source_state(source, step)))


def source_state(source: Source, step: int | None) -> tuple[Any, RunningMeanStd]:
    """Parameters and observation statistics of every run of `source` [R, ...]."""
    if source.kind == "export":
        policy = load_export(source)
        stats = (init_running_stats(policy.spec.obs_shape) if policy.obs_stats is None
                 else policy.obs_stats)
        return jax.tree.map(lambda x: jnp.asarray(x)[None], (policy.params, stats))
    config = source.config
    spec = env_spec(config.env, config.brax_backend)
    network = make_network(spec, config.hidden_sizes, config.activation)
    return restore_checkpoint(source, step, network, spec)
