"""Will a run fit: the bytes its largest arrays take, against the memory there is.

`validate_memory(config, num_runs)` raises `ConfigError` before anything is compiled when
the lag ring buffer, the learner and the batch of every run alone exceed the memory of
the accelerator (or the host's available memory on CPU).
"""

from __future__ import annotations

import math
from pathlib import Path

from jaxvaco.core.config import ConfigError, TrainConfig


def parameter_count(config: TrainConfig) -> int:
    """Parameters of the actor-critic (`jaxvaco.core.networks.ActorCritic`): two MLPs with
    widths hidden_sizes, an action head and a value head, and log σ for continuous actions."""
    from jaxvaco.core.envs import env_spec

    spec = env_spec(config.env, brax_backend=config.brax_backend)
    inputs = math.prod(spec.obs_shape)

    def mlp(out: int) -> int:
        widths = [inputs, *config.hidden_sizes, out]
        return sum((a + 1) * b for a, b in zip(widths, widths[1:], strict=False))

    return mlp(spec.num_actions) + mlp(1) + (0 if spec.discrete else spec.num_actions)


def memory_estimate(config: TrainConfig, num_runs: int) -> dict[str, int]:
    """Bytes the largest arrays of a run take, a lower bound on what it needs:
    the lag ring buffer, (max_delay + 1) float32 copies of the parameters per run, and the
    parameters with Adam's two moments; the batch, num_envs × num_steps observations and
    about 8 float32 per step (reward, value, log β, ...) per run. A run's total also has
    XLA's temporaries and the environments' states on top."""
    from jaxvaco.core.envs import env_spec

    params = parameter_count(config)
    obs = math.prod(env_spec(config.env, brax_backend=config.brax_backend).obs_shape)
    ring = (config.lag.max_delay + 1 if config.lag.max_delay else 0) * params * 4
    learner = 3 * params * 4
    batch = config.num_envs * config.num_steps * (obs + 8) * 4
    return {"ring buffer": ring * num_runs, "learner": learner * num_runs,
            "batch": batch * num_runs}


def available_memory() -> tuple[int, str] | None:
    """(bytes, what) the arrays of a run can use: the accelerator's memory, else the host's
    available memory (/proc/meminfo); None when unknown."""
    import jax

    device = jax.devices()[0]
    if device.platform != "cpu":
        limit = (device.memory_stats() or {}).get("bytes_limit")
        return (int(limit), f"the {device.device_kind}'s memory") if limit else None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024, "this machine's available memory"
    except (OSError, ValueError, IndexError):
        return None
    return None


def validate_memory(config: TrainConfig, num_runs: int) -> None:
    """ConfigError, with the figures, when the largest arrays alone exceed the memory there
    is (`memory_estimate` against `available_memory`)."""
    have = available_memory()
    if have is None:
        return
    parts = memory_estimate(config, num_runs)
    need = sum(parts.values())
    if need <= have[0]:
        return
    detail = ", ".join(f"{name} {size / 1e9:.1f} GB" for name, size in parts.items() if size)
    raise ConfigError(f"this run needs at least {need / 1e9:.1f} GB ({detail}; {num_runs} "
                      f"run(s)), more than {have[1]} ({have[0] / 1e9:.1f} GB). Lower "
                      "--lag.max-delay, --num-envs × --num-steps, or the number of runs "
                      "(--num-seeds, the grid).")
