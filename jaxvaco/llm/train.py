"""The supervised warm start and RL under generation lag, as module-level stages.

Stages, each a pure function of (model, config, ...): `generate` (a batch of completions
with their rewards, group advantages and log-probabilities), `policy_loss` (GRPO's or
token-level VACO's objective, `jaxvaco.llm.losses`), `update` (one optimizer step),
`iteration` (E × M updates on one batch), `train_step` (the lag ring buffer, then an
iteration) and `chunk` (a `lax.scan` of steps). `make_llm_train` binds a config's runs as
the host loop's `LoopTrainer` (`LLMTrainer`; `jaxvaco.llm.run` drives it).

Warm start [ours]: maximum likelihood on worked solutions (prompt tokens unscored),
stopped early so that RL starts from a policy that solves some but not all problems.

RL, one generation step T (the lag model of docs/concepts/spec.md §1.1 with one actor
group) [ours]:

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
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from jaxvaco.core import lag
from jaxvaco.core.guard import all_finite
from jaxvaco.core.primitives import masked_mean, shuffled_minibatches
from jaxvaco.llm import evaluation, losses
from jaxvaco.llm.config import FRACTIONS, LLMConfig
from jaxvaco.llm.model import Completions, ModelConfig, Transformer, sample, token_logp
from jaxvaco.llm.task import PAD, SEQ_LEN, VOCAB, Problems, reward


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


class Rollout(NamedTuple):
    completions: Completions
    rewards: jax.Array  # [B]
    advantages: jax.Array  # [B]
    logp_learner: jax.Array  # log π_T [B, T−1]
    logp_ref: jax.Array  # log π_ref [B, T−1] (zeros when kl_coef = 0)


class LLMState(struct.PyTreeNode):
    params: Any
    opt_state: Any
    history: Any  # lag ring buffer of θ snapshots
    step: jax.Array  # generation step T
    key: jax.Array


def group_minibatches(rollout: Rollout, key: jax.Array, config: LLMConfig) -> Rollout:
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


def generate(model: Transformer, config: LLMConfig, behaviour_params: Any, key: jax.Array,
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


def policy_anchor(mb: Rollout, config: LLMConfig) -> tuple[jax.Array, jax.Array | None]:
    """(log of the ratio's denominator, per-token importance weights or None) of
    config.algo: β without weights, or π_T with w = min(ρ̄, π_T/β) where the config asks
    for it (`grpo.anchor = "learner"`; VACO's `vaco.anchor = "learner"` with
    `vaco.weight = "truncated"`), by the RL trainer's rule (`losses.token_anchor`)."""
    anchor = config.grpo.anchor if config.algo == "grpo" else config.vaco.anchor
    corrected = config.algo == "grpo" or config.vaco.weight == "truncated"
    return losses.token_anchor(anchor, corrected, mb.completions.logp, mb.logp_learner,
                               config.rho_bar)


def policy_loss(params: Any, mb: Rollout, model: Transformer,
                config: LLMConfig) -> tuple[jax.Array, jax.Array]:
    """GRPO's clipped surrogate or VACO's filtered one (config.algo) on the anchor of
    `policy_anchor`, plus c_kl·k3 KL to the reference when kl_coef > 0. Returns (loss, clip or
    filter fraction)."""
    c = mb.completions
    logp = token_logp(model, params, c.tokens, config.temperature)
    anchor, weights = policy_anchor(mb, config)
    if config.algo == "grpo":
        loss, fraction = losses.grpo_policy_loss(logp, anchor, mb.advantages, c.generated,
                                                 config.grpo.clip_eps, config.loss_agg, weights)
    else:
        loss, fraction = losses.vaco_policy_loss(logp, anchor, mb.advantages, c.generated,
                                                 config.vaco.delta, config.vaco.filter,
                                                 config.loss_agg, weights)
    if config.kl_coef > 0:
        loss = loss + config.kl_coef * losses.k3_kl(logp, mb.logp_ref, c.generated)
    return loss, fraction


def iteration_metrics(rollout: Rollout, logp_final: jax.Array, fraction: jax.Array,
                      config: LLMConfig) -> dict[str, jax.Array]:
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




def optimizer(config: LLMConfig) -> optax.GradientTransformation:
    """Adam after global-norm clipping, with a linear warm-up over warmup_updates."""
    learning_rate = (optax.linear_schedule(0.0, config.learning_rate, config.warmup_updates)
                     if config.warmup_updates > 0 else config.learning_rate)
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                       optax.adam(learning_rate))


def lag_model(config: LLMConfig) -> lag.LagModel:
    """The core's lag ring buffer with one actor group."""
    return lag.ring_buffer(config.lag.max_delay, config.lag.mode, num_groups=1)


def init_state(config: LLMConfig, params: Any, key: jax.Array) -> LLMState:
    """Generation step 0 of one run from `params` (the warm start)."""
    return LLMState(params, optimizer(config).init(params), lag_model(config).init(params),
                    jnp.int32(0), key)


def update(model: Transformer, config: LLMConfig, carry: tuple, mb: Rollout):
    """One optimizer step on minibatch `mb`: (params, opt_state), (loss, clip/filter
    fraction, gradient norm)."""
    params, opt_state = carry
    (loss, fraction), grads = jax.value_and_grad(policy_loss, has_aux=True)(params, mb, model,
                                                                           config)
    updates, opt_state = optimizer(config).update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), (loss, fraction,
                                                               optax.tree.norm(grads))


def iteration(model: Transformer, config: LLMConfig, params: Any, opt_state: Any,
              behaviour_params: Any, key: jax.Array, pool: Problems, ref_params: Any):
    """One generation step with the given generating parameters, then E×M updates:
    (params, opt_state, metrics)."""
    k_gen, k_perm = jax.random.split(key)
    rollout = generate(model, config, behaviour_params, k_gen, pool, ref_params, params)
    (new_params, opt_state), (loss, fraction, grad_norm) = jax.lax.scan(
        lambda carry, mb: update(model, config, carry, mb), (params, opt_state),
        group_minibatches(rollout, k_perm, config))
    logp_final = token_logp(model, new_params, rollout.completions.tokens, config.temperature)
    metrics = iteration_metrics(rollout, logp_final, fraction, config)
    metrics.update({"loss/total": loss.mean(), "grad_norm": grad_norm.mean()})
    return new_params, opt_state, metrics


def train_step(model: Transformer, config: LLMConfig, state: LLMState, lag_delay: jax.Array,
               pool: Problems, ref_params: Any) -> tuple[LLMState, dict[str, jax.Array]]:
    """Generation step T: push θ_T into the ring buffer, generate with θ_{T−k}, update."""
    key, k_delay, k_iter = jax.random.split(state.key, 3)
    stacked, delays, history = lag_model(config).behaviour(state.history, state.params,
                                                           state.step, k_delay, lag_delay)
    behaviour = jax.tree.map(lambda h: h[0], stacked)
    params, opt_state, metrics = iteration(model, config, state.params, state.opt_state,
                                           behaviour, k_iter, pool, ref_params)
    metrics["lag/iterations"] = delays.mean().astype(jnp.float32)
    return LLMState(params, opt_state, history, state.step + 1, key), metrics


def chunk(model: Transformer, config: LLMConfig, state: LLMState, lag_delay: jax.Array,
          pool: Problems, ref_params: Any, num_steps: int
          ) -> tuple[LLMState, dict[str, jax.Array]]:
    """`num_steps` generation steps of one run: the new state and each metric per step
    [num_steps]."""
    return jax.lax.scan(lambda s, _: train_step(model, config, s, lag_delay, pool, ref_params),
                        state, None, num_steps)


def run_keys(config: LLMConfig) -> jax.Array:
    """The key of every run, K-major over lag.delays × seeds: run (K, s) trains with
    fold_in(key(seed + K), s) [ours: the keys of the recorded lag comparison]. [R]"""
    return jnp.stack([jax.random.fold_in(jax.random.key(config.seed + k), s)
                      for k in config.lag.delays for s in range(config.num_seeds)])


@dataclasses.dataclass
class LLMTrainer:
    """The LLM trainer as the host loop drives it (`jaxvaco.host.session.LoopTrainer`): the R
    runs of a config (K-major over lag.delays × seeds), from the warm start `ref_params`
    (also the KL reference) on the prompts of `pool`, evaluated on `test`. Each K's seeds
    are one call of one program vmapped over the seeds [ours: as the recorded comparison
    ran them; a batch of all R runs would round differently on a CPU]."""

    model: Transformer
    config: LLMConfig
    ref_params: Any
    pool: Problems
    test: Problems

    def __post_init__(self):
        c = self.config
        self.delays = jnp.repeat(jnp.asarray(c.lag.delays, jnp.int32), c.num_seeds)
        self.keys = run_keys(c)
        self._chunk = jax.jit(lambda state, delays, n: jax.vmap(
            lambda s, k: chunk(self.model, c, s, k, self.pool, self.ref_params, n))(
            state, delays), static_argnums=2)
        self._evaluate = jax.jit(lambda params, keys: evaluation.evaluate_runs(
            self.model, params, self.test, keys, c.temperature, c.eval.samples))
        self._finite = jax.jit(jax.vmap(all_finite))

    def prepare(self) -> None:
        """Nothing ahead: the chunk compiles on its first call."""

    def init(self) -> LLMState:
        return jax.vmap(lambda k: init_state(self.config, self.ref_params, k))(self.keys)

    def abstract_state(self) -> Any:
        return jax.eval_shape(self.init)

    def by_delay(self, tree: Any) -> list[Any]:
        """A tree of [R] leaves as one tree of [seeds] leaves per K."""
        s = self.config.num_seeds
        return [jax.tree.map(lambda x, g=g: x[g * s:(g + 1) * s], tree)
                for g in range(len(self.config.lag.delays))]

    def chunk(self, state: LLMState, n: int) -> tuple[LLMState, dict[str, np.ndarray]]:
        """n generation steps of every run; each metric summed over them, {name: [R]}."""
        out = [self._chunk(s, d, n) for s, d in zip(self.by_delay(state),
                                                    self.by_delay(self.delays), strict=True)]
        state = jax.tree.map(lambda *xs: jnp.concatenate(xs), *[o[0] for o in out])
        return state, {k: np.concatenate([np.asarray(o[1][k], np.float64) for o in out]).sum(1)
                       for k in out[0][1]}

    def finite(self, state: LLMState) -> np.ndarray:
        return np.asarray(self._finite(state.params))

    def evaluate(self, state: LLMState, iteration: int) -> dict[str, np.ndarray]:
        """Greedy and sampled held-out accuracy of every run after `iteration` steps (the
        sampled evaluation's keys: `evaluation.evaluation_keys`)."""
        c = self.config
        keys = evaluation.evaluation_keys(c.seed, iteration // c.eval.every - 1, c.num_runs)
        out = [self._evaluate(p, k) for p, k in zip(self.by_delay(state.params),
                                                     self.by_delay(keys), strict=True)]
        return {k: np.concatenate([np.asarray(o[k]) for o in out]) for k in out[0]}

    def rows(self, sums: dict[str, np.ndarray], n: int, info: dict) -> list[dict]:
        """One row per run: its labels and each metric's mean over the chunk's n steps."""
        return [dict(info, run=r, **labels, **{k: float(v[r]) / n for k, v in sums.items()})
                for r, labels in enumerate(run_labels(self.config))]


def run_labels(config: LLMConfig) -> list[dict]:
    """{"seed": s, "lag_delay": K} of every run, in run order."""
    return [{"seed": s, "lag_delay": k} for k in config.lag.delays
            for s in range(config.num_seeds)]


def make_llm_train(config: LLMConfig, ref_params: Any, pool: Problems, test: Problems
                   ) -> LLMTrainer:
    """The LoopTrainer of `config`'s runs, started from the warm-start `ref_params`."""
    return LLMTrainer(Transformer(model_config(config)), config, ref_params, pool, test)


def model_config(config: LLMConfig) -> ModelConfig:
    m = config.model
    return ModelConfig(len(VOCAB), SEQ_LEN, d_model=m.d_model, num_layers=m.num_layers,
                       num_heads=m.num_heads)
