"""Policy lag (docs/concepts/spec.md §1.1, [ours]): one interface, the parameters the actors act
with.

A `LagModel` is a pair of pure functions, like optax's init/update:

    state = model.init(θ_0)
    behaviour = model.behaviour(state, θ_T, T, key, lag_delay)  # Behaviour(params, delays, state)

`behaviour.delays[g] = k` says that actor group g acts with θ_{T−k}, the learner's
parameters k iterations (k·E·M optimizer updates) before the current iteration T; k ≤ T,
so no group reaches back before θ_0. The trainer carries `state` in its loop and picks
the implementation once, when it is wired:

- `NO_LAG`: the actors act with θ_T itself (state None, delays [0]);
- `ring_buffer` (this module): a ring buffer of past parameters in one program, below;
- `replay` (this module): the same buffer, the delays read from a recorded schedule
  (an asynchronous run's `lag_schedule.csv`), indexed by T inside the program;
- `jaxvaco.core.distributed.delayed_sync`: each device's actors refresh their copy of the
  learner's parameters every S iterations.

The ring buffer holds B = capacity + 1 snapshots in the jitted loop's carry (its capacity:
the largest K it serves, `ring_capacity`), stacked on a
leading axis; at the start of iteration T the learner's θ_T is written to slot T mod B,
so slots hold θ_T, θ_{T−1}, ..., θ_{T−B+1}. Actor group g then acts with
θ_{T−d_g}, d_g = min(k_g(T), T): the clamp gives θ_0 early in training. Memory is
B × (parameter count), independent of the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Behaviour(NamedTuple):
    """What a lag model gives the actors in iteration T."""

    params: Any  # stacked per actor group [G, ...] (ring buffer), else one θ unstacked
    delays: jax.Array  # int32 [G] (or [1]): group g acts with θ_{T−delays[g]}
    state: Any  # the lag state to carry into iteration T + 1


class LagModel(NamedTuple):
    """Where the actors' parameters come from: `init(θ_0) -> state` and
    `behaviour(state, θ_T, T, key, lag_delay) -> Behaviour`, both pure.

    `lag_delay` is this run's K (`Hyperparams.lag_delay`, traced, so K can be vmapped),
    which the delay schedules read; `key` draws random delays. Implementations that need
    neither ignore them.
    """

    init: Callable[[Any], Any]
    behaviour: Callable[[Any, Any, jax.Array, jax.Array, jax.Array], Behaviour]


def _current(state, params, iteration, key, lag_delay) -> Behaviour:
    return Behaviour(params, jnp.zeros((1,), jnp.int32), None)


NO_LAG = LagModel(lambda params: None, _current)
"""β = π_T: the actors act with the learner's current parameters."""


def ring_capacity(lag_k: int, schedule: Any = None) -> int:
    """The largest delay a program's ring buffer serves: the lag K of the run (`--lag.max-delay`,
    the largest a grid over `lag_delay` may ask for), or a replayed schedule's largest."""
    recorded = 0 if schedule is None else int(np.max(schedule, initial=0))
    return max(lag_k, recorded)


def ring_buffer(capacity: int, mode: str, num_groups: int) -> LagModel:
    """G actor groups acting with θ_{T−k_g}, k_g from `sample_delays`, out of a ring buffer
    of capacity + 1 snapshots (`ring_capacity`: the largest K a run of this program can ask
    for)."""

    def behaviour(history, params, iteration, key, lag_delay):
        history = push(history, params, iteration)
        delays = sample_delays(key, mode, num_groups, lag_delay, iteration)
        return Behaviour(gather(history, iteration, delays), delays, history)

    return LagModel(lambda params: init_history(params, capacity), behaviour)


def replay(schedule: Any, capacity: int) -> LagModel:
    """One actor group acting with θ_{T−k(T)}, k(T) = schedule[T] (the delays a recorded run
    saw, int [num_iterations]), clamped at T, out of a ring buffer of capacity + 1
    snapshots (capacity ≥ max k). The schedule is a constant of the program, so seeds
    vmap over it and two replays are bit-identical."""
    table = jnp.asarray(schedule, jnp.int32)

    def behaviour(history, params, iteration, key, lag_delay):
        history = push(history, params, iteration)
        delays = replay_delays(table, iteration)
        return Behaviour(gather(history, iteration, delays), delays, history)

    return LagModel(lambda params: init_history(params, capacity), behaviour)


def replay_delays(table: jax.Array, iteration: jax.Array) -> jax.Array:
    """[min(table[T], T)]: the recorded delay of iteration T (T past the end: the last)."""
    delay = table[jnp.minimum(iteration, table.shape[0] - 1)]
    return jnp.minimum(delay, iteration)[None]


def init_history(params: Any, capacity: int) -> Any:
    """B = capacity + 1 copies of θ_0, stacked on a new leading axis."""
    return jax.tree.map(lambda p: jnp.broadcast_to(p, (capacity + 1,) + p.shape), params)


def buffer_size(history: Any) -> int:
    return jax.tree.leaves(history)[0].shape[0]


def push(history: Any, params: Any, iteration: jax.Array) -> Any:
    """Write θ_T into slot T mod B."""
    slot = iteration % buffer_size(history)
    return jax.tree.map(lambda h, p: h.at[slot].set(p), history, params)


def gather(history: Any, iteration: jax.Array, delays: jax.Array) -> Any:
    """Parameters θ_{T−d_g} for each group, stacked on a leading axis [G]."""
    slots = (iteration - delays) % buffer_size(history)
    return jax.tree.map(lambda h: h[slots], history)


def sample_delays(
    key: jax.Array, mode: str, num_groups: int, lag_delay: jax.Array, iteration: jax.Array
) -> jax.Array:
    """k_g(T) for each group, clamped at T (so θ_{T−k} never precedes θ_0). int32 [G].
    K is `lag_delay`, the run's lag.

    fixed:   k_g = K
    uniform: k_g ~ U{0, ..., K}, fresh for each group and iteration
    spread:  k_g = round(g·K / (G − 1))
    """
    groups = jnp.arange(num_groups)
    if mode == "fixed":
        delays = jnp.full((num_groups,), lag_delay)
    elif mode == "uniform":
        delays = jax.random.randint(key, (num_groups,), 0, lag_delay + 1)
    elif mode == "spread":
        delays = jnp.round(groups * lag_delay / max(num_groups - 1, 1))
    else:
        raise ValueError(f"unknown lag mode {mode!r}")
    return jnp.minimum(delays.astype(jnp.int32), iteration)
