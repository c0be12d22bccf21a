"""The learner's side of an iteration (docs/concepts/spec.md §1.1, §2, §3): its view of the batch
(`learner_view`: π_T, V_T where the algorithm reads them), the per-iteration estimate
(`estimate`: critic × estimator × anchor) and the E × M minibatch updates (`update`)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxvaco.core import distributed
from jaxvaco.core.algos import Batch
from jaxvaco.core.algos.common import total_loss
from jaxvaco.core.config import TrainConfig
from jaxvaco.core.estimators import Targets, gae, vtrace
from jaxvaco.core.hparams import Hyperparams
from jaxvaco.core.primitives import anchor_terms, shuffled_minibatches
from jaxvaco.core.rollout import Rollout, per_group
from jaxvaco.core.train_state import Setup, TrainState


class LearnerView(NamedTuple):
    """The learner's π_T and V_T on the batch where the algorithm reads them (else None)."""

    logp_learner: jax.Array | None  # log π_T(a|s) [T, N]
    values: jax.Array | None  # V_T(s)
    next_values: jax.Array | None  # V_T(s')
    metric_logp: jax.Array  # log π_T(a|s) on `Setup.metric_envs`, for the TV metrics


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
        return LearnerView(None, None, None, traj.logp[:, envs])
    pi, _ = network.apply(params, traj.obs[:, envs])
    return LearnerView(None, None, None, pi.log_prob(traj.actions[:, envs]))


def estimate(setup: Setup, traj: Rollout, behaviour_params: Any, view: LearnerView,
             hp: Hyperparams) -> Batch:
    """The per-iteration advantages and value targets (the algorithm's critic × estimator;
    none with estimator "none", whose algorithm recomputes them at every minibatch), and
    the ratio's anchor with ρ_t = min(ρ̄, π_T/β) applied once (`Algorithm.importance_weight`,
    `primitives.anchor_terms`). Rewards are scaled here, once, for learning."""
    algorithm = setup.algorithm
    rewards = traj.rewards * hp.reward_scale
    placement = algorithm.importance_weight
    targets = (Targets(None, None) if algorithm.estimator == "none" else
               critic_targets(setup, traj, behaviour_params, view, rewards, hp,
                              weighted=placement == "inside"))
    anchor = anchor_terms(algorithm.anchor, placement, traj.logp, view.logp_learner,
                          hp.algo.get("rho_bar"))
    return Batch(traj.obs, traj.actions, traj.logp, anchor.logp, rewards, traj.terminated,
                 traj.truncated, traj.final_obs, targets.advantages, targets.targets,
                 anchor.weights)


def critic_targets(setup: Setup, traj: Rollout, behaviour_params: Any, view: LearnerView,
                   rewards: jax.Array, hp: Hyperparams, weighted: bool) -> Targets:
    """Â and v_t from the algorithm's critic (recorded V_β, or the learner's V_T) by GAE,
    or by V-trace with log π_T − log β (ρ_t inside Â only if `weighted`)."""
    algorithm = setup.algorithm
    if algorithm.critic == "learner":
        values, next_values = view.values, view.next_values
    else:
        values_fn = lambda p, o: setup.network.apply(p, o, method="value")  # noqa: E731
        next_values = per_group(values_fn, setup.lagged, setup.num_groups)(
            behaviour_params, traj.final_obs)
        values = traj.values
    ends = (traj.terminated, traj.truncated)
    if algorithm.estimator == "gae":
        return gae(rewards, values, next_values, *ends, hp.gamma, hp.gae_lambda)
    return vtrace(rewards, values, next_values, *ends, view.logp_learner - traj.logp,
                  hp.gamma, hp.gae_lambda, hp.algo["rho_bar"], hp.algo["c_bar"],
                  weight_advantages=weighted)


def make_optimizer(hp: Hyperparams) -> optax.GradientTransformation:
    """Global-norm clipping then Adam; the (annealed) learning rate is applied by the caller."""
    return optax.chain(optax.clip_by_global_norm(hp.max_grad_norm), optax.scale_by_adam(eps=1e-5))


def learning_rate(config: TrainConfig, hp: Hyperparams, iteration: jax.Array) -> jax.Array:
    """lr·(1 − T/num_iterations) when annealing, else lr."""
    if not config.anneal_lr:
        return hp.learning_rate
    return hp.learning_rate * (1.0 - iteration / config.num_iterations)


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
