"""The jitted training loop, as stages: `make_train(config)` wires them into pure functions.

One learner iteration (spec §1.1) is the composition of module-level stages, each a pure
function of one static `Setup` record and arrays:

    behaviour  = select_behaviour(setup, state, hp, key)   # setup.lag: ring buffer | sync | θ_T
    traj       = collect(setup, state, behaviour.params, key)
    view       = learner_view(setup, state.params, traj)   # π_T, V_T where needed
    batch      = estimate(setup, traj, behaviour.params, view, hp)   # critic × estimator
    params,opt = update(setup, state, batch, hp, key)      # E × M minibatches
    metrics    = iteration_metrics(setup, traj, view, params, behaviour.delays, ...)

`train_chunk(state, hp, n)` runs n iterations as one XLA program (a `fori_loop` with a
traced trip count, so every chunk length shares one compilation) and returns summed
metrics; the host loop in `jaxvaco.runner` owns progress, logging and stopping. Seeds
are a `jax.vmap` over `init` and `train_chunk`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxvaco import distributed, lag
from jaxvaco.algos import Algorithm, Batch, make_algorithm
from jaxvaco.algos.common import total_loss
from jaxvaco.config import TrainConfig
from jaxvaco.envs import VecEnv, make_env
from jaxvaco.envs.base import EnvSpec, VecEnvState
from jaxvaco.estimators import Targets, gae, vtrace
from jaxvaco.hparams import Hyperparams
from jaxvaco.lag import Behaviour, LagModel
from jaxvaco.networks import ActorCritic, greedy_action, make_network
from jaxvaco.normalize import (
    RunningMeanStd,
    init_running_stats,
    normalize_obs,
    update_running_stats,
)
from jaxvaco.primitives import (
    half_abs_deviation,
    shuffled_minibatches,
    truncated_importance_weight,
)
from jaxvaco.validation import validate


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


class Rollout(NamedTuple):
    """Per-step collection output, [T, N] after the scan."""

    obs: jax.Array
    raw_obs: jax.Array
    actions: jax.Array
    logp: jax.Array
    values: jax.Array
    rewards: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array
    completed_return: jax.Array
    completed_length: jax.Array


class Trainer(NamedTuple):
    config: TrainConfig
    spec: EnvSpec
    network: ActorCritic
    algorithm: Algorithm
    init: Callable[[jax.Array, Hyperparams], TrainState]
    train_chunk: Callable[[TrainState, Hyperparams, jax.Array], tuple[TrainState, dict]]
    evaluate: Callable[[TrainState, jax.Array, bool], jax.Array]


def make_optimizer(hp: Hyperparams) -> optax.GradientTransformation:
    """Global-norm clipping then Adam; the (annealed) learning rate is applied by the caller."""
    return optax.chain(optax.clip_by_global_norm(hp.max_grad_norm), optax.scale_by_adam(eps=1e-5))


def learning_rate(config: TrainConfig, hp: Hyperparams, iteration: jax.Array) -> jax.Array:
    """lr·(1 − T/num_iterations) when annealing, else lr."""
    if not config.anneal_lr:
        return hp.learning_rate
    return hp.learning_rate * (1.0 - iteration / config.num_iterations)


def split_groups(x: jax.Array, num_groups: int) -> jax.Array:
    """[N, ...] -> [G, N/G, ...] (groups are contiguous blocks of envs)."""
    return x.reshape((num_groups, x.shape[0] // num_groups) + x.shape[1:])


def merge_groups(x: jax.Array) -> jax.Array:
    return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])


def per_group(fn: Callable, grouped: bool, num_groups: int) -> Callable:
    """fn(params, x, *rest) with params stacked per group [G, ...] and x split into groups.

    `rest` must already carry the group axis. Without lag the learner's params are used
    directly (no group axis), which keeps K = 0 numerically identical to synchronous training.
    """
    if not grouped:
        return fn

    def apply(params, x, *rest):
        out = jax.vmap(fn)(params, split_groups(x, num_groups), *rest)
        return jax.tree.map(merge_groups, out)

    return apply


def mean_tv(logp_a: jax.Array, logp_b: jax.Array) -> jax.Array:
    """Sample estimate of TV(a, b): mean ½·|a/b − 1| over actions drawn from b."""
    return half_abs_deviation(logp_a - logp_b).mean()


class Setup(NamedTuple):
    """What every stage reads: the config and the objects built from it (static)."""

    config: TrainConfig
    env: VecEnv  # this device's N/D envs
    network: ActorCritic
    algorithm: Algorithm
    lag: LagModel  # where the actors' parameters come from (`lag_model`)
    axis: str | None  # mesh axis of env-sharded learners; None on one device
    mb_axis: str | None  # the axis a minibatch is spread over ("global" shuffle), or None

    @property
    def lagged(self) -> bool:
        return self.config.lag.max_delay > 0

    @property
    def num_groups(self) -> int:
        return self.config.lag.num_groups if self.lagged else 1

    @property
    def stale(self) -> bool:
        """β may differ from π_T: ring-buffer lag or delayed device sync."""
        return self.lagged or bool(self.axis and self.config.distributed.sync_interval > 1)

    @property
    def metric_envs(self) -> jax.Array:
        """The env subsample the TV metrics are computed on (one env per minibatch)."""
        return jnp.arange(0, self.env.num_envs, self.config.num_minibatches)


class LearnerView(NamedTuple):
    """The learner's π_T and V_T on the batch where the algorithm reads them (else None)."""

    logp: jax.Array  # log π_T(a|s) [T, N]; the recorded log β when π_T is not needed
    values: jax.Array | None  # V_T(s)
    next_values: jax.Array | None  # V_T(s')
    metric_logp: jax.Array  # log π_T(a|s) on `Setup.metric_envs`, for the TV metrics


def lag_model(config: TrainConfig, axis: str | None) -> LagModel:
    """The lag implementation of this config, chosen once: the ring buffer (`--lag.*`),
    delayed sync of the devices' actors (`--distributed.*` over envs), or none."""
    if config.lag.max_delay > 0:
        return lag.ring_buffer(config.lag.max_delay, config.lag.mode, config.lag.num_groups)
    if axis:
        return distributed.delayed_sync(config.distributed, axis)
    return lag.NO_LAG


def select_behaviour(setup: Setup, state: TrainState, hp: Hyperparams,
                     key: jax.Array) -> Behaviour:
    """Lag stage: the actors' θ_{T−k_g} and k_g from `setup.lag`, and its next state."""
    return setup.lag.behaviour(state.lag, state.params, state.iteration, key, hp.lag_delay)


def act(network: ActorCritic, params: Any, obs: jax.Array, key: jax.Array):
    """One env: a ~ π(·|s) drawn with the env's own key, log π(a|s), V(s)."""
    pi, value = network.apply(params, obs[None])
    action = pi.sample(seed=key)
    return action[0], pi.log_prob(action)[0], value[0]


def behaviour_act(setup: Setup, params: Any, obs: jax.Array, keys: jax.Array):
    """Actions, log β and V_β for [N] envs, each actor group with its own parameters."""
    policy_step = jax.vmap(functools.partial(act, setup.network), in_axes=(None, 0, 0))
    if not setup.lagged:
        return policy_step(params, obs, keys)
    return per_group(policy_step, True, setup.num_groups)(
        params, obs, split_groups(keys, setup.num_groups))


def maybe_normalize(config: TrainConfig, stats: RunningMeanStd, obs: jax.Array) -> jax.Array:
    return normalize_obs(stats, obs) if config.normalize_obs else obs


def collect(setup: Setup, state: TrainState, behaviour_params: Any, key: jax.Array):
    """Rollout stage: `lax.scan` over L steps of the vmapped envs; log β(a|s) recorded.

    Returns the next observations, env state and the [L, N] `Rollout`."""
    config = setup.config
    normalize = functools.partial(maybe_normalize, config, state.obs_stats)

    def step(carry, step_key):
        obs, env_state = carry
        k_act, k_env = (distributed.env_keys(k, config.num_envs, setup.axis)
                        for k in jax.random.split(step_key))
        norm_obs = normalize(obs)
        action, logp, value = behaviour_act(setup, behaviour_params, norm_obs, k_act)
        env_state, out = setup.env.step_envs(k_env, env_state, action)
        record = Rollout(norm_obs, obs if config.normalize_obs else None, action, logp,
                         value, out.reward, out.terminated, out.truncated,
                         normalize(out.final_obs), out.completed_return, out.completed_length)
        return (out.obs, env_state), record

    keys = jax.random.split(key, config.num_steps)
    (obs, env_state), traj = jax.lax.scan(step, (state.obs, state.env_state), keys)
    return obs, env_state, traj


def learner_view(setup: Setup, params: Any, traj: Rollout) -> LearnerView:
    """log π_T(a|s), V_T(s), V_T(s') over the batch where the algorithm reads them.

    Otherwise log π_T is only needed for the TV metrics, on the subsample `metric_envs`,
    and without lag or device sync lag it is the recorded log β exactly (β = π_T).
    """
    network, envs = setup.network, setup.metric_envs
    if setup.algorithm.needs_learner_batch:
        pi, values = network.apply(params, traj.obs)
        next_values = network.apply(params, traj.final_obs, method="value")
        logp = pi.log_prob(traj.actions)
        return LearnerView(logp, values, next_values, logp[:, envs])
    if not setup.stale:
        return LearnerView(traj.logp, None, None, traj.logp[:, envs])
    pi, _ = network.apply(params, traj.obs[:, envs])
    return LearnerView(traj.logp, None, None, pi.log_prob(traj.actions[:, envs]))


def estimate(setup: Setup, traj: Rollout, behaviour_params: Any, view: LearnerView,
             hp: Hyperparams) -> Batch:
    """The per-iteration advantages, value targets and policy-gradient weights: the
    algorithm's critic × estimator, with ρ_t = min(ρ̄, π_T/β) applied once
    (`Algorithm.importance_weight`). Rewards are scaled here, once, for learning."""
    algorithm = setup.algorithm
    rewards = traj.rewards * hp.reward_scale
    if algorithm.critic == "learner":
        values, next_values = view.values, view.next_values
    else:
        values_fn = lambda p, o: setup.network.apply(p, o, method="value")  # noqa: E731
        next_values = per_group(values_fn, setup.lagged, setup.num_groups)(
            behaviour_params, traj.final_obs)
        values = traj.values
    placement = algorithm.importance_weight
    targets = critic_estimate(algorithm.estimator, rewards, values, next_values, traj,
                              view.logp - traj.logp, hp, weighted=placement == "inside")
    pg_weights = (truncated_importance_weight(view.logp - traj.logp, hp.rho_bar)
                  if placement == "after_normalization" else None)
    return Batch(traj.obs, traj.actions, traj.logp, values, next_values, rewards,
                 traj.terminated, traj.truncated, traj.final_obs, view.logp,
                 targets.advantages, targets.targets, pg_weights)


def critic_estimate(estimator: str, rewards: jax.Array, values: jax.Array,
                    next_values: jax.Array, traj: Rollout, log_ratio: jax.Array,
                    hp: Hyperparams, weighted: bool) -> Targets:
    """GAE, or V-trace with log_ratio = log π_T − log β (ρ_t inside Â only if `weighted`)."""
    ends = (traj.terminated, traj.truncated)
    if estimator == "gae":
        return gae(rewards, values, next_values, *ends, hp.gamma, hp.gae_lambda)
    return vtrace(rewards, values, next_values, *ends, log_ratio, hp.gamma, hp.gae_lambda,
                  hp.rho_bar, hp.c_bar, weight_advantages=weighted)


def sgd_step(setup: Setup, carry, mb: Batch, hp: Hyperparams, algo_state: dict,
             lr: jax.Array):
    """One minibatch: gradient (averaged over the devices), clipped Adam step."""
    params, opt_state = carry
    grads, metrics = jax.grad(total_loss, has_aux=True)(
        params, setup.network.apply, mb, hp, algo_state, setup.algorithm,
        setup.config.norm_adv, distributed.minibatch_mean(setup.mb_axis))
    grads = distributed.mean(grads, setup.axis)
    updates, opt_state = make_optimizer(hp).update(grads, opt_state, params)
    updates = jax.tree.map(lambda u: -lr * u, updates)
    metrics["grad_norm"] = optax.global_norm(grads)
    return (optax.apply_updates(params, updates), opt_state), metrics


def update(setup: Setup, state: TrainState, batch: Batch, hp: Hyperparams, key: jax.Array):
    """E epochs × M minibatches. With the "global" shuffle the devices gather the batch,
    shuffle all N envs alike and each trains on its 1/D slice of every minibatch."""
    config, mb_axis = setup.config, setup.mb_axis
    lr = learning_rate(config, hp, state.iteration)
    if mb_axis:
        batch = jax.tree.map(lambda x: distributed.gather_envs(x, mb_axis), batch)

    def epoch(carry, epoch_key):
        mbs = shuffled_minibatches(batch, epoch_key, config.num_minibatches, axis=1)
        mbs = jax.tree.map(lambda x: distributed.local_part(x, mb_axis, dim=2), mbs)
        return jax.lax.scan(lambda c, mb: sgd_step(setup, c, mb, hp, state.algo_state, lr),
                            carry, mbs)

    shuffle_key = key if mb_axis else distributed.device_key(key, setup.axis)
    keys = jax.random.split(shuffle_key, config.update_epochs)
    (params, opt_state), metrics = jax.lax.scan(epoch, (state.params, state.opt_state), keys)
    return params, opt_state, jax.tree.map(jnp.mean, metrics)


def iteration_metrics(setup: Setup, traj: Rollout, view: LearnerView, params: Any,
                      delays: jax.Array, lr: jax.Array) -> dict:
    """Lag (spec §1.2), TV backward / forward / total on the subsample, episode sums."""
    config, envs = setup.config, setup.metric_envs
    pi_final, _ = setup.network.apply(params, traj.obs[:, envs])
    final_logp = pi_final.log_prob(traj.actions[:, envs])
    behaviour_logp = traj.logp[:, envs]
    mean_delay = delays.mean()
    updates = config.updates_per_iteration
    return {
        "lag/iterations": mean_delay,
        "lag/sgd_steps": mean_delay * updates + (updates - 1) / 2,
        "tv/backward": mean_tv(view.metric_logp, behaviour_logp),
        "tv/forward": mean_tv(final_logp, view.metric_logp),
        "tv/total": mean_tv(final_logp, behaviour_logp),
        "episode/return_sum": traj.completed_return.sum(),
        "episode/length_sum": traj.completed_length.sum().astype(jnp.float32),
        "episode/count": (traj.terminated | traj.truncated).sum().astype(jnp.float32),
        "learning_rate": lr,
    }


def iteration(setup: Setup, state: TrainState, hp: Hyperparams) -> tuple[TrainState, dict]:
    """One learner iteration: the stages above, composed."""
    key, k_delay, k_roll, k_update = jax.random.split(state.key, 4)
    behaviour = select_behaviour(setup, state, hp, k_delay)
    obs, env_state, traj = collect(setup, state, behaviour.params, k_roll)
    view = learner_view(setup, state.params, traj)
    batch = estimate(setup, traj, behaviour.params, view, hp)
    params, opt_state, metrics = update(setup, state, batch, hp, k_update)
    metrics.update(iteration_metrics(setup, traj, view, params, behaviour.delays,
                                     learning_rate(setup.config, hp, state.iteration)))
    metrics = distributed.reduce_metrics(metrics, setup.axis)
    obs_stats = state.obs_stats
    if setup.config.normalize_obs:
        obs_stats = update_running_stats(obs_stats,
                                         distributed.gather_envs(traj.raw_obs, setup.axis))
    new_state = state.replace(
        params=params, opt_state=opt_state, obs=obs, env_state=env_state,
        obs_stats=obs_stats, lag=behaviour.state, key=key,
        algo_state=setup.algorithm.update_state(state.algo_state, metrics, hp),
        iteration=state.iteration + 1)
    return new_state, metrics


def train_chunk(setup: Setup, state: TrainState, hp: Hyperparams, num_iterations: jax.Array):
    """Run num_iterations iterations; return the new state and metrics summed over them.

    `iteration` is traced once: as a nested jit, the trace `eval_shape` makes for the
    metrics' structure is the one the loop body reuses (XLA inlines the call)."""
    step = jax.jit(functools.partial(iteration, setup))
    zeros = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), jax.eval_shape(step, state, hp)[1])

    def body(_, carry):
        state, sums = carry
        state, metrics = step(state, hp)
        return state, jax.tree.map(jnp.add, sums, metrics)

    return jax.lax.fori_loop(0, num_iterations, body, (state, zeros))


def init_state(setup: Setup, init_env: VecEnv, key: jax.Array, hp: Hyperparams) -> TrainState:
    """θ_0, the optimizer, the envs reset (all N of them), the lag state."""
    k_params, k_env, key = jax.random.split(key, 3)
    obs, env_state = init_env.reset(k_env)
    params = setup.network.init(k_params, obs[:1])
    return TrainState(
        params=params,
        opt_state=make_optimizer(hp).init(params),
        obs=obs,
        env_state=env_state,
        obs_stats=init_running_stats(init_env.spec.obs_shape),
        lag=setup.lag.init(params),
        algo_state=setup.algorithm.init_state(hp),
        key=key,
        iteration=jnp.zeros((), jnp.int32),
    )


def evaluate(setup: Setup, eval_env: VecEnv, state: TrainState, key: jax.Array,
             greedy: bool | jax.Array) -> jax.Array:
    """Return of the first episode in each of `eval.num_episodes` parallel envs.

    `greedy` may be traced: one compiled program serves both modes (the same keys)."""
    return evaluate_episodes(setup.config, setup.network, eval_env, state.params,
                             state.obs_stats, key, greedy)[0]


def evaluate_episodes(config: TrainConfig, network: ActorCritic, eval_env: VecEnv, params: Any,
                      obs_stats: RunningMeanStd, key: jax.Array, greedy: bool | jax.Array,
                      record: Callable[[VecEnvState, Any], Any] | None = None
                      ) -> tuple[jax.Array, Any]:
    """`evaluate` for any parameters: the return of the first episode in each of
    `eval_env.num_envs` parallel envs, and `record(env_state, step_result)` of every step
    (stacked; None without `record`), e.g. env 0's states to render the episode
    (`jaxvaco.policy.record_episode`). The env state is the one the step acted on."""
    k_reset, k_run = jax.random.split(key)
    obs, env_state = eval_env.reset(k_reset)

    def step(carry, step_key):
        obs, env_state, returns, finished = carry
        k_act, k_env = jax.random.split(step_key)
        pi, _ = network.apply(params, maybe_normalize(config, obs_stats, obs))
        action = jnp.where(greedy, greedy_action(pi), pi.sample(seed=k_act))
        next_state, out = eval_env.step(k_env, env_state, action)
        returns = returns + jnp.where(finished, 0.0, out.reward)
        finished = finished | out.terminated | out.truncated
        kept = None if record is None else record(env_state, out)
        return (out.obs, next_state, returns, finished), kept

    zeros = jnp.zeros(eval_env.num_envs)
    carry = (obs, env_state, zeros, zeros.astype(bool))
    keys = jax.random.split(k_run, eval_env.spec.max_episode_steps)
    (_, _, returns, _), recorded = jax.lax.scan(step, carry, keys)
    return returns, recorded


def make_train(config: TrainConfig, layout: distributed.Layout | None = None) -> Trainer:
    """Build env, network, algorithm and wire the stages into the pure functions of one run
    (shared options left at None take the algorithm's tuned values, `config.TUNED`).
    `layout`: the run's `distributed.layout(config)`, when the caller has decided it."""
    config = validate(config)
    layout = distributed.layout(config) if layout is None else layout
    axis = layout.env_axis  # None on one device: every collective is the identity
    devices = config.distributed.num_devices if axis else 1
    make = functools.partial(make_env, config.env, brax_backend=config.brax_backend)
    env: VecEnv = make(config.num_envs // devices)
    network = make_network(env.spec, config.hidden_sizes, config.activation)
    setup = Setup(config, env, network, make_algorithm(config), lag_model(config, axis), axis,
                  layout.minibatch_axis)
    chunk = functools.partial(train_chunk, setup)
    if axis:
        chunk = distributed.shard_envs(chunk, layout.mesh)
    return Trainer(
        config, env.spec, network, setup.algorithm,
        init=functools.partial(init_state, setup, make(config.num_envs) if axis else env),
        train_chunk=chunk,
        evaluate=functools.partial(evaluate, setup, make(config.eval.num_episodes)),
    )
