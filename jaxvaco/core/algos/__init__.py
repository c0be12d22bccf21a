"""The algorithms: each one module declaring one `AlgorithmSpec` (`jaxvaco.core.algos.spec`).

`make_algorithm(config)` builds the `Algorithm` record of `config.algo` from its options;
`jaxvaco.core.algos.registry` holds the known algorithms (built-in, entry points, registered).
A plugin imports what it builds on from the submodules (`jaxvaco.core.algos.spec`, `.common`,
`.ppo`, ...): its entry point is loaded while this package is being imported.
"""

from __future__ import annotations

from jaxvaco.core.algos.common import Algorithm, Batch, EstimateConfig
from jaxvaco.core.algos.registry import algorithms, spec_of
from jaxvaco.core.algos.spec import AlgorithmSpec


def make_algorithm(config) -> Algorithm:
    """The record of `config.algo`, built from its option group `config.<algo>`."""
    return spec_of(config.algo).build(getattr(config, config.algo))


__all__ = ["Algorithm", "AlgorithmSpec", "Batch", "EstimateConfig", "algorithms",
           "make_algorithm", "spec_of"]
