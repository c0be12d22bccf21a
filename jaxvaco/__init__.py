"""jaxvaco: fully jitted on-policy RL in JAX for studying and beating policy lag.

Entry points: `TrainConfig` (typed configuration; `LLMConfig` for the LLM trainer,
`jaxvaco.llm.run`), `register_algorithm` (an `AlgorithmSpec` declared in your own code;
`jaxvaco.core.algos.spec`), `make_train` (pure jitted functions),
`run` (the host loop that trains, evaluates and writes results), `load_policy` (a trained
policy from a run directory or an export, to act with), `make_env` (batched,
auto-resetting copies of an environment by name).
"""

import importlib

from jaxvaco.core.errors import ConfigError
from jaxvaco.llm.config import LLMConfig

__version__ = "0.1.0"

LAZY = {"TrainConfig": "jaxvaco.core.config", "register_algorithm": "jaxvaco.core.config",
        "AlgorithmSpec": "jaxvaco.core.algos.spec", "make_train": "jaxvaco.core.train",
        "run": "jaxvaco.host.runner", "make_env": "jaxvaco.core.envs",
        "load_policy": "jaxvaco.host.policy"}
"""The names imported on first use, from their modules: they load JAX, and `python -m
jaxvaco` installs its signal handlers before that (`jaxvaco.cli.process`). `TrainConfig` is read
anew at each use: `register_algorithm` rebuilds it."""


def __getattr__(name):
    if name not in LAZY:
        raise AttributeError(f"module 'jaxvaco' has no attribute {name!r}")
    return getattr(importlib.import_module(LAZY[name]), name)


__all__ = ["AlgorithmSpec", "ConfigError", "LLMConfig", "TrainConfig", "load_policy",
           "make_env", "make_train", "register_algorithm", "run", "__version__"]
