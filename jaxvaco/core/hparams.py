"""Hyperparameters that change no array shape, held as pytree leaves.

Keeping them as arrays (not Python constants baked into the compiled program) means a
sweep over, say, the learning rate or VACO's δ can be `jax.vmap`ped like seeds: one XLA
program for the whole sweep (the idea rejax popularised). Structural choices (algorithm,
anchors, filter kind, network sizes, buffer length) stay static in `TrainConfig`. The
running algorithm's own traced options (`AlgorithmSpec.traced`) are the leaves of `algo`;
`jaxvaco.host.grid.hyperparams_from_config` reads all of them from a config.
"""

from __future__ import annotations

import jax.numpy as jnp
from flax import struct


@struct.dataclass
class Hyperparams:
    learning_rate: jnp.ndarray
    gamma: jnp.ndarray
    gae_lambda: jnp.ndarray
    clip_coef: jnp.ndarray
    ent_coef: jnp.ndarray
    vf_coef: jnp.ndarray
    max_grad_norm: jnp.ndarray
    reward_scale: jnp.ndarray
    algo: dict[str, jnp.ndarray]
    """The running algorithm's traced options by name (ρ̄ and c̄ of V-trace, VACO's δ, PPO-KL's
    target KL, ...)."""
    lag_delay: jnp.ndarray
    """K, the lag (int32): config.lag.max_delay unless a grid sets it, at most that value,
    which sizes the parameter ring buffer."""


SHARED = ("learning_rate", "gamma", "gae_lambda", "clip_coef", "ent_coef", "vf_coef",
          "max_grad_norm", "reward_scale")
"""The float leaves every algorithm has: `TrainConfig` fields of the same name."""
LAG = "lag_delay"
"""The leaf of the lag K (int32), and its name in a grid."""
