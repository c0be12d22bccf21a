"""Warm start, RL under generation lag, and held-out evaluation, each one jitted program.

Warm start [ours]: maximum likelihood on worked solutions (prompt tokens unscored),
stopped early so that RL starts from a policy that solves some but not all problems.

RL, one generation step T (spec §1.1's lag model with one actor group) [ours]:

    history ← push(θ_T)                            ring buffer of the last K_max + 1 θ's
    θ_β = θ_{T−k},  k = min(K, T)                  the generating parameters
    P prompts × G completions ~ β = π_{θ_β}        log β recorded while sampling
    R = reward(completions),  Â = group-normalised R
    log π_T over the batch                         (the learner at the step's start)
    E epochs × M minibatches of updates of θ       forward lag
    θ_{T+1} = θ

so a completion is generated with parameters K generation steps (K·E·M optimizer
updates) old. K = 0 is synchronous on-policy training.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxvaco import lag
from jaxvaco.config import ConfigError
from jaxvaco.llm import losses
from jaxvaco.llm.model import Completions, Transformer, sample, token_logp
from jaxvaco.llm.task import LEVELS, PAD, Problems, reward
from jaxvaco.primitives import masked_mean, shuffled_minibatches


def completion_mask(sequences: jax.Array, prompt_len: jax.Array) -> jax.Array:
    """[B, T−1]: position t scores a solution token (t + 1 ≥ prompt_len, not <pad>)."""
    pos = jnp.arange(1, sequences.shape[1])
    return (pos >= prompt_len[:, None]) & (sequences[:, 1:] != PAD)


def warm_start(model: Transformer, params: Any, pool: Problems, key: jax.Array, steps: int,
               batch_size: int, learning_rate: float) -> tuple[Any, jax.Array]:
    """`steps` Adam steps on −mean_v log π_θ(solution | prompt) over random batches of the
    pool, at τ = 1. Returns (params, loss per step)."""
    optimizer = optax.adam(learning_rate)

    def loss_fn(p, seqs, prompt_len):
        return -masked_mean(token_logp(model, p, seqs, 1.0),
                                   completion_mask(seqs, prompt_len))

    def step(carry, k):
        p, opt_state = carry
        idx = jax.random.randint(k, (batch_size,), 0, pool.answers.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(p, pool.sequences[idx], pool.prompt_len[idx])
        updates, opt_state = optimizer.update(grads, opt_state)
        return (optax.apply_updates(p, updates), opt_state), loss

    (params, _), loss = jax.lax.scan(step, (params, optimizer.init(params)),
                                     jax.random.split(key, steps))
    return params, loss


def accuracy(model: Transformer, params: Any, problems: Problems) -> jax.Array:
    """Greedy-decoding accuracy at each level of LEVELS. float [len(LEVELS)]"""
    out = sample(model, params, problems.prompts, problems.prompt_len, jax.random.key(0), 1.0,
                 greedy=True)
    correct = reward(out.tokens, problems.prompt_len, problems.answers)
    return jnp.stack([masked_mean(correct, problems.level == lv) for lv in LEVELS])


def sampled_accuracy(model: Transformer, params: Any, problems: Problems, key: jax.Array,
                     temperature: float, samples: int) -> jax.Array:
    """Accuracy of completions sampled at `temperature`, `samples` per problem, at each
    level of LEVELS: the success rate RL maximises (greedy accuracy can stay flat while it
    rises, as RL first sharpens the sampling distribution). float [len(LEVELS)]"""
    idx = jnp.repeat(jnp.arange(problems.answers.shape[0]), samples)
    out = sample(model, params, problems.prompts[idx], problems.prompt_len[idx], key,
                 temperature)
    correct = reward(out.tokens, problems.prompt_len[idx], problems.answers[idx])
    return jnp.stack([masked_mean(correct, problems.level[idx] == lv) for lv in LEVELS])


FRACTIONS = {"grpo": "grpo/clipped_fraction", "vaco": "vaco/filtered_fraction"}
"""Per objective, the metric of the valid tokens it acts on: GRPO's clip removes their
gradient, VACO's filter drops them (before: one `filter/fraction` for both)."""


@dataclasses.dataclass(frozen=True)
class RLConfig:
    algo: str = "grpo"  # "grpo" | "vaco"
    # Defaults from experiments/results/llm_rl/notes.md (issue 15): at lr ≥ 2e-4 Adam's
    # ≈ lr-sized steps follow the policy gradient's noise and greedy accuracy falls; at
    # 1e-4 with 16 × 16 completions in one update it rises. (Until issue 15: 8 × 8, M = 4,
    # lr 5e-5, which experiments/llm_lag.py keeps as its defaults.)
    num_prompts: int = 16  # P prompts per generation step
    group_size: int = 16  # G completions per prompt
    epochs: int = 1  # E
    minibatches: int = 1  # M (of whole groups)
    learning_rate: float = 1e-4
    max_grad_norm: float = 1.0
    temperature: float = 1.0
    clip_eps: float = 0.2  # GRPO
    # GRPO's anchor: "behaviour" (β, r = π_θ/β, GRPO) or "learner" (π_T, r = π_θ/π_T with
    # each token's Â weighted once by min(rho_bar, π_T/β): decoupled clip, Hilton et al. 2021)
    grpo_anchor: str = "behaviour"
    kl_coef: float = 0.0  # GRPO and VACO: c_kl·k3 KL to the warm-start policy (0 = off)
    delta: float = 0.2  # VACO
    vaco_filter: str = "batch"  # "batch" | "sample" | "none"
    vaco_anchor: str = "learner"  # "learner" (π_T) | "behaviour" (β)
    # With VACO's anchor π_T: "none" (r = π_θ/π_T alone, as until issue 15: its gradient at
    # θ = π_T is β's completions' gradient uncorrected) or "truncated" (Â weighted once by
    # min(rho_bar, π_T/β), as GRPO's anchor π_T and the RL trainer's anchor-π_T VACO).
    vaco_weight: str = "none"
    rho_bar: float = 1.0  # ρ̄: truncation of the anchor-π_T importance weight
    adv_scale: str = "std"  # "std" (GRPO) | "none" (Dr. GRPO: R − mean_g R)
    loss_agg: str = "token"  # "token" | "sequence" | "constant" (losses.aggregate)
    warmup_updates: int = 0  # linear learning-rate warm-up over this many optimizer updates
    lag_mode: str = "fixed"  # spec §1.1, with one actor group
    max_delay: int = 8  # K_max: the ring buffer holds K_max + 1 parameter snapshots

    def __post_init__(self):
        """A misspelt choice fails here, naming the field, instead of silently selecting
        another branch of the loss."""
        for name, allowed in RL_CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(f"RLConfig.{name} must be one of {list(allowed)}, got "
                                  f"{getattr(self, name)!r}.")
        positive = ("num_prompts", "group_size", "epochs", "minibatches")
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"RLConfig.{name} must be >= 1, got {getattr(self, name)}.")
        if not self.rho_bar > 0:
            raise ConfigError(f"RLConfig.rho_bar must be > 0, got {self.rho_bar}.")
        if self.num_prompts % self.minibatches:
            raise ConfigError(f"RLConfig.minibatches ({self.minibatches}) must divide "
                              f"num_prompts ({self.num_prompts}): minibatches are whole groups.")


RL_CHOICES = {"algo": ("grpo", "vaco"), "grpo_anchor": ("behaviour", "learner"),
              "vaco_filter": ("batch", "sample", "none"),
              "vaco_anchor": ("learner", "behaviour"), "vaco_weight": ("none", "truncated"),
              "adv_scale": ("std", "none"),
              "loss_agg": ("token", "sequence", "constant"),
              "lag_mode": ("fixed", "uniform", "spread")}


LAG_VARIANTS = {
    "grpo β": {"algo": "grpo", "grpo_anchor": "behaviour"},
    "grpo π_T": {"algo": "grpo", "grpo_anchor": "learner"},
    "vaco β": {"algo": "vaco", "vaco_anchor": "behaviour"},
    "vaco π_T": {"algo": "vaco", "vaco_anchor": "learner", "vaco_weight": "truncated"},
    "none (IS gradient)": {"algo": "vaco", "vaco_anchor": "behaviour", "vaco_filter": "none"},
}
"""The objectives of issue 15's lag comparison, as RLConfig changes: GRPO's clip on β or
on π_T (decoupled, weighted once by min(ρ̄, π_T/β)), token-level VACO's filter on each
anchor (π_T with the same weight), and the critic-free equivalent of the fair study's
constraint-off ablation: VACO's objective with no filter on β, −mean_v(π_θ/β·Â), the plain
importance-weighted policy gradient (with "vaco β": the constraint on / off)."""


class Rollout(NamedTuple):
    completions: Completions
    rewards: jax.Array  # [B]
    advantages: jax.Array  # [B]
    logp_learner: jax.Array  # log π_T [B, T−1]
    logp_ref: jax.Array  # log π_ref [B, T−1] (zeros when kl_coef = 0)


class RLState(struct.PyTreeNode):
    params: Any
    opt_state: Any
    history: Any  # lag ring buffer of θ snapshots
    step: jax.Array  # generation step T
    key: jax.Array


class RL(NamedTuple):
    """The pure functions of one configuration; vmap them over runs."""

    init: Callable[[Any, jax.Array], RLState]
    iteration: Callable  # (params, opt_state, behaviour params, key, pool, ref) -> ...
    train_step: Callable  # (state, K, pool, ref) -> (state, metrics)
    chunk: Callable  # (state, K, pool, ref, test, num_steps) -> (state, metrics, accuracy)


def group_minibatches(rollout: Rollout, key: jax.Array, config: RLConfig) -> Rollout:
    """[E·M, B/M, ...]: for each of the E epochs a fresh permutation of whole groups (a
    prompt's G completions stay together), split into M minibatches
    (`primitives.shuffled_minibatches`, as the RL trainer's)."""
    def epoch(k):
        groups = jax.tree.map(lambda x: x.reshape((config.num_prompts, config.group_size)
                                                  + x.shape[1:]), rollout)
        split = shuffled_minibatches(groups, k, config.minibatches)  # [M, P/M, G, ...]
        return jax.tree.map(lambda x: x.reshape((config.minibatches, -1) + x.shape[3:]), split)

    per_epoch = jax.vmap(epoch)(jax.random.split(key, config.epochs))
    return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), per_epoch)


def generate(model: Transformer, config: RLConfig, behaviour_params: Any, key: jax.Array,
             pool: Problems, ref_params: Any, params: Any) -> Rollout:
    """G completions of each of P random prompts, sampled with β = `behaviour_params`; their
    rewards, group advantages, and the log-probs of π_T (`params`) and of the reference."""
    def logp_of(p, tokens):
        return token_logp(model, p, tokens, config.temperature)

    k_prompts, k_sample = jax.random.split(key)
    idx = jnp.repeat(jax.random.randint(k_prompts, (config.num_prompts,), 0,
                                        pool.answers.shape[0]), config.group_size)
    prompt_len = pool.prompt_len[idx]
    out = sample(model, behaviour_params, pool.prompts[idx], prompt_len, k_sample,
                 config.temperature)
    rewards = reward(out.tokens, prompt_len, pool.answers[idx])
    logp_ref = (logp_of(ref_params, out.tokens) if config.kl_coef > 0
                else jnp.zeros_like(out.logp))
    advantages = losses.group_advantages(rewards, config.group_size, scale=config.adv_scale)
    return Rollout(out, rewards, advantages, logp_of(params, out.tokens), logp_ref)


def rl_anchor(mb: Rollout, config: RLConfig) -> tuple[jax.Array, jax.Array | None]:
    """(log of the ratio's denominator, per-token importance weights or None) of
    config.algo: β without weights, or π_T with w = min(ρ̄, π_T/β) where the config asks
    for it (`grpo_anchor = "learner"`; VACO's `vaco_anchor = "learner"` with
    `vaco_weight = "truncated"`), by the RL trainer's rule (`losses.token_anchor`)."""
    anchor = config.grpo_anchor if config.algo == "grpo" else config.vaco_anchor
    corrected = config.algo == "grpo" or config.vaco_weight == "truncated"
    return losses.token_anchor(anchor, corrected, mb.completions.logp, mb.logp_learner,
                               config.rho_bar)


def rl_loss(params: Any, mb: Rollout, model: Transformer,
            config: RLConfig) -> tuple[jax.Array, jax.Array]:
    """GRPO's clipped surrogate or VACO's filtered one (config.algo) on the anchor of
    `rl_anchor`, plus c_kl·k3 KL to the reference when kl_coef > 0. Returns (loss, clip or
    filter fraction)."""
    c = mb.completions
    logp = token_logp(model, params, c.tokens, config.temperature)
    anchor, weights = rl_anchor(mb, config)
    if config.algo == "grpo":
        loss, fraction = losses.grpo_policy_loss(logp, anchor, mb.advantages, c.generated,
                                                 config.clip_eps, config.loss_agg, weights)
    else:
        loss, fraction = losses.vaco_policy_loss(logp, anchor, mb.advantages, c.generated,
                                                 config.delta, config.vaco_filter,
                                                 config.loss_agg, weights)
    if config.kl_coef > 0:
        loss = loss + config.kl_coef * losses.k3_kl(logp, mb.logp_ref, c.generated)
    return loss, fraction


def iteration_metrics(rollout: Rollout, logp_final: jax.Array, fraction: jax.Array,
                      config: RLConfig) -> dict[str, jax.Array]:
    """Reward, length, the three token TVs (β→π_T, π_T→π_{T+1}, β→π_{T+1}), the
    clip/filter fraction, the share of groups with a signal and an entropy estimate."""
    c = rollout.completions
    return {
        "reward": rollout.rewards.mean(),
        "length": c.generated.sum(-1).mean(),
        "tv/backward": losses.token_tv(rollout.logp_learner - c.logp, c.generated),
        "tv/forward": losses.token_tv(logp_final - rollout.logp_learner, c.generated),
        "tv/total": losses.token_tv(logp_final - c.logp, c.generated),
        FRACTIONS[config.algo]: fraction.mean(),
        # groups whose rewards are not all equal: the only ones with Â ≠ 0
        "groups/mixed": (rollout.rewards.reshape(-1, config.group_size).std(-1) > 0).mean(),
        # −mean log β per sampled token: a one-sample estimate of the policy's entropy
        "entropy": -masked_mean(c.logp, c.generated),
    }


def make_rl(model: Transformer, config: RLConfig) -> RL:
    """GRPO or GRPO+VACO (config.algo) for `model` under spec §1.1's lag model."""
    learning_rate = (optax.linear_schedule(0.0, config.learning_rate, config.warmup_updates)
                     if config.warmup_updates > 0 else config.learning_rate)
    optimizer = optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                            optax.adam(learning_rate))
    lag_model = lag.ring_buffer(config.max_delay, config.lag_mode, num_groups=1)

    def logp_of(params, tokens):
        return token_logp(model, params, tokens, config.temperature)

    def update(carry, mb: Rollout):
        params, opt_state = carry
        (_, fraction), grads = jax.value_and_grad(rl_loss, has_aux=True)(params, mb, model,
                                                                          config)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), fraction

    def iteration(params, opt_state, behaviour_params, key, pool: Problems, ref_params):
        """One generation step with the given generating parameters, then E×M updates."""
        k_gen, k_perm = jax.random.split(key)
        rollout = generate(model, config, behaviour_params, k_gen, pool, ref_params, params)
        (new_params, opt_state), fraction = jax.lax.scan(
            update, (params, opt_state), group_minibatches(rollout, k_perm, config))
        logp_final = logp_of(new_params, rollout.completions.tokens)
        return new_params, opt_state, iteration_metrics(rollout, logp_final, fraction, config)

    def init(params, key) -> RLState:
        return RLState(params, optimizer.init(params), lag_model.init(params), jnp.int32(0), key)

    def train_step(state: RLState, lag_delay, pool: Problems, ref_params):
        key, k_delay, k_iter = jax.random.split(state.key, 3)
        stacked, delays, history = lag_model.behaviour(state.history, state.params, state.step,
                                                       k_delay, lag_delay)
        behaviour = jax.tree.map(lambda h: h[0], stacked)
        params, opt_state, metrics = iteration(state.params, state.opt_state, behaviour, k_iter,
                                               pool, ref_params)
        metrics["lag/iterations"] = delays.mean().astype(jnp.float32)
        return RLState(params, opt_state, history, state.step + 1, key), metrics

    def chunk(state, lag_delay, pool, ref_params, test: Problems, num_steps: int):
        """`num_steps` training steps, then the held-out accuracy of the final θ."""
        state, metrics = jax.lax.scan(
            lambda s, _: train_step(s, lag_delay, pool, ref_params), state, None, num_steps)
        return state, metrics, accuracy(model, state.params, test)

    return RL(init, iteration, train_step, chunk)
