"""VACO for language-model reasoning (docs/concepts/spec.md §5) at a size a CPU can train.

- `config`:     `LLMConfig`, the typed configuration (choices as Literals, option groups).
- `task`:       synthetic arithmetic word problems with verifiable answers, the tokenizer,
                the reward parser and the fixed held-out sets by difficulty.
- `model`:      a small decoder-only transformer with a KV cache, and its jitted sampler.
- `losses`:     GRPO's clipped token surrogate and token-level VACO, with group advantages.
- `train`:      the supervised warm start and RL under generation lag as module-level
                stages (generate, policy_loss, update, iteration, train_step, chunk), and
                `make_llm_train`, the host loop's `LoopTrainer` of a config's runs.
- `evaluation`: held-out greedy and sampled accuracy per difficulty level.
- `runner`:     `run(config)`, the runs in a run folder through the shared host loop.
"""


def run(*args, **kwargs):
    """`jaxvaco.llm.runner.run` (imported on first use: it loads JAX)."""
    from jaxvaco.llm.runner import run as _run

    return _run(*args, **kwargs)
