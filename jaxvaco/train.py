"""The jitted training loop: `make_train(config)` returns pure functions.

One learner iteration (spec §1.1):

1. behaviour parameters per actor group from the lag ring buffer (θ_T when K = 0);
2. rollout: `lax.scan` over L steps of the vmapped environments, log β(a|s) recorded;
3. estimate: V(final obs) with the behaviour critic, the learner's π_T / V_T where the
   algorithm needs them, then GAE or V-trace (the per-iteration "align" step);
4. update: E epochs × M minibatches of whole trajectories [L, N/M];
5. metrics: returns, losses, lag and TV (spec §1.2).

`train_chunk(state, hp, n)` runs n iterations as one XLA program (a `fori_loop` with a
traced trip count, so every chunk length shares one compilation) and returns summed
metrics; the host loop in `jaxvaco.runner` owns progress, logging and stopping. Seeds
are a `jax.vmap` over `init` and `train_chunk`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxvaco import distributed, lag
from jaxvaco.algos import Algorithm, Batch, make_algorithm
from jaxvaco.algos.common import half_abs_deviation, total_loss
from jaxvaco.config import TrainConfig, validate
from jaxvaco.envs import VecEnv, make_env
from jaxvaco.envs.base import EnvSpec, VecEnvState
from jaxvaco.estimators import gae, vtrace
from jaxvaco.hparams import Hyperparams
from jaxvaco.networks import ActorCritic, greedy_action, make_network
from jaxvaco.normalize import (
    RunningMeanStd,
    init_running_stats,
    normalize_obs,
    update_running_stats,
)


@struct.dataclass
class TrainState:
    params: Any
    opt_state: Any
    obs: jax.Array  # [N, *obs_shape] raw observations to act on next
    env_state: VecEnvState
    obs_stats: RunningMeanStd
    history: Any  # ring buffer of past params [B, ...]; None without lag
    algo_state: dict
    key: jax.Array
    iteration: jax.Array  # int32: learner iterations done so far (T)
    actors: Any = None  # per-device actor copies [D, ...] (jaxvaco.distributed); else None


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


def minibatches(batch: Batch, key: jax.Array, num_minibatches: int) -> Batch:
    """Shuffle envs and split into [M, T, N/M, ...]: whole trajectories stay together."""
    num_envs = batch.rewards.shape[1]
    perm = jax.random.permutation(key, num_envs)

    def split(x):
        x = jnp.take(x, perm, axis=1)
        x = x.reshape((x.shape[0], num_minibatches, num_envs // num_minibatches) + x.shape[2:])
        return jnp.swapaxes(x, 0, 1)

    return jax.tree.map(split, batch)


def mean_tv(logp_a: jax.Array, logp_b: jax.Array) -> jax.Array:
    """Sample estimate of TV(a, b): mean ½·|a/b − 1| over actions drawn from b."""
    return half_abs_deviation(logp_a - logp_b).mean()


def make_train(config: TrainConfig) -> Trainer:
    """Build env, network, algorithm and the pure functions of one run (one seed)."""
    validate(config)
    axis = distributed.env_axis(config)  # None on one device: every hook below is the identity
    mb_axis = distributed.minibatch_axis(config)
    devices = config.distributed.num_devices if axis else 1
    local_envs = config.num_envs // devices
    env: VecEnv = make_env(config.env, local_envs, brax_backend=config.brax_backend)
    init_env = make_env(config.env, config.num_envs, brax_backend=config.brax_backend) if axis \
        else env
    spec = env.spec
    network = make_network(spec, config.hidden_sizes, config.activation)
    algorithm = make_algorithm(config)
    lagged = config.lag.max_delay > 0
    num_groups = config.lag.num_groups if lagged else 1
    metric_envs = jnp.arange(0, local_envs, config.num_minibatches)  # TV subsample

    def act(params, obs, key):
        """One env: a ~ π(·|s) drawn with the env's own key, log π(a|s), V(s)."""
        pi, value = network.apply(params, obs[None])
        action = pi.sample(seed=key)
        return action[0], pi.log_prob(action)[0], value[0]

    policy_step = jax.vmap(act, in_axes=(None, 0, 0))  # [n] envs, [n] keys

    def behavior_step(params, obs, keys):
        if not lagged:
            return policy_step(params, obs, keys)
        return per_group(policy_step, True, num_groups)(params, obs,
                                                         split_groups(keys, num_groups))

    behavior_value = per_group(lambda p, o: network.apply(p, o, method="value"), lagged, num_groups)

    def normalize(stats, obs):
        return normalize_obs(stats, obs) if config.normalize_obs else obs

    def init(key: jax.Array, hp: Hyperparams) -> TrainState:
        k_params, k_env, key = jax.random.split(key, 3)
        obs, env_state = init_env.reset(k_env)
        params = network.init(k_params, obs[:1])
        return TrainState(
            params=params,
            opt_state=make_optimizer(hp).init(params),
            obs=obs,
            env_state=env_state,
            obs_stats=init_running_stats(spec.obs_shape),
            history=lag.init_history(params, config.lag.max_delay) if lagged else None,
            algo_state=algorithm.init_state(hp),
            key=key,
            iteration=jnp.zeros((), jnp.int32),
            actors=distributed.init_actors(params, devices) if axis else None,
        )

    def rollout(state: TrainState, behavior_params, key):
        def step(carry, step_key):
            obs, env_state = carry
            k_act, k_env = (distributed.env_keys(k, config.num_envs, axis)
                            for k in jax.random.split(step_key))
            norm_obs = normalize(state.obs_stats, obs)
            action, logp, value = behavior_step(behavior_params, norm_obs, k_act)
            env_state, out = env.step_envs(k_env, env_state, action)
            record = Rollout(norm_obs, obs if config.normalize_obs else None, action, logp,
                             value, out.reward, out.terminated, out.truncated,
                             normalize(state.obs_stats, out.final_obs), out.completed_return,
                             out.completed_length)
            return (out.obs, env_state), record

        keys = jax.random.split(key, config.num_steps)
        (obs, env_state), traj = jax.lax.scan(step, (state.obs, state.env_state), keys)
        return obs, env_state, traj

    weight_after_normalization = (algorithm.advantages == "vtrace"
                                  and algorithm.advantage_form == "normalize_then_weight")

    def estimate(traj: Rollout, rewards, next_values, learner_logp, learner_values,
                 learner_next_values, hp: Hyperparams):
        """The per-iteration advantages, targets and policy-gradient weights (None = 1) of
        the algorithm: its "align" step. `rewards` are the scaled ones learning uses."""
        ends = (traj.terminated, traj.truncated)
        if algorithm.advantages == "gae":
            return gae(rewards, traj.values, next_values, *ends, hp.gamma,
                       hp.gae_lambda), None
        if algorithm.advantages == "values":
            return gae(rewards, learner_values, learner_next_values, *ends, hp.gamma,
                       hp.gae_lambda), None
        log_ratio = learner_logp - traj.logp
        targets = vtrace(rewards, learner_values, learner_next_values, *ends, log_ratio,
                         hp.gamma, hp.gae_lambda, hp.rho_bar, hp.c_bar,
                         weight_advantages=not weight_after_normalization)
        if not weight_after_normalization:
            return targets, None
        return targets, jnp.minimum(hp.rho_bar, jnp.exp(log_ratio))

    needs_learner_batch = algorithm.uses_learner_logp or algorithm.advantages != "gae"
    stale = lagged or bool(axis and config.distributed.sync_interval > 1)  # β may differ from π_T

    def learner_view(params, traj: Rollout):
        """log π_T(a|s), V_T(s), V_T(s') over the batch where the algorithm reads them.

        Otherwise log π_T is only needed for the TV metrics, on the subsample `metric_envs`,
        and without lag or device sync lag it is the recorded log β exactly (β = π_T). The
        unused fields are None and the batch's `logp_learner` then holds log β.
        """
        if needs_learner_batch:
            pi, values = network.apply(params, traj.obs)
            next_values = network.apply(params, traj.final_obs, method="value")
            logp = pi.log_prob(traj.actions)
            return logp, values, next_values, logp[:, metric_envs]
        if not stale:
            return traj.logp, None, None, traj.logp[:, metric_envs]
        pi, _ = network.apply(params, traj.obs[:, metric_envs])
        return traj.logp, None, None, pi.log_prob(traj.actions[:, metric_envs])

    def sgd_step(carry, mb: Batch, hp: Hyperparams, algo_state, lr):
        params, opt_state = carry
        grads, metrics = jax.grad(total_loss, has_aux=True)(
            params, network.apply, mb, hp, algo_state, algorithm, config.norm_adv, mb_axis)
        grads = distributed.mean(grads, axis)
        updates, opt_state = make_optimizer(hp).update(grads, opt_state, params)
        updates = jax.tree.map(lambda u: -lr * u, updates)
        metrics["grad_norm"] = optax.global_norm(grads)
        return (optax.apply_updates(params, updates), opt_state), metrics

    def update(state: TrainState, batch: Batch, hp: Hyperparams, key):
        """E epochs × M minibatches. With the "global" shuffle the devices gather the batch,
        shuffle all N envs alike and each trains on its 1/D slice of every minibatch."""
        lr = learning_rate(config, hp, state.iteration)
        if mb_axis:
            batch = jax.tree.map(lambda x: distributed.gather_envs(x, mb_axis), batch)

        def epoch(carry, epoch_key):
            mbs = minibatches(batch, epoch_key, config.num_minibatches)
            mbs = jax.tree.map(lambda x: distributed.local_part(x, mb_axis, dim=2), mbs)
            return jax.lax.scan(lambda c, mb: sgd_step(c, mb, hp, state.algo_state, lr),
                                carry, mbs)

        shuffle_key = key if mb_axis else distributed.device_key(key, axis)
        keys = jax.random.split(shuffle_key, config.update_epochs)
        (params, opt_state), metrics = jax.lax.scan(
            epoch, (state.params, state.opt_state), keys)
        return params, opt_state, jax.tree.map(jnp.mean, metrics)

    def iteration(state: TrainState, hp: Hyperparams) -> tuple[TrainState, dict]:
        key, k_delay, k_roll, k_update = jax.random.split(state.key, 4)
        if lagged:
            history = lag.push(state.history, state.params, state.iteration)
            delays = lag.sample_delays(k_delay, config.lag.mode, num_groups, hp.lag_delay,
                                       state.iteration)
            behavior_params = lag.gather(history, state.iteration, delays)
        elif axis:
            history = None
            actors, delays, behavior_params = distributed.sync_actors(
                state.actors, state.params, state.iteration, config.distributed, axis)
        else:
            history, delays, behavior_params = None, jnp.zeros((1,), jnp.int32), state.params
        obs, env_state, traj = rollout(state, behavior_params, k_roll)
        next_values = behavior_value(behavior_params, traj.final_obs)
        learner_logp, learner_values, learner_next_values, sub_learner = learner_view(
            state.params, traj)
        rewards = traj.rewards * hp.reward_scale
        targets, pg_weights = estimate(traj, rewards, next_values, learner_logp,
                                       learner_values, learner_next_values, hp)
        batch = Batch(traj.obs, traj.actions, traj.logp, traj.values, next_values, rewards,
                      traj.terminated, traj.truncated, traj.final_obs, learner_logp,
                      targets.advantages, targets.targets, pg_weights)
        params, opt_state, metrics = update(state, batch, hp, k_update)

        pi_final, _ = network.apply(params, traj.obs[:, metric_envs])
        final_logp = pi_final.log_prob(traj.actions[:, metric_envs])
        sub_behavior = traj.logp[:, metric_envs]
        mean_delay = delays.mean()
        metrics.update({
            "lag/iterations": mean_delay,
            "lag/sgd_steps": (mean_delay * config.updates_per_iteration
                              + (config.updates_per_iteration - 1) / 2),
            "tv/backward": mean_tv(sub_learner, sub_behavior),
            "tv/forward": mean_tv(final_logp, sub_learner),
            "tv/total": mean_tv(final_logp, sub_behavior),
            "episode/return_sum": traj.completed_return.sum(),
            "episode/length_sum": traj.completed_length.sum().astype(jnp.float32),
            "episode/count": (traj.terminated | traj.truncated).sum().astype(jnp.float32),
            "learning_rate": learning_rate(config, hp, state.iteration),
        })
        metrics = distributed.reduce_metrics(metrics, axis)
        obs_stats = state.obs_stats
        if config.normalize_obs:
            obs_stats = update_running_stats(obs_stats,
                                             distributed.gather_envs(traj.raw_obs, axis))
        new_state = TrainState(
            params=params,
            opt_state=opt_state,
            obs=obs,
            env_state=env_state,
            obs_stats=obs_stats,
            history=history,
            algo_state=algorithm.update_state(state.algo_state, metrics, hp),
            key=key,
            iteration=state.iteration + 1,
            actors=actors if axis else None,
        )
        return new_state, metrics

    def train_chunk(state: TrainState, hp: Hyperparams, num_iterations: jax.Array):
        """Run num_iterations iterations; return the new state and metrics summed over them."""
        zeros = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype),
                             jax.eval_shape(iteration, state, hp)[1])

        def body(_, carry):
            state, sums = carry
            state, metrics = iteration(state, hp)
            return state, jax.tree.map(jnp.add, sums, metrics)

        return jax.lax.fori_loop(0, num_iterations, body, (state, zeros))

    if axis:
        train_chunk = distributed.shard_envs(train_chunk, distributed.make_mesh(config))

    eval_env = make_env(config.env, config.eval.num_episodes, brax_backend=config.brax_backend)

    def evaluate(state: TrainState, key: jax.Array, greedy: bool | jax.Array) -> jax.Array:
        """Return of the first episode in each of `eval.num_episodes` parallel envs.

        `greedy` may be traced: one compiled program serves both modes (the same keys)."""
        k_reset, k_run = jax.random.split(key)
        obs, env_state = eval_env.reset(k_reset)

        def step(carry, step_key):
            obs, env_state, returns, finished = carry
            k_act, k_env = jax.random.split(step_key)
            pi, _ = network.apply(state.params, normalize(state.obs_stats, obs))
            action = jnp.where(greedy, greedy_action(pi), pi.sample(seed=k_act))
            env_state, out = eval_env.step(k_env, env_state, action)
            returns = returns + jnp.where(finished, 0.0, out.reward)
            finished = finished | out.terminated | out.truncated
            return (out.obs, env_state, returns, finished), None

        zeros = jnp.zeros(config.eval.num_episodes)
        carry = (obs, env_state, zeros, zeros.astype(bool))
        keys = jax.random.split(k_run, spec.max_episode_steps)
        (_, _, returns, _), _ = jax.lax.scan(step, carry, keys)
        return returns

    return Trainer(config, spec, network, algorithm, init, train_chunk, evaluate)
