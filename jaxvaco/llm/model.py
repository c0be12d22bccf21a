"""A small decoder-only transformer with a KV cache, and its jitted sampler [ours].

Pre-LayerNorm GPT blocks (causal multi-head attention, GELU MLP), learned positional
embeddings. The policy over the next token is the tempered softmax

    π_θ(y_t | y_<t) = softmax(f_θ(y_<t) / τ)[y_t],

with the same τ at sampling time and in every loss, so that the log-probabilities the
sampler records (log β) and those of a forward pass (log π_θ) are of the same policy.

Sequences are [B, T] rows: the prompt left-aligned in positions < prompt_len, then the
completion, then <pad>. `sample` runs one decode step per position with `lax.scan`:
prompt positions are teacher-forced, later ones drawn, until <eos> (then <pad>).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxvaco.llm.task import EOS, PAD

Cache = tuple[tuple[jax.Array, jax.Array], ...]  # per layer (keys, values) [B, T, H, D_h]


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    max_len: int
    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4
    mlp_ratio: int = 4

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


def attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
    """softmax(q·kᵀ/√D_h over the keys where mask)·v.

    q [B, S, H, D_h], k and v [B, T, H, D_h], mask [S, T] (or broadcastable).
    """
    logits = jnp.einsum("bshd,bthd->bhst", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    logits = jnp.where(mask, logits, jnp.finfo(logits.dtype).min)
    return jnp.einsum("bhst,bthd->bshd", jax.nn.softmax(logits, axis=-1), v)


class Block(nn.Module):
    """x + Attn(LN(x)), then x + MLP(LN(x))."""

    config: ModelConfig

    def setup(self):
        c = self.config
        self.ln_attn = nn.LayerNorm()
        self.qkv = nn.Dense(3 * c.d_model)
        self.proj = nn.Dense(c.d_model)
        self.ln_mlp = nn.LayerNorm()
        self.mlp_in = nn.Dense(c.mlp_ratio * c.d_model)
        self.mlp_out = nn.Dense(c.d_model)

    def _qkv(self, x: jax.Array) -> list[jax.Array]:
        heads = x.shape[:2] + (self.config.num_heads, self.config.head_dim)
        return [a.reshape(heads) for a in jnp.split(self.qkv(self.ln_attn(x)), 3, axis=-1)]

    def _mix(self, x: jax.Array, q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array):
        x = x + self.proj(attention(q, k, v, mask).reshape(x.shape))
        return x + self.mlp_out(nn.gelu(self.mlp_in(self.ln_mlp(x))))

    def __call__(self, x: jax.Array) -> jax.Array:
        """Uncached causal pass over x [B, S, d]."""
        q, k, v = self._qkv(x)
        return self._mix(x, q, k, v, jnp.tril(jnp.ones((x.shape[1],) * 2, bool)))

    def decode(self, x: jax.Array, pos: jax.Array, cache: tuple[jax.Array, jax.Array]):
        """One position: x [B, 1, d] at position `pos`, attending to cached keys ≤ pos."""
        q, k, v = self._qkv(x)
        keys = jax.lax.dynamic_update_slice_in_dim(cache[0], k, pos, axis=1)
        values = jax.lax.dynamic_update_slice_in_dim(cache[1], v, pos, axis=1)
        mask = (jnp.arange(keys.shape[1]) <= pos)[None, :]
        return self._mix(x, q, keys, values, mask), (keys, values)


class Transformer(nn.Module):
    """Token logits f_θ: `__call__` for whole sequences, `decode` one position with a cache."""

    config: ModelConfig

    def setup(self):
        c = self.config
        self.embed = nn.Embed(c.vocab_size, c.d_model)
        self.pos_embed = self.param("pos_embed", nn.initializers.normal(0.02),
                                    (c.max_len, c.d_model))
        self.blocks = [Block(c) for _ in range(c.num_layers)]
        self.ln_out = nn.LayerNorm()
        self.head = nn.Dense(c.vocab_size)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        """Logits [B, S, V] of the next token at every position of tokens [B, S]."""
        x = self.embed(tokens) + self.pos_embed[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_out(x))

    def decode(self, token: jax.Array, pos: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
        """Logits [B, V] after token [B] at position `pos`, and the updated cache."""
        x = self.embed(token)[:, None] + self.pos_embed[pos]
        new_cache = []
        for block, layer_cache in zip(self.blocks, cache, strict=True):
            x, layer_cache = block.decode(x, pos, layer_cache)
            new_cache.append(layer_cache)
        return self.head(self.ln_out(x))[:, 0], tuple(new_cache)


def init_cache(config: ModelConfig, batch: int, length: int) -> Cache:
    shape = (batch, length, config.num_heads, config.head_dim)
    return tuple((jnp.zeros(shape), jnp.zeros(shape)) for _ in range(config.num_layers))


def token_logp(model: Transformer, params: Any, tokens: jax.Array, temperature: float):
    """log π_θ(y_{t+1} | y_≤t) for t = 0..T−2 from one uncached forward pass. [B, T−1]"""
    logp = jax.nn.log_softmax(model.apply(params, tokens[:, :-1]) / temperature)
    return jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1)[..., 0]


class Completions(NamedTuple):
    tokens: jax.Array  # int32 [B, T]: prompt, completion, <pad>
    logp: jax.Array  # float [B, T−1]: log β(y_{t+1} | y_≤t) at generated positions, else 0
    generated: jax.Array  # bool [B, T−1]: y_{t+1} was generated (completion up to <eos>)


def sample(model: Transformer, params: Any, prompts: jax.Array, prompt_len: jax.Array,
           key: jax.Array, temperature: float, greedy: bool = False) -> Completions:
    """Complete prompts [B, T] (left-aligned, prompt_len [B] ≥ 1) up to length T.

    Position t's decode step reads y_t and yields the distribution of y_{t+1}: if
    t + 1 < prompt_len the prompt token is forced, otherwise y_{t+1} is drawn from
    softmax(logits/τ) (or the argmax if `greedy`) and its log-probability recorded, until
    the row has produced <eos>; after that it is <pad>.
    """
    batch, length = prompts.shape

    def step(carry, t):
        cache, token, done = carry
        logits, cache = model.apply(params, token, t, cache, method=Transformer.decode)
        logp = jax.nn.log_softmax(logits / temperature)
        drawn = (jnp.argmax(logits, -1) if greedy
                 else jax.random.categorical(jax.random.fold_in(key, t), logp))
        forced = t + 1 < prompt_len
        generated = ~forced & ~done
        token = jnp.where(forced, prompts[:, t + 1], jnp.where(done, PAD, drawn))
        token_logp_ = jnp.take_along_axis(logp, token[:, None], axis=-1)[:, 0]
        done = done | (generated & (token == EOS))
        return (cache, token, done), (token, jnp.where(generated, token_logp_, 0.0), generated)

    carry = (init_cache(model.config, batch, length), prompts[:, 0], jnp.zeros(batch, bool))
    _, (tokens, logp, generated) = jax.lax.scan(step, carry, jnp.arange(length - 1))
    return Completions(jnp.concatenate([prompts[:, :1], tokens.T], axis=1), logp.T, generated.T)
