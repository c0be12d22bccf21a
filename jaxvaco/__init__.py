"""jaxvaco: fully jitted on-policy RL in JAX for studying and beating policy lag.

Entry points: `TrainConfig` (typed configuration), `make_train` (pure jitted functions),
`run` (the host loop that trains, evaluates and writes results).
"""

import os

# XLA's CPU runtime can wedge: the host waits forever for a result while every worker
# sleeps. We hit it under heavy CPU load, at the first execution of a program, with async
# dispatch on and off. Single-threaded Eigen is the workaround reported for the same
# symptom in PyAutoLabs/PyAutoFit#1530 (12/12 runs passed with it, 2/16 without). XLA
# reads the flag when the CPU client is created, so this works if jaxvaco is imported
# before the first JAX computation; set the flag yourself in XLA_FLAGS to override.
if "xla_cpu_multi_thread_eigen" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_cpu_multi_thread_eigen=false").strip()

import jax  # noqa: E402

jax.config.update("jax_cpu_enable_async_dispatch", False)  # the same hang: jax-ml/jax#25861

from jaxvaco.config import ConfigError, TrainConfig  # noqa: E402

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
