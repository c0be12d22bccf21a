"""The algorithms jaxvaco knows: the built-in ones (every module of this package that
declares a `SPEC`: a new one is one new file), those other packages declare under the
entry-point group `jaxvaco.algorithms`, and those registered by a call
(`jaxvaco.register_algorithm`, which also rebuilds `TrainConfig`'s option groups).

An entry point names an `AlgorithmSpec`, e.g. in a plugin's pyproject.toml:

    [project.entry-points."jaxvaco.algorithms"]
    ppo_tanh = "my_package.ppo_tanh:SPEC"
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from importlib.metadata import entry_points
from pathlib import Path

from jaxvaco.core.algos.spec import AlgorithmSpec

ENTRY_POINT_GROUP = "jaxvaco.algorithms"
RESERVED = ("lag", "eval", "distributed", "asynchronous")
"""Option groups of `TrainConfig` that an algorithm's name may not shadow."""

_SPECS: dict[str, AlgorithmSpec] = {}


def add(spec: AlgorithmSpec) -> None:
    """Register `spec` (the same object again is a no-op); a name taken by another
    algorithm or by an option group raises ValueError."""
    if not isinstance(spec, AlgorithmSpec):
        raise TypeError(f"expected an AlgorithmSpec, got {type(spec).__name__}")
    known = _SPECS.get(spec.name)
    if known is spec:
        return
    if known is not None or spec.name in RESERVED:
        raise ValueError(f"an algorithm or option group named {spec.name!r} exists already")
    _SPECS[spec.name] = spec


def built_in() -> list[AlgorithmSpec]:
    """The `SPEC` of every module of this package that declares one, by module name."""
    modules = [importlib.import_module(f"{__package__}.{info.name}")
               for info in pkgutil.iter_modules([str(Path(__file__).parent)])]
    return [module.SPEC for module in modules if isinstance(getattr(module, "SPEC", None),
                                                            AlgorithmSpec)]


def load_entry_points() -> None:
    """Register every algorithm declared under `ENTRY_POINT_GROUP`; one that fails to load is
    reported in one line on stderr and left out, so a broken plugin does not stop jaxvaco."""
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            add(point.load())
        except Exception as error:  # noqa: BLE001 - any failure of foreign code
            print(f"jaxvaco: warning: algorithm plugin {point.name} = {point.value} was not "
                  f"loaded: {type(error).__name__}: {error}", file=sys.stderr)


def algorithms() -> dict[str, AlgorithmSpec]:
    """{name: spec} of every registered algorithm, built-in ones first."""
    return dict(_SPECS)


def fraction_metrics() -> dict[str, str]:
    """{algorithm: the metric of the share of samples its objective acts on} (PPO's clip
    removes their gradient, SPO's ratio lies outside the ε band, VACO's filter drops them),
    for the algorithms that have one."""
    return {name: spec.fraction for name, spec in _SPECS.items() if spec.fraction}


def spec_of(name: str) -> AlgorithmSpec | None:
    """The registered algorithm `name`, or None."""
    return _SPECS.get(name)


for _spec in built_in():
    add(_spec)
load_entry_points()
