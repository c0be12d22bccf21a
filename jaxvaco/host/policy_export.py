"""Export a policy: its parameters and a manifest, in a folder that `load_policy` reads
without the training state (`jaxvaco export`)."""

from __future__ import annotations

import dataclasses
import hashlib
from importlib.metadata import version
from pathlib import Path

import jax
import numpy as np

from jaxvaco.core.config import ConfigError
from jaxvaco.host.policy import Policy
from jaxvaco.host.policy_source import FORMAT, FORMAT_VERSION
from jaxvaco.host.run_folder import ExportFolder, write_json


def export_policy(policy: Policy, out: str | Path) -> Path:
    """Write `policy` to the folder `out` (created; an earlier export there is replaced):
    params.msgpack (flax's msgpack serialisation of the network's variables) and
    manifest.json, written last. `load_policy(out)` reads it back."""
    from flax import serialization

    out = Path(out)
    folder = ExportFolder(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file: give a folder to export into.")
    if out.is_dir() and any(out.iterdir()) and not folder.manifest.is_file():
        raise ConfigError(f"--out {out} is not empty and holds no exported policy: give a "
                          "new or empty folder.")
    out.mkdir(parents=True, exist_ok=True)
    data = serialization.msgpack_serialize(jax.tree.map(np.asarray, policy.params))
    tmp = folder.params.with_name(folder.PARAMS + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(folder.params)
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
        "jaxvaco_version": version("jaxvaco"),
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
        "params_file": folder.PARAMS,
        "params_sha256": hashlib.sha256(data).hexdigest(),
        "config": dataclasses.asdict(config),
    }
    write_json(folder.manifest, manifest)
    return out
