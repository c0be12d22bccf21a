"""VACO for language-model reasoning (spec §5, issue #7) at a size a CPU can train.

- `task`:   synthetic arithmetic word problems with verifiable answers, the tokenizer,
            the reward parser and the fixed held-out sets by difficulty.
- `model`:  a small decoder-only transformer with a KV cache, and its jitted sampler.
- `losses`: GRPO's clipped token surrogate and token-level VACO, with group advantages.
- `train`:  the supervised warm start, RL under generation lag (one jitted step, the
            core's lag ring buffer), and held-out evaluation.
"""
