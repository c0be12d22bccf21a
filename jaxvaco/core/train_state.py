"""What the training loop carries from iteration to iteration (`TrainState`) and what
every stage reads (`Setup`, static). The stages live in `jaxvaco.core.rollout` (lag, collect),
`jaxvaco.core.learner` (learner view, estimate, update) and `jaxvaco.core.evaluation`;
`jaxvaco.core.train` composes them."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from jaxvaco.core.algos import Algorithm
from jaxvaco.core.config import TrainConfig
from jaxvaco.core.envs import VecEnv
from jaxvaco.core.envs.base import VecEnvState
from jaxvaco.core.lag import LagModel
from jaxvaco.core.networks import ActorCritic
from jaxvaco.core.normalize import RunningMeanStd


@struct.dataclass
class TrainState:
    params: Any
    opt_state: Any
    obs: jax.Array  # [N, *obs_shape] raw observations to act on next
    env_state: VecEnvState
    obs_stats: RunningMeanStd
    lag: Any  # `Setup.lag`'s state: ring buffer [B, ...], actor copies [D, ...], or None
    algo_state: dict
    key: jax.Array
    iteration: jax.Array  # int32: learner iterations done so far (T)


class Setup(NamedTuple):
    """What every stage reads: the config and the objects built from it (static)."""

    config: TrainConfig
    env: VecEnv  # this device's N/D envs
    network: ActorCritic
    algorithm: Algorithm
    lag: LagModel  # where the actors' parameters come from (`jaxvaco.core.rollout.lag_model`)
    axis: str | None  # mesh axis of env-sharded learners; None on one device
    mb_axis: str | None  # the axis a minibatch is spread over ("global" shuffle), or None

    @property
    def lagged(self) -> bool:
        return self.config.lag.max_delay > 0 or self.config.lag.mode == "replay"

    @property
    def num_groups(self) -> int:
        return self.config.lag.num_groups if self.lagged else 1

    @property
    def stale(self) -> bool:
        """β may differ from π_T: ring-buffer lag, delayed device sync or asynchronous
        actors."""
        return (self.lagged or self.config.asynchronous.enabled
                or bool(self.axis and self.config.distributed.sync_interval > 1))

    @property
    def metric_envs(self) -> jax.Array:
        """The env subsample the TV metrics are computed on (one env per minibatch)."""
        return jnp.arange(0, self.env.num_envs, self.config.num_minibatches)
