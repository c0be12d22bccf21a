"""jaxvaco: fully jitted on-policy RL in JAX for studying and beating policy lag.

Entry points: `TrainConfig` (typed configuration; `LLMConfig` for the LLM trainer,
`jaxvaco.llm.run`), `make_train` (pure jitted functions),
`run` (the host loop that trains, evaluates and writes results), `load_policy` (a trained
policy from a run directory or an export, to act with), `make_env` (batched,
auto-resetting copies of an environment by name).
"""

from jaxvaco.config import ConfigError, LLMConfig, TrainConfig

__version__ = "0.1.0"


def __getattr__(name):
    if name == "make_train":
        from jaxvaco.train import make_train

        return make_train
    if name == "run":
        from jaxvaco.runner import run

        return run
    if name == "make_env":
        from jaxvaco.envs import make_env

        return make_env
    if name == "load_policy":
        from jaxvaco.policy import load_policy

        return load_policy
    raise AttributeError(name)


__all__ = ["ConfigError", "LLMConfig", "TrainConfig", "load_policy", "make_env", "make_train",
           "run",
           "__version__"]
