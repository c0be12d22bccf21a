"""jaxvaco: fully jitted on-policy RL in JAX for studying and beating policy lag.

Entry points: `TrainConfig` (typed configuration), `make_train` (pure jitted functions),
`run` (the host loop that trains, evaluates and writes results).
"""

import jax

from jaxvaco.config import ConfigError, TrainConfig

# Run CPU computations inline instead of dispatching them asynchronously. We saw rare,
# load-dependent hangs (the host waiting forever on a chunk's result, CPU idle), the
# symptom of jax-ml/jax#25861, whose reported workaround this is. The host loop blocks on
# every chunk anyway, so nothing is lost. It takes effect if the CPU client is not yet
# created, i.e. when jaxvaco is imported before the first JAX computation.
jax.config.update("jax_cpu_enable_async_dispatch", False)

__version__ = "0.1.0"


def __getattr__(name):
    if name == "make_train":
        from jaxvaco.train import make_train

        return make_train
    if name == "run":
        from jaxvaco.runner import run

        return run
    raise AttributeError(name)


__all__ = ["ConfigError", "TrainConfig", "make_train", "run", "__version__"]
