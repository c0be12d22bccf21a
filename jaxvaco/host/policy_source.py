"""Where a policy comes from: a run directory (its runs and checkpoints) or an exported
policy (its manifest), read without the training state.

`open_source(path)` tells them apart; `select_run` and `choose_checkpoint` pick one run and
one checkpoint, naming the choices when the one asked for does not exist;
`restore_checkpoint` reads only the parameters and observation statistics of every run.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxvaco.core.config import ConfigError, RunFileError, TrainConfig, from_dict
from jaxvaco.core.envs.base import EnvSpec
from jaxvaco.core.networks import ActorCritic
from jaxvaco.core.normalize import RunningMeanStd
from jaxvaco.host.run_dir import load_run_dir
from jaxvaco.host.run_folder import ExportFolder, RunFolder, SweepFolder, read_json

FORMAT = "jaxvaco-policy"
FORMAT_VERSION = 1

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


def open_source(path: str | Path) -> Source:
    """The run directory or exported policy at `path` (ConfigError when it is neither)."""
    path = Path(path)
    if not path.is_dir():
        raise ConfigError(f"{path} is not a folder: pass a run directory (results/<run>) or "
                          "a policy exported by jaxvaco export.")
    export, folder = ExportFolder(path), RunFolder(path)
    if export.manifest.is_file():
        manifest = read_manifest(path)
        config = from_dict(manifest["config"], source=str(export.manifest))
        step = manifest["source"].get("checkpoint")
        return Source(path, "export", config, [dict(manifest["labels"])],
                      [] if step is None else [int(step)], manifest)
    if not folder.config.is_file():
        sweep = (" It is a sweep: pass one of its runs (a folder under it with a "
                 f"{folder.CONFIG}).") if SweepFolder(path).spec.exists() else ""
        raise ConfigError(f"{path} is not a jaxvaco run directory or exported policy (it has "
                          f"no {folder.CONFIG} or {export.MANIFEST}).{sweep}")
    config, grid = load_run_dir(path)
    runs = folder.read_runs().get("runs")
    if not isinstance(runs, list) or not all(isinstance(r, dict) and "seed" in r for r in runs):
        from jaxvaco.host.grid import expand_runs

        runs = expand_runs(config, grid)[0]
    return Source(path, "run", config, runs, folder.checkpoint_steps())


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

    from jaxvaco.host.checkpoint import damaged_files

    step_dir = (RunFolder(source.path).checkpoints / str(step)).absolute()
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
                               f"the network of {RunFolder(source.path).config} "
                               f"({spec.name}, hidden sizes {source.config.hidden_sizes}, "
                               f"{len(source.runs)} runs in {RunFolder.RUNS}): "
                               f"{RunFolder.CONFIG} or {RunFolder.RUNS} was edited, or the "
                               "checkpoint is another run's.")
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
    file = ExportFolder(path).manifest
    manifest = read_json(file)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise RunFileError(f"{file} is not a jaxvaco policy manifest (no "
                           f"\"format\": \"{FORMAT}\").")
    if manifest.get("format_version", 0) > FORMAT_VERSION:
        raise RunFileError(f"{file} has format version "
                           f"{manifest['format_version']}, newer than this jaxvaco reads "
                           f"({FORMAT_VERSION}): upgrade jaxvaco.")
    missing = [k for k in ("config", "network", "labels", "source", "env")
               if k not in manifest]
    if missing:
        raise RunFileError(f"{file} lacks {', '.join(missing)}: export the policy "
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
