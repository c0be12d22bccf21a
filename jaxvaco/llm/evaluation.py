"""Held-out accuracy of the LLM policy, per difficulty level [ours].

Greedy accuracy is the share of held-out problems that greedy decoding solves; sampled
accuracy that of completions sampled at the training temperature, the success rate RL
maximises (greedy accuracy can stay flat while it rises, as RL first sharpens the
sampling distribution). `evaluate_runs` measures both for R runs at once, as the host
loop's evaluation of an LLM run.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxvaco.core.primitives import masked_mean
from jaxvaco.llm.model import Transformer, sample
from jaxvaco.llm.task import LEVELS, Problems, reward


def accuracy(model: Transformer, params: Any, problems: Problems) -> jax.Array:
    """Greedy-decoding accuracy at each level of LEVELS. float [len(LEVELS)]"""
    out = sample(model, params, problems.prompts, problems.prompt_len, jax.random.key(0), 1.0,
                 greedy=True)
    correct = reward(out.tokens, problems.prompt_len, problems.answers)
    return jnp.stack([masked_mean(correct, problems.level == lv) for lv in LEVELS])


def sampled_accuracy(model: Transformer, params: Any, problems: Problems, key: jax.Array,
                     temperature: float, samples: int) -> jax.Array:
    """Accuracy of completions sampled at `temperature`, `samples` per problem, at each
    level of LEVELS. float [len(LEVELS)]"""
    idx = jnp.repeat(jnp.arange(problems.answers.shape[0]), samples)
    out = sample(model, params, problems.prompts[idx], problems.prompt_len[idx], key,
                 temperature)
    correct = reward(out.tokens, problems.prompt_len[idx], problems.answers[idx])
    return jnp.stack([masked_mean(correct, problems.level[idx] == lv) for lv in LEVELS])


def evaluation_keys(seed: int, evaluation: int, num_runs: int) -> jax.Array:
    """The sampled evaluation's keys of R runs at the `evaluation`-th evaluation (from 0):
    split(key(seed + evaluation), R), one per run in run order [ours: the keys of the
    recorded lag comparison, whose R runs were K-major over K × seeds]. [R]"""
    return jax.random.split(jax.random.key(seed + evaluation), num_runs)


def level_figures(name: str, per_level: jax.Array) -> dict[str, jax.Array]:
    """{name: mean over the levels, name/level<l>: each level} of per_level [..., levels]."""
    figures = {name: per_level.mean(-1)}
    figures.update({f"{name}/level{lv}": per_level[..., i] for i, lv in enumerate(LEVELS)})
    return figures


def evaluate_runs(model: Transformer, params: Any, problems: Problems, keys: jax.Array,
                  temperature: float, samples: int) -> dict[str, jax.Array]:
    """Greedy and sampled held-out accuracy of R runs (params and keys with a leading [R]
    axis): `accuracy`, `sampled_accuracy` and each per level, {name: [R]}."""
    greedy = jax.vmap(lambda p: accuracy(model, p, problems))(params)
    sampled = jax.vmap(lambda p, k: sampled_accuracy(model, p, problems, k, temperature,
                                                     samples))(params, keys)
    return {**level_figures("accuracy", greedy), **level_figures("sampled_accuracy", sampled)}
