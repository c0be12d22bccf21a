"""Fingerprints of short, seeded LLM RL runs (GRPO, token-level VACO): issue 12's guard
for the LLM trainer (`jaxvaco.llm.train`).

`python tests/llm_fingerprint.py` records, for every configuration in `CASES`, the metrics
of the trainer's chunk (`jaxvaco.llm.train.chunk`; `make_rl(...).chunk` when recorded)
summed over two chunks of two generation steps, the greedy
accuracy that `chunk` reports after each (on the 16 training problems: a held-out set
would be all zeros at this size), and Σ|θ| of the final parameters into
`tests/data/llm_fingerprint.json`; the shared supervised warm start (its loss summed over
the steps, Σ|θ|) is recorded as `WARM_START`. Recorded with XLA's optimisations mostly
off, as the test runs. `tests/test_llm_fingerprint.py` reruns the cases on the code as it is and
compares.

The file was recorded on the code *before* the LLM trainer's refactor, commit ca01e38
(= 3491289^: before the shared loss primitives 3491289, the lag interface 1dbc321, the loss
options 6756f9f, the new RLConfig defaults d1f877e, the metric renames 270172b and the
K → lag_delay rename c7e5f14), by

    git worktree add /tmp/llm_old 3491289^
    PYTHONPATH=/tmp/llm_old python tests/llm_fingerprint.py

It is run as a script (not `-m tests.…`) and imports nothing from `tests`, so that the
`jaxvaco` it measures is the one on PYTHONPATH. The cases are written with the options of
that code: every RLConfig field it had is pinned in `BASE` (the defaults changed on
purpose in d1f877e), in its spelling ("behavior"); `translate` maps them onto
today's options, and `LLM_OPTION` maps each flat RLConfig name onto its place in today's
`LLMConfig` (issue 36).

The size is chosen so that each case runs in seconds on a CPU and the trust regions act:
a 1-layer, d = 32 transformer after 60 SFT steps (lr 3e-3) on 16 level-1 problems
solves some of them when sampling (mixed groups, Â ≠ 0), and 2 epochs × 2 minibatches at
lr 3e-3 move the policy far enough for GRPO's clip and VACO's filter to remove tokens.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxvaco.core.config import from_table
from jaxvaco.llm import task
from jaxvaco.llm.config import LLMConfig
from jaxvaco.llm.evaluation import accuracy
from jaxvaco.llm.model import ModelConfig, Transformer
from jaxvaco.llm.train import chunk, init_state, warm_start

PATH = Path(__file__).parent / "data" / "llm_fingerprint.json"
WARM_START = "warm_start"
MODEL = ModelConfig(len(task.VOCAB), task.SEQ_LEN, d_model=32, num_layers=1, num_heads=2)
SFT_STEPS, SFT_BATCH, SFT_LR = 60, 16, 3e-3
CHUNKS, STEPS_PER_CHUNK = 2, 2

# Every field of the recorded code's RLConfig, in its spelling.
BASE = dict(algo="grpo", num_prompts=4, group_size=4, epochs=2, minibatches=2,
            learning_rate=3e-3, max_grad_norm=1.0, temperature=1.0, clip_eps=0.1,
            kl_coef=0.0, delta=0.05, vaco_filter="batch", vaco_anchor="learner",
            lag_mode="fixed", max_delay=2)

# name -> (K = the run's lag in generation steps, changes to BASE).
CASES = {
    "grpo": (2, {}),
    "grpo_no_lag": (0, {}),
    "grpo_kl": (2, {"kl_coef": 0.1}),
    "vaco": (2, {"algo": "vaco"}),
    "vaco_no_lag": (0, {"algo": "vaco"}),
    "vaco_behaviour": (2, {"algo": "vaco", "vaco_anchor": "behavior"}),
    "vaco_sample": (2, {"algo": "vaco", "vaco_filter": "sample", "delta": 0.1}),
}


def problems() -> task.Problems:
    """16 level-1 problems: the SFT set, the RL prompts and the accuracy set."""
    pool = task.train_pool(64, 0, task.test_sets(size=4))
    return jax.tree.map(lambda x: x[np.flatnonzero(np.asarray(pool.level) == 1)[:16]], pool)


def warm_started(pool: task.Problems) -> tuple:
    """(params after the SFT warm start, its loss per step): the start of every case and
    the KL reference."""
    model = Transformer(MODEL)
    params = model.init(jax.random.key(0), jnp.zeros((1, task.SEQ_LEN), jnp.int32))
    return jax.jit(lambda p: warm_start(model, p, pool, jax.random.key(1), SFT_STEPS,
                                        SFT_BATCH, SFT_LR))(params)


# 304b295: one spelling, "behaviour".
SPELLING = {("vaco_anchor", "behavior"): "behaviour"}
# 6756f9f: loss options added with the recorded code's behaviour as their value (pinned
# here, not left to the defaults, which d1f877e showed can change).
OLD_BEHAVIOUR = {"adv_scale": "std", "loss_agg": "token", "warmup_updates": 0,
                 # issue 15: the anchor-π_T options; the recorded code had GRPO on β and
                 # VACO's π_T anchor without the importance weight.
                 "grpo_anchor": "behaviour", "vaco_weight": "none", "rho_bar": 1.0}


def translate(fields: dict) -> dict:
    out = {key: SPELLING.get((key, value), value) for key, value in fields.items()}
    assert not set(OLD_BEHAVIOUR) & set(out)
    return {**out, **OLD_BEHAVIOUR}


LLM_OPTION = {"clip_eps": "grpo.clip_eps", "grpo_anchor": "grpo.anchor",
              "delta": "vaco.delta", "vaco_filter": "vaco.filter",
              "vaco_anchor": "vaco.anchor", "vaco_weight": "vaco.weight",
              "lag_mode": "lag.mode", "max_delay": "lag.max_delay"}
"""RLConfig's flat names -> their dotted path in LLMConfig (the others kept their name)."""
TRAINING_OPTIONS = ("algo", "num_prompts", "group_size", "epochs", "minibatches",
                    "learning_rate", "max_grad_norm", "warmup_updates", "temperature",
                    "kl_coef", "rho_bar", "adv_scale", "loss_agg", *LLM_OPTION.values())
"""The LLMConfig options that change what a chunk computes: each case pins every one."""


def make_config(name: str) -> tuple[LLMConfig, int]:
    """(LLMConfig of case `name`, K): `translate` maps the recorded options to today's
    flat names, `LLM_OPTION` those onto LLMConfig's groups."""
    lag_delay, changes = CASES[name]
    fields = translate({**BASE, **changes})
    table: dict = {"lag": {"delays": [lag_delay]}}
    for key, value in fields.items():
        *group, option = LLM_OPTION.get(key, key).split(".")
        (table.setdefault(group[0], {}) if group else table)[option] = value
    missing = set(TRAINING_OPTIONS) - {LLM_OPTION.get(k, k) for k in fields}
    assert not missing, f"LLMConfig options left at their defaults: {sorted(missing)}"
    return from_table(LLMConfig, table, name), lag_delay


def abs_sum(params) -> float:
    return float(sum(np.abs(np.asarray(x, np.float64)).sum() for x in jax.tree.leaves(params)))


def fingerprint(config, lag_delay: int, pool: task.Problems, params) -> dict:
    """Metrics summed over CHUNKS × STEPS_PER_CHUNK generation steps, the greedy accuracy
    on `pool` summed over the chunks, and Σ|θ| of the final params."""
    model = Transformer(MODEL)
    state = init_state(config, params, jax.random.key(3))
    steps = jax.jit(lambda s, k, pool, ref: chunk(model, config, s, k, pool, ref,
                                                  STEPS_PER_CHUNK))
    greedy = jax.jit(lambda p, test: accuracy(model, p, test))
    totals: dict[str, float] = {}
    for _ in range(CHUNKS):
        state, metrics = steps(state, jnp.int32(lag_delay), pool, params)
        metrics = {k: np.asarray(v, np.float64).sum() for k, v in metrics.items()}
        for level, value in zip(task.LEVELS, np.asarray(greedy(state.params, pool)),
                                strict=True):
            metrics[f"accuracy/level{level}"] = value
        for key, value in metrics.items():
            totals[key] = totals.get(key, 0.0) + float(value)
    totals["params/abs_sum"] = abs_sum(state.params)
    return totals


def warm_start_fingerprint(params, loss) -> dict:
    return {"loss_sum": float(np.asarray(loss, np.float64).sum()),
            "params/abs_sum": abs_sum(params)}


def main(names: list[str]) -> None:
    import jaxvaco
    print("recording on", jaxvaco.__file__)
    # As the test runs (conftest's fast_compile): XLA's optimisation level changes float
    # rounding, which Adam's normalised steps carry into the sums' fourth digit.
    jax.config.update("jax_disable_most_optimizations", True)
    recorded = json.loads(PATH.read_text()) if PATH.exists() else {}
    pool = problems()
    params, loss = warm_started(pool)
    recorded[WARM_START] = warm_start_fingerprint(params, loss)
    for name in names or list(CASES):
        config, lag_delay = make_config(name)
        recorded[name] = fingerprint(config, lag_delay, pool, params)
        print(name, recorded[name])
    PATH.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
