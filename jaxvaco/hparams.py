"""Hyperparameters that change no array shape, held as pytree leaves.

Keeping them as arrays (not Python constants baked into the compiled program) means a
sweep over, say, the learning rate or VACO's δ can be `jax.vmap`ped like seeds: one XLA
program for the whole sweep (the idea rejax popularised). Structural choices (algorithm,
anchors, filter kind, network sizes, buffer length) stay static in `TrainConfig`.
"""

from __future__ import annotations

import jax.numpy as jnp
from flax import struct

from jaxvaco.config import TrainConfig, with_tuned_defaults


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
    rho_bar: jnp.ndarray
    """ρ̄ of the running algorithm's V-trace (and of decoupled PPO's weight)."""
    c_bar: jnp.ndarray
    delta: jnp.ndarray
    """VACO's TV threshold δ."""
    target_kl: jnp.ndarray
    lag_delay: jnp.ndarray
    """K, the lag (int32): config.lag.max_delay unless a grid sets it, at most that value,
    which sizes the parameter ring buffer."""


def hyperparams_from_config(config: TrainConfig) -> Hyperparams:
    """Scalar leaves for one run, read from the config (shared options left at None: the
    algorithm's tuned values)."""
    config = with_tuned_defaults(config)
    options = getattr(config, config.algo)  # every algorithm's group holds its ρ̄ and c̄
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return Hyperparams(
        learning_rate=f32(config.learning_rate),
        gamma=f32(config.gamma),
        gae_lambda=f32(config.gae_lambda),
        clip_coef=f32(config.clip_coef),
        ent_coef=f32(config.ent_coef),
        vf_coef=f32(config.vf_coef),
        max_grad_norm=f32(config.max_grad_norm),
        reward_scale=f32(config.reward_scale),
        rho_bar=f32(options.rho_bar),
        c_bar=f32(options.c_bar),
        delta=f32(config.vaco.delta),
        target_kl=f32(config.ppo_kl.target_kl),
        lag_delay=jnp.asarray(config.lag.max_delay, jnp.int32),
    )
