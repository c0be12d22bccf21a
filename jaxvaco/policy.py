"""Use what you trained: load a run's policy, act with it, evaluate it, export it.

`load_policy(path, run=0, checkpoint=None)` reads

- a run directory (`results/<run>`): one of its runs (an index, or its labels: seed and
  swept values) from one of its checkpoints (the newest by default). Only the parameters
  and the observation statistics are read from the checkpoint (an orbax partial restore),
  never the optimiser or the rest of the training state;
- a policy directory written by `export_policy` (`jaxvaco export`): `manifest.json` (env,
  network shape, observation normaliser, labels, where it came from) and the parameters in
  flax's msgpack serialisation (`params.msgpack`); no training state at all.

The returned `Policy` acts like the run did: `act(obs, key=None, greedy=True)` normalises
observations with the checkpoint's statistics (when the run normalised them) and returns
the greedy action (arg-max / Gaussian mean) or a sample.

`evaluate_runs` is what `jaxvaco eval` computes: the runner's own evaluation program
(`jaxvaco.compiled.Compiled.evaluate`, vmapped over every run of the directory) with the
runner's keys (`jaxvaco.compiled.eval_keys`), so with the run's episode count it reproduces
the run's evaluation at that checkpoint bit for bit. `record_episode` keeps the states of
one evaluation episode for `jaxvaco.video`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxvaco.config import ConfigError, DistributedConfig, RunFileError, TrainConfig, from_dict
from jaxvaco.envs import env_spec
from jaxvaco.envs.base import EnvSpec
from jaxvaco.networks import ActorCritic, greedy_action, make_network
from jaxvaco.normalize import RunningMeanStd, init_running_stats, normalize_obs
from jaxvaco.run_dir import checkpoint_steps, load_run_dir, read_json_file, write_json

FORMAT = "jaxvaco-policy"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PARAMS_FILE = "params.msgpack"

RunChoice = int | dict[str, Any]
"""A run of a directory: its index in runs.json, or labels it must match
({"seed": 1, "lag_delay": 4})."""


@dataclasses.dataclass(frozen=True)
class Source:
    """A directory policies come from: a run directory ("run") or an export ("export")."""

    path: Path
    kind: str
    config: TrainConfig
    runs: list[dict]  # labels of each run: seed and swept values
    steps: list[int]  # checkpoints (an export: the one it was made from)
    manifest: dict | None = None


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


# ------------------------------------------------------------------ reading directories


def open_source(path: str | Path) -> Source:
    """The run directory or exported policy at `path` (ConfigError when it is neither)."""
    path = Path(path)
    if not path.is_dir():
        raise ConfigError(f"{path} is not a folder: pass a run directory (results/<run>) or "
                          "a policy exported by jaxvaco export.")
    if (path / MANIFEST).is_file():
        manifest = read_manifest(path)
        config = from_dict(manifest["config"], source=str(path / MANIFEST))
        step = manifest["source"].get("checkpoint")
        return Source(path, "export", config, [dict(manifest["labels"])],
                      [] if step is None else [int(step)], manifest)
    if not (path / "config.json").is_file():
        sweep = (" It is a sweep: pass one of its runs (a folder under it with a "
                 "config.json).") if (path / "sweep.json").exists() else ""
        raise ConfigError(f"{path} is not a jaxvaco run directory or exported policy (it has "
                          f"no config.json or manifest.json).{sweep}")
    config, grid = load_run_dir(path)
    runs_file = path / "runs.json"
    recorded = read_json_file(runs_file) if runs_file.exists() else None
    runs = recorded.get("runs") if isinstance(recorded, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and "seed" in r for r in runs):
        from jaxvaco.grid import expand_runs

        runs = expand_runs(config, grid)[0]
    return Source(path, "run", config, runs, checkpoint_steps(path))


def describe_labels(labels: dict) -> str:
    return ", ".join(f"{k} {v}" if k == "seed" else f"{k}={v}" for k, v in labels.items())


def run_choices(source: Source) -> str:
    """"0 (seed 0), 1 (seed 1), ..." (the first 12)."""
    shown = [f"{i} ({describe_labels(labels)})" for i, labels in enumerate(source.runs[:12])]
    more = f", ... ({len(source.runs)} in all)" if len(source.runs) > 12 else ""
    return ", ".join(shown) + more


def select_run(source: Source, run: RunChoice) -> int:
    """The index of `run` (an index, or labels that exactly one run matches)."""
    if isinstance(run, bool) or not isinstance(run, int | dict):
        raise ConfigError(f"run must be an index or a dict of labels, got {run!r}.")
    if isinstance(run, int):
        if not 0 <= run < len(source.runs):
            raise ConfigError(f"run {run} is out of range: {source.path} has "
                              f"{len(source.runs)} run(s): {run_choices(source)}.")
        return run
    names = sorted({name for labels in source.runs for name in labels})
    unknown = [name for name in run if name not in names]
    if unknown:
        raise ConfigError(f"{source.path} has no label {unknown[0]!r}: its runs are labelled "
                          f"by {', '.join(names)} ({run_choices(source)}).")
    matches = [i for i, labels in enumerate(source.runs)
               if all(labels.get(name) == value for name, value in run.items())]
    if len(matches) != 1:
        wanted = describe_labels(run)
        what = "no run" if not matches else f"{len(matches)} runs ({', '.join(map(str, matches))})"
        raise ConfigError(f"{what} of {source.path} match {wanted}; pick one of: "
                          f"{run_choices(source)}.")
    return matches[0]


def parse_run(text: str | None) -> RunChoice | None:
    """`--run` of the command line: "3" -> 3, "seed=1,lag_delay=4" -> labels."""
    if text is None:
        return None
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    labels = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--run {text!r}: give a run index (0, 1, ...) or labels "
                              "name=value[,name=value] (e.g. seed=1,lag_delay=4).")
        try:
            labels[name.strip()] = json.loads(value)
        except json.JSONDecodeError:
            labels[name.strip()] = value.strip()
    return labels


def choose_checkpoint(source: Source, checkpoint: int | None) -> int:
    """The checkpoint step to read: `checkpoint`, or the newest."""
    if source.kind == "export":
        step = source.steps[0] if source.steps else None
        if checkpoint is not None and checkpoint != step:
            raise ConfigError(f"{source.path} is an exported policy of checkpoint {step}: it "
                              "holds no other (export another with jaxvaco export "
                              "--checkpoint).")
        return step
    if not source.steps:
        raise ConfigError(f"{source.path} has no checkpoints (trained with "
                          "--keep-checkpoints 0, or stopped before its first): there is no "
                          "policy to load. Train with checkpoints (the default) to use one.")
    if checkpoint is None:
        return source.steps[-1]
    if checkpoint not in source.steps:
        raise ConfigError(f"{source.path} has no checkpoint {checkpoint}; its checkpoints "
                          f"are at iterations {', '.join(map(str, source.steps))}.")
    return checkpoint


def abstract_params(network: ActorCritic, spec: EnvSpec) -> Any:
    """The ShapeDtypeStructs of the network's variables (nothing is computed)."""
    obs = jax.ShapeDtypeStruct((1, *spec.obs_shape), jnp.float32)
    return jax.eval_shape(network.init, jax.random.PRNGKey(0), obs)


def shapes(tree: Any) -> Any:
    return jax.tree.map(lambda x: (tuple(x.shape), str(np.dtype(x.dtype))), tree)


def restore_checkpoint(source: Source, step: int, network: ActorCritic, spec: EnvSpec
                       ) -> tuple[Any, RunningMeanStd]:
    """Parameters and observation statistics of every run [R, ...] at checkpoint `step`,
    without the rest of the training state (orbax partial restore). Nothing is written or
    deleted: a damaged checkpoint is refused (choose another with `checkpoint`)."""
    import orbax.checkpoint as ocp

    from jaxvaco.checkpoint import damaged_files

    step_dir = (source.path / "checkpoints" / str(step)).absolute()
    others = [s for s in source.steps if s != step]
    other = f" (its others: {', '.join(map(str, others))})" if others else ""
    damaged = damaged_files(step_dir)
    if damaged:
        raise RunFileError(f"checkpoint {step_dir} is damaged ({len(damaged)} file(s) differ "
                           f"from its digest, e.g. {damaged[0]}); choose another checkpoint"
                           f"{other}.")
    runs = len(source.runs)
    batched = lambda x: jax.ShapeDtypeStruct((runs, *x.shape), x.dtype)  # noqa: E731
    target = {"params": jax.tree.map(batched, abstract_params(network, spec)),
              "obs_stats": {"mean": jax.ShapeDtypeStruct((runs, *spec.obs_shape), jnp.float32),
                            "var": jax.ShapeDtypeStruct((runs, *spec.obs_shape), jnp.float32),
                            "count": jax.ShapeDtypeStruct((runs,), jnp.float32)}}
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)  # orbax warns that the item folder has no step metadata
    try:
        checkpointer = ocp.PyTreeCheckpointer()
        try:
            saved = checkpointer.metadata(step_dir / "state")
            saved = getattr(saved, "item_metadata", saved)
            saved = getattr(saved, "tree", saved)
            saved = {name: shapes(saved[name]) for name in target}
        except Exception as error:  # noqa: BLE001 - orbax raises many kinds on bad files
            raise RunFileError(f"checkpoint {step_dir} cannot be read ({type(error).__name__}: "
                               f"{' '.join(str(error).split())[:200]}); choose another "
                               f"checkpoint{other}.") from None
        if saved != shapes(target):
            raise RunFileError(f"checkpoint {step_dir} holds parameters of another shape than "
                               f"the network of {source.path / 'config.json'} "
                               f"({spec.name}, hidden sizes {source.config.hidden_sizes}, "
                               f"{len(source.runs)} runs in runs.json): config.json or "
                               "runs.json was edited, or the checkpoint is another run's.")
        device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        restore_args = jax.tree.map(lambda _: ocp.ArrayRestoreArgs(sharding=device), target)
        try:
            out = checkpointer.restore(step_dir / "state", args=ocp.args.PyTreeRestore(
                item=target, restore_args=restore_args, partial_restore=True))
        except Exception as error:  # noqa: BLE001
            raise RunFileError(f"checkpoint {step_dir} cannot be restored "
                               f"({type(error).__name__}: "
                               f"{' '.join(str(error).split())[:200]}); choose another "
                               f"checkpoint{other}.") from None
    finally:
        absl.setLevel(level)
    stats = out["obs_stats"]
    return out["params"], RunningMeanStd(stats["mean"], stats["var"], stats["count"])


def read_manifest(path: Path) -> dict:
    manifest = read_json_file(path / MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise RunFileError(f"{path / MANIFEST} is not a jaxvaco policy manifest (no "
                           f"\"format\": \"{FORMAT}\").")
    if manifest.get("format_version", 0) > FORMAT_VERSION:
        raise RunFileError(f"{path / MANIFEST} has format version "
                           f"{manifest['format_version']}, newer than this jaxvaco reads "
                           f"({FORMAT_VERSION}): upgrade jaxvaco.")
    missing = [k for k in ("config", "network", "labels", "source", "env")
               if k not in manifest]
    if missing:
        raise RunFileError(f"{path / MANIFEST} lacks {', '.join(missing)}: export the policy "
                           "again.")
    return manifest


def spec_from_manifest(manifest: dict) -> EnvSpec:
    net = manifest["network"]
    bounds = lambda v: None if v is None else tuple(float(x) for x in v)  # noqa: E731
    return EnvSpec(name=manifest["env"], family=manifest["family"],
                   obs_shape=tuple(net["obs_shape"]), discrete=bool(net["discrete"]),
                   num_actions=int(net["num_actions"]), action_low=bounds(net["action_low"]),
                   action_high=bounds(net["action_high"]),
                   max_episode_steps=int(manifest["max_episode_steps"]))


def load_export(source: Source) -> Policy:
    """The policy of an exported directory (manifest.json and params.msgpack)."""
    from flax import serialization

    manifest, path = source.manifest, source.path
    net = manifest["network"]
    spec = spec_from_manifest(manifest)
    network = make_network(spec, net["hidden_sizes"], net["activation"])
    params_path = path / manifest.get("params_file", PARAMS_FILE)
    try:
        data = params_path.read_bytes()
    except OSError as error:
        raise RunFileError(f"cannot read {params_path} ({error.strerror}): export the policy "
                           "again.") from None
    if manifest.get("params_sha256") not in (None, hashlib.sha256(data).hexdigest()):
        raise RunFileError(f"{params_path} differs from the digest in {path / MANIFEST}: it is "
                           "damaged or another export's; export the policy again.")
    try:
        params = serialization.msgpack_restore(data)
    except Exception as error:  # noqa: BLE001 - msgpack raises many kinds
        raise RunFileError(f"{params_path} cannot be read ({type(error).__name__}); export "
                           "the policy again.") from None
    if shapes(params) != shapes(abstract_params(network, spec)):
        raise RunFileError(f"{params_path} does not fit the network of {path / MANIFEST} "
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


# ----------------------------------------------------------------------------- export


def export_policy(policy: Policy, out: str | Path) -> Path:
    """Write `policy` to the folder `out` (created; an earlier export there is replaced):
    params.msgpack (flax's msgpack serialisation of the network's variables) and
    manifest.json, written last. `load_policy(out)` reads it back."""
    from flax import serialization

    import jaxvaco

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file: give a folder to export into.")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise ConfigError(f"--out {out} is not empty and holds no exported policy: give a "
                          "new or empty folder.")
    out.mkdir(parents=True, exist_ok=True)
    data = serialization.msgpack_serialize(jax.tree.map(np.asarray, policy.params))
    tmp = out / (PARAMS_FILE + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out / PARAMS_FILE)
    spec, config = policy.spec, policy.config
    stats = None if policy.obs_stats is None else {
        "mean": np.asarray(policy.obs_stats.mean).tolist(),
        "var": np.asarray(policy.obs_stats.var).tolist(),
        "count": float(policy.obs_stats.count), "clip": 10.0, "eps": 1e-8}
    source = {k: v for k, v in policy.source.items() if k != "kind"}
    source["path"] = str(Path(source["path"]).absolute())
    if policy.source.get("kind") == "export":
        source = dict(policy.source.get("exported_from", source))
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "jaxvaco_version": jaxvaco.__version__,
        "env": spec.name, "family": spec.family, "brax_backend": config.brax_backend,
        "algo": config.algo, "max_episode_steps": spec.max_episode_steps,
        "network": {"hidden_sizes": list(config.hidden_sizes), "activation": config.activation,
                    "obs_shape": list(spec.obs_shape), "discrete": spec.discrete,
                    "action_type": "discrete" if spec.discrete else "continuous",
                    "num_actions": spec.num_actions,
                    "action_low": None if spec.action_low is None else list(spec.action_low),
                    "action_high": None if spec.action_high is None else list(spec.action_high)},
        "obs_normalization": stats,
        "labels": policy.labels,
        "source": source,
        "params_file": PARAMS_FILE,
        "params_sha256": hashlib.sha256(data).hexdigest(),
        "config": dataclasses.asdict(config),
    }
    write_json(out / MANIFEST, manifest)
    return out


# ------------------------------------------------------------------------- evaluation


def evaluation_config(config: TrainConfig, episodes: int) -> TrainConfig:
    """The run's config for evaluating on one device with `episodes` episodes per run."""
    return dataclasses.replace(config, eval=dataclasses.replace(config.eval,
                                                                num_episodes=episodes),
                               distributed=DistributedConfig())


def stacked_state(params: Any, obs_stats: RunningMeanStd) -> Any:
    """A `TrainState` holding only what evaluation reads (parameters and observation
    statistics, [R, ...]); the other fields are None."""
    from jaxvaco.train import TrainState

    return TrainState(params=params, opt_state=None, obs=None, env_state=None,
                      obs_stats=obs_stats, lag=None, algo_state=None, key=None, iteration=None)


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


def evaluate_runs(source: Source, step: int | None, episodes: int, greedy: bool,
                  seed: int | None = None, state: tuple[Any, RunningMeanStd] | None = None,
                  compilation_cache: str = "auto") -> np.ndarray:
    """Returns [R, episodes] of every run of `source` at checkpoint `step`: the runner's
    evaluation program (vmapped over the runs) on the runner's keys
    (`fold_in(PRNGKey(10_000 + step), run seed)`; `seed` draws other episodes:
    `fold_in(PRNGKey(seed), run seed)`). `state`: `source_state(source, step)`, if read."""
    from jaxvaco.compilation import configure_cache
    from jaxvaco.compiled import Compiled, eval_keys
    from jaxvaco.train import make_train

    params, obs_stats = state or source_state(source, step)
    cache_dir = configure_cache(compilation_cache)
    compiled = Compiled(make_train(evaluation_config(source.config, episodes)), cache_dir)
    keys = eval_keys(step or 0, source.runs, seed)
    return np.asarray(compiled.evaluate(stacked_state(params, obs_stats), keys, greedy))


def recorded_returns(source: Source, step: int | None, greedy: bool) -> dict[int, float]:
    """The run's own evaluation return at iteration `step` (metrics.jsonl), by run."""
    path = source.path / "metrics.jsonl"
    if source.kind != "run" or step is None or not path.exists():
        return {}
    name = f"eval/{'greedy' if greedy else 'stochastic'}_return"
    found = {}
    for line in path.read_bytes().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and row.get("iteration") == step and row.get(name) is not None:
            found[int(row["run"])] = float(row[name])
    return found


@dataclasses.dataclass
class Episode:
    """One evaluation episode of env 0, for rendering: the env adapter (`VecEnv`), the
    states it acted on (a stacked pytree [T]: gymnax states, or Brax pipeline states), the
    rewards [T], its return and length (T)."""

    env: Any
    states: Any
    rewards: np.ndarray
    episode_return: float
    length: int


def record_episode(policy: Policy, key: jax.Array, greedy: bool = True,
                   num_envs: int = 1) -> Episode:
    """The first evaluation episode of `policy` with `key` in `num_envs` parallel envs (with
    a run's evaluation key and episode count: that evaluation's episode 0), its states kept
    (`jaxvaco.train.evaluate_episodes`)."""
    from jaxvaco.envs import make_env
    from jaxvaco.train import evaluate_episodes

    config = policy.config
    env = make_env(config.env, num_envs, brax_backend=config.brax_backend)
    brax = env.spec.family == "brax"

    def record(env_state, out):
        inner = jax.tree.map(lambda x: x[0], env_state.inner)
        return (inner.pipeline_state if brax else inner, out.reward[0],
                out.terminated[0] | out.truncated[0])

    stats = (init_running_stats(policy.spec.obs_shape) if policy.obs_stats is None
             else policy.obs_stats)
    rollout = jax.jit(lambda params, stats, key, greedy: evaluate_episodes(
        config, policy.network, env, params, stats, key, greedy, record))
    returns, (states, rewards, done) = rollout(policy.params, stats, key, greedy)
    done = np.asarray(done)
    length = int(np.argmax(done)) + 1 if done.any() else len(done)
    states = jax.tree.map(lambda x: np.asarray(x[:length]), states)
    return Episode(env, states, np.asarray(rewards[:length]), float(returns[0]), length)
