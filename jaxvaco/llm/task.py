"""Synthetic arithmetic reasoning with verifiable answers: the GSM8K stand-in [ours].

A problem is a short word problem about one quantity that changes in d steps
(the difficulty, d ∈ {1, 2, 3}); the worked solution writes one equation per change and
ends with the final answer:

    prompt:    <bos> ann has 7 pens . gets 3 more . buys 2 packs of 4 . how many pens ?
    solution:  7 + 3 = 1 0 . 2 * 4 = 8 . 1 0 + 8 = 1 8 . ans 1 8 <eos>

Steps: "gets n more" (x + n), "loses n" (x − n), "doubles" / "triples" (x·2, x·3) and, at
most once per problem, "buys a packs of b" (a·b, then x + a·b). Every intermediate value
stays in 1..99. Numbers are written one digit per token, so the vocabulary is 39 tokens.

The reward parses the completion: it must contain "ans", then 1 to 4 digits, then <eos>;
the reward is 1 if that number equals the answer, else 0. Any other token sequence
(no <eos>, no "ans", non-digits after the last "ans", ...) parses as malformed and gets 0.
The parser is pure JAX on token ids, so it runs inside the jitted RL step.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

NAMES = ("ann", "bob", "eve", "tom")
ITEMS = ("apples", "pens", "coins", "cards")
WORDS = ("has", "gets", "more", "loses", "doubles", "triples", "buys", "packs", "of", "how",
         "many", "ans")
SYMBOLS = ("+", "-", "*", "=", ".", "?")
DIGITS = tuple(str(i) for i in range(10))
VOCAB = ("<pad>", "<bos>", "<eos>") + DIGITS + SYMBOLS + WORDS + NAMES + ITEMS
TOKEN_ID = {token: i for i, token in enumerate(VOCAB)}
PAD, BOS, EOS = 0, 1, 2
DIGIT0 = TOKEN_ID["0"]
ANS = TOKEN_ID["ans"]
LEVELS = (1, 2, 3)
PROMPT_LEN = 24  # longest: "<bos> ann has 7 pens ." 6 + steps 6 + 4 + 4 + "how many pens ?" 4
COMPLETION_LEN = 40  # longest: packs 16 + 8 + 8 + "ans 1 8 <eos>" 4 = 36, rounded up
SEQ_LEN = PROMPT_LEN + COMPLETION_LEN
MAX_ANSWER_DIGITS = 4


def encode(text: str) -> list[int]:
    """Token ids of a space-separated text; numbers are split into one token per digit."""
    return [TOKEN_ID[t] for word in text.split() for t in (word if word.isdigit() else [word])]


def decode(ids) -> str:
    """Text of token ids, digits of one number joined, padding dropped."""
    words: list[str] = []
    for token in (VOCAB[i] for i in np.asarray(ids) if i != PAD):
        if token.isdigit() and words and words[-1].isdigit():
            words[-1] += token
        else:
            words.append(token)
    return " ".join(words)


def _step(rng: np.random.Generator, x: int, packs_used: bool) -> tuple[str, list[str], int]:
    """One random change of the quantity x: (sentence, solution equations, new x)."""
    options = ["add"] + ["sub"] * (x > 1) + ["mul"] * (2 * x <= 99) + ["packs"] * (not packs_used)
    kind = options[rng.integers(len(options))]
    if kind == "add":
        n = int(rng.integers(1, min(9, 99 - x) + 1))
        return f"gets {n} more .", [f"{x} + {n} = {x + n} ."], x + n
    if kind == "sub":
        n = int(rng.integers(1, min(9, x - 1) + 1))
        return f"loses {n} .", [f"{x} - {n} = {x - n} ."], x - n
    if kind == "mul":
        k = 3 if 3 * x <= 99 and rng.random() < 0.5 else 2
        return f"{('doubles', 'triples')[k - 2]} .", [f"{x} * {k} = {x * k} ."], x * k
    a, b = int(rng.integers(2, 5)), int(rng.integers(2, 6))
    equations = [f"{a} * {b} = {a * b} .", f"{x} + {a * b} = {x + a * b} ."]
    return f"buys {a} packs of {b} .", equations, x + a * b


def make_problem(rng: np.random.Generator, level: int) -> tuple[str, str, int]:
    """(prompt, worked solution, answer) of a `level`-step problem."""
    name, item = NAMES[rng.integers(len(NAMES))], ITEMS[rng.integers(len(ITEMS))]
    x = int(rng.integers(2, 10))
    sentences, equations, packs_used = [f"<bos> {name} has {x} {item} ."], [], False
    for _ in range(level):
        sentence, eqs, x = _step(rng, x, packs_used)
        packs_used |= sentence.startswith("buys")
        sentences.append(sentence)
        equations.extend(eqs)
    sentences.append(f"how many {item} ?")
    return " ".join(sentences), " ".join(equations) + f" ans {x} <eos>", x


class Problems(NamedTuple):
    """A set of n problems as padded token arrays."""

    prompts: jax.Array  # int32 [n, SEQ_LEN]: prompt tokens, then <pad>
    sequences: jax.Array  # int32 [n, SEQ_LEN]: prompt + worked solution, then <pad>
    prompt_len: jax.Array  # int32 [n]
    answers: jax.Array  # int32 [n]
    level: jax.Array  # int32 [n]


def _pack(rows: list[tuple[str, str, int, int]]) -> Problems:
    n = len(rows)
    prompts = np.full((n, SEQ_LEN), PAD, np.int32)
    sequences = np.full((n, SEQ_LEN), PAD, np.int32)
    prompt_len = np.zeros(n, np.int32)
    for i, (prompt, solution, _, _) in enumerate(rows):
        p, s = encode(prompt), encode(solution)
        assert len(p) <= PROMPT_LEN and len(s) <= COMPLETION_LEN, (prompt, solution)
        prompts[i, : len(p)] = p
        sequences[i, : len(p) + len(s)] = p + s
        prompt_len[i] = len(p)
    answers = np.array([r[2] for r in rows], np.int32)
    level = np.array([r[3] for r in rows], np.int32)
    return Problems(*(jnp.asarray(a) for a in (prompts, sequences, prompt_len, answers, level)))


def test_sets(size: int = 128, seed: int = 12345) -> Problems:
    """The fixed held-out sets: `size` problems at each level of LEVELS, concatenated."""
    rng = np.random.default_rng(seed)
    return _pack([(*make_problem(rng, lv), lv) for lv in LEVELS for _ in range(size)])


def train_pool(size: int, seed: int, held_out: Problems) -> Problems:
    """`size` problems of uniformly random level whose prompts are not in `held_out`."""
    rng = np.random.default_rng(seed)
    excluded = {tuple(int(t) for t in row) for row in np.asarray(held_out.prompts)}
    rows = []
    while len(rows) < size:
        level = LEVELS[rng.integers(len(LEVELS))]
        prompt, solution, answer = make_problem(rng, level)
        encoded = encode(prompt)
        if tuple(encoded + [PAD] * (SEQ_LEN - len(encoded))) not in excluded:
            rows.append((prompt, solution, answer, level))
    return _pack(rows)


def parse_answer(tokens: jax.Array, prompt_len: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(well_formed, value) of each completion; tokens [B, T], prompt_len [B].

    The completion is tokens[prompt_len:]. It is well formed when it has an <eos>, an
    "ans" before the first <eos>, and between the last such "ans" and that <eos> only
    1..MAX_ANSWER_DIGITS digits; value = that number (0 where malformed).
    """
    pos = jnp.arange(tokens.shape[-1])
    completion = pos >= prompt_len[:, None]
    is_eos = completion & (tokens == EOS)
    eos_at = jnp.argmax(is_eos, axis=-1)
    is_ans = completion & (pos < eos_at[:, None]) & (tokens == ANS)
    ans_at = tokens.shape[-1] - 1 - jnp.argmax(is_ans[:, ::-1], axis=-1)
    span = (pos > ans_at[:, None]) & (pos < eos_at[:, None])
    digit = tokens - DIGIT0
    is_digit = (digit >= 0) & (digit <= 9)
    length = span.sum(-1)
    well_formed = (is_eos.any(-1) & is_ans.any(-1) & (~span | is_digit).all(-1)
                   & (length >= 1) & (length <= MAX_ANSWER_DIGITS))
    place = jnp.clip(eos_at[:, None] - 1 - pos, 0, MAX_ANSWER_DIGITS - 1)
    value = jnp.sum(jnp.where(span & is_digit, digit * 10**place, 0), axis=-1)
    return well_formed, jnp.where(well_formed, value, 0)


def reward(tokens: jax.Array, prompt_len: jax.Array, answers: jax.Array) -> jax.Array:
    """R = 1 if the completion is well formed and its answer is correct, else 0. float [B]."""
    well_formed, value = parse_answer(tokens, prompt_len)
    return (well_formed & (value == answers)).astype(jnp.float32)
