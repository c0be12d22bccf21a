"""The algorithms, each a small module with the same policy-loss signature.

`make_algorithm(config)` returns the `Algorithm` record for `config.algo`. `REGISTRY` is
the one list of algorithms: each name is also the `TrainConfig` field holding its options
(`--ppo.*`, `--vaco.*`, ...).
"""

from __future__ import annotations

from jaxvaco.algos import impala, ppo, ppo_kl, spo, vaco
from jaxvaco.algos.common import Algorithm, Batch
from jaxvaco.config import ALGOS, TrainConfig

REGISTRY = {"ppo": ppo.make, "ppo_kl": ppo_kl.make, "spo": spo.make, "impala": impala.make,
            "vaco": vaco.make}
assert tuple(REGISTRY) == ALGOS, "jaxvaco.config.ALGOS must list the registry's algorithms"


def make_algorithm(config: TrainConfig) -> Algorithm:
    return REGISTRY[config.algo](config)


__all__ = ["REGISTRY", "Algorithm", "Batch", "make_algorithm"]
