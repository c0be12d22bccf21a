"""Why does the LLM RL stage fail at K = 0, and what makes it work (issue 15, item 1)?

One script for the small measurements in experiments/results/llm_rl/notes.md:

    python experiments/llm_rl.py diagnose                 # the warm start's reward signal
    python experiments/llm_rl.py rl --learning-rate 3e-4 ...   # one RL configuration

`diagnose` measures, on the held-out set, greedy and sampled accuracy per level at a few
temperatures and the fraction of groups of G samples whose rewards are not all equal
(the only groups with a non-zero GRPO advantage). `rl` trains K = 0 RL from the warm start
(seeds vmapped) and prints held-out greedy and sampled accuracy every --eval-every steps,
appending one row per evaluation to --csv. The warm start (same as experiments/llm_lag.py:
pool of 20000, 64 × `--warm-start-steps` Adam steps at lr 1e-3) is cached on disk.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import time
from pathlib import Path

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

from jaxvaco.core.primitives import masked_mean
from jaxvaco.llm import task, train
from jaxvaco.llm.config import FRACTIONS, LLMConfig, LLMLagConfig
from jaxvaco.llm.evaluation import accuracy, sampled_accuracy
from jaxvaco.llm.model import ModelConfig, Transformer, sample
from jaxvaco.llm.train import warm_start

CACHE = Path("/tmp/jaxvaco_llm_rl_cache")


def setup(args):
    test = task.test_sets(args.test_size)
    pool = task.train_pool(20000, 0, test)
    model = Transformer(ModelConfig(len(task.VOCAB), task.SEQ_LEN))
    params = model.init(jax.random.key(0), pool.sequences[:1])
    path = CACHE / f"warm_{args.warm_start_steps}.msgpack"
    if path.exists():
        params = jax.tree.map(jnp.asarray,
                              flax.serialization.from_bytes(params, path.read_bytes()))
    else:
        start = time.time()
        params, _ = jax.jit(lambda p: warm_start(model, p, pool, jax.random.key(1),
                                                 args.warm_start_steps, 64, 1e-3))(params)
        CACHE.mkdir(exist_ok=True)
        path.write_bytes(flax.serialization.to_bytes(params))
        print(f"warm start {args.warm_start_steps} steps: {time.time() - start:.0f}s")
    return model, params, pool, test


def diagnose(args):
    model, params, pool, test = setup(args)
    greedy = np.asarray(accuracy(model, params, test))
    print(f"greedy acc by level {np.round(greedy, 3)} mean {greedy.mean():.3f}")
    g = args.group_size
    idx = jnp.repeat(jnp.arange(test.answers.shape[0]), g)
    for tau in args.temperatures:
        out = jax.jit(lambda p, k, t=tau: sample(model, p, test.prompts[idx], test.prompt_len[idx],
                                                  k, t))(params, jax.random.key(7))
        r = np.asarray(task.reward(out.tokens, test.prompt_len[idx], test.answers[idx]))
        r = r.reshape(-1, g)
        lv = np.asarray(test.level)
        mixed = r.std(1) > 0
        length = np.asarray(out.generated.sum(-1)).mean()
        ent = -float(masked_mean(out.logp, out.generated))
        print(f"tau {tau}: sampled acc by level "
              f"{np.round([r[lv == lvl].mean() for lvl in task.LEVELS], 3)} mean {r.mean():.3f}; "
              f"groups (G={g}) with mixed rewards by level "
              f"{np.round([mixed[lv == lvl].mean() for lvl in task.LEVELS], 3)} "
              f"mean {mixed.mean():.3f};"
              f" pass@{g} {np.round([(r.max(1))[lv == lvl].mean() for lvl in task.LEVELS], 3)}; "
              f"mean length {length:.1f}, -logp/token {ent:.3f}")


BASE = LLMConfig(epochs=1, lag=LLMLagConfig(delays=(0,), max_delay=0))
"""What `rl` starts from: K = 0 and one update per generation batch (the notes' setting;
LLMConfig's default is the lag comparison's E = 2); the flags set LLMConfig's top-level
options."""
OPTIONS = [f for f in dataclasses.fields(LLMConfig)
           if not dataclasses.is_dataclass(f.default) and type(f.default) in (int, float, str)
           and f.name not in ("seed", "num_seeds", "num_steps", "run_name", "results_dir")]


def rl(args):
    model, params, pool, test = setup(args)
    overrides = {f.name: getattr(args, f.name) for f in OPTIONS
                 if getattr(args, f.name) is not None}
    config = dataclasses.replace(BASE, **overrides)
    seeds = args.seeds
    keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.key(args.seed0), s))(
        jnp.arange(seeds))
    states = jax.vmap(lambda k: train.init_state(config, params, k))(keys)
    chunk = jax.jit(jax.vmap(lambda s: train.chunk(model, config, s, jnp.int32(0), pool, params,
                                                   args.eval_every)))
    greedy = jax.jit(jax.vmap(lambda p: accuracy(model, p, test)))
    samp = jax.jit(jax.vmap(lambda p, k: sampled_accuracy(model, p, test, k, 1.0, args.samples),
                            (0, None)))
    greedy0 = np.asarray(accuracy(model, params, test))
    sampled0 = np.asarray(samp(jax.tree.map(lambda x: x[None], params), jax.random.key(99)))[0]
    print(f"config {config}")
    print(f"step 0: greedy {greedy0.mean():.3f} {np.round(greedy0, 3)} "
          f"sampled {sampled0.mean():.3f} {np.round(sampled0, 3)}", flush=True)
    rows = [{"label": args.label, "seed": args.seed0 + s, "step": 0, "greedy": greedy0.mean(),
             "sampled": sampled0.mean(), **{f"greedy/l{lvl}": greedy0[i] for i, lvl in
                                            enumerate(task.LEVELS)}}
            for s in range(seeds)]
    append_rows(args.csv, rows)
    rows, start = [], time.time()
    for c in range(args.steps // args.eval_every):
        states, metrics = jax.block_until_ready(chunk(states))
        acc = np.asarray(greedy(states.params))
        sacc = np.asarray(samp(states.params, jax.random.key(99)))
        step = (c + 1) * args.eval_every
        m = {k: float(np.mean(v)) for k, v in metrics.items()}
        print(f"step {step} ({time.time() - start:.0f}s): greedy {acc.mean():.3f} "
              f"{np.round(acc.mean(0), 3)} per seed {np.round(acc.mean(1), 3)}; sampled "
              f"{sacc.mean():.3f} {np.round(sacc.mean(0), 3)}; train reward {m['reward']:.3f}"
              f" mixed {m.get('groups/mixed', float('nan')):.2f} len {m['length']:.1f} "
              f"entropy {m.get('entropy', float('nan')):.3f} tv/fwd {m['tv/forward']:.4f} "
              f"{FRACTIONS[config.algo]} {m[FRACTIONS[config.algo]]:.4f}", flush=True)
        rows += [{"label": args.label, "seed": args.seed0 + s, "step": step,
                  "greedy": acc[s].mean(), "sampled": sacc[s].mean(),
                  **{f"greedy/l{lvl}": acc[s, i] for i, lvl in enumerate(task.LEVELS)}}
                 for s in range(seeds)]
        append_rows(args.csv, rows)
        rows = []
    print(f"total {time.time() - start:.0f}s")


def append_rows(path: Path | None, rows: list[dict]) -> None:
    """Append rows to the CSV now, so a run cut short keeps its evaluations."""
    if path is None or not rows:
        return
    new = not path.exists()
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        if new:
            w.writeheader()
        w.writerows(rows)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=("diagnose", "rl"))
    p.add_argument("--warm-start-steps", type=int, default=600)
    p.add_argument("--test-size", type=int, default=128)
    p.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 0.7])
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--seed0", type=int, default=0)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--label", default="")
    p.add_argument("--csv", type=Path, default=None)
    for f in OPTIONS:
        p.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=None)
    args = p.parse_args()
    diagnose(args) if args.mode == "diagnose" else rl(args)


if __name__ == "__main__":
    main()
