"""The algorithms, each a small module with the same policy-loss signature.

`make_algorithm(config)` returns the `Algorithm` record for `config.algo`.
"""

from __future__ import annotations

from jaxvaco.algos import impala, ppo, ppo_kl, spo, vaco
from jaxvaco.algos.common import Algorithm, Batch
from jaxvaco.config import TrainConfig

_BUILDERS = {"ppo": ppo.make, "ppo_kl": ppo_kl.make, "spo": spo.make, "impala": impala.make,
             "vaco": vaco.make}


def make_algorithm(config: TrainConfig) -> Algorithm:
    return _BUILDERS[config.algo](config)


__all__ = ["Algorithm", "Batch", "make_algorithm"]
