"""An algorithm as one object: `AlgorithmSpec` declares everything the library reads about it.

    options   its option group (`--NAME.*`), a frozen dataclass whose field defaults are its
              tuned values
    traced    the options that are traced hyperparameters: leaves of `Hyperparams.algo`,
              sweepable in a grid and changeable on resume, so one program serves them all
    tuned     its values of the shared options (learning rate, entropy, epochs,
              minibatches, ε), with their provenance
    build     options -> `Algorithm`: critic × estimator × anchor × policy loss × state
    fraction  the metric of the share of samples its objective acts on, if any
    check     (options, flag) -> the problems with them, each one line naming the flag

ALGOS, the tuned table, the grid's names, the CLI group, the validation of its options and
the sweep's critic comparison are all read from these objects (`jaxvaco.core.algos.registry`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from jaxvaco.core.algos.common import Algorithm
from jaxvaco.core.hparams import LAG, SHARED

SHARED_TUNED = ("learning_rate", "ent_coef", "update_epochs", "num_minibatches", "clip_coef")
"""The shared `TrainConfig` options whose default (None) is the running algorithm's tuned
value (`AlgorithmSpec.tuned`)."""
UNUSED_CLIP = 0.2
"""ε (`--clip-coef`) of an algorithm that has no clip: a placeholder it never reads."""


def no_problems(options: Any, flag: Callable[[str], str]) -> list[str]:
    return []


@dataclasses.dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm, declared once (module docstring)."""

    name: str
    """The `--algo` value and the name of its option group (`--NAME.*`): an identifier."""
    options: type
    """Frozen dataclass of its own options; every field has a default (its tuned value)."""
    build: Callable[[Any], Algorithm]
    """options -> the `Algorithm` record the trainer runs."""
    tuned: Mapping[str, float | int]
    """Its values of `SHARED_TUNED` (all but clip_coef are required: an algorithm without a
    clip leaves it out and runs with `UNUSED_CLIP`)."""
    provenance: str
    """Where `tuned` and the options' defaults come from (a search, a paper, ...)."""
    traced: tuple[str, ...] = ()
    """Float fields of `options` held as arrays in `Hyperparams.algo` (sweepable)."""
    tuned_options: tuple[str, ...] = ()
    """Fields of `options` whose defaults the tuning chose (a run that changes one of them
    no longer runs the algorithm as tuned)."""
    fraction: str | None = None
    """Name of the metric: the share of samples the objective clips, filters or penalises."""
    check: Callable[[Any, Callable[[str], str]], list[str]] = no_problems
    """(options, flag) -> one message per problem, naming the option by `flag(field)`."""

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"algorithm name {self.name!r} must be a Python identifier")
        if not dataclasses.is_dataclass(self.options):
            raise TypeError(f"{self.name}: options must be a dataclass type")
        fields = {f.name: f for f in dataclasses.fields(self.options)}
        missing = [n for n in SHARED_TUNED[:-1] if n not in self.tuned]
        unknown = [n for n in self.tuned if n not in SHARED_TUNED]
        untraceable = [n for n in (*self.traced, *self.tuned_options) if n not in fields]
        shadowing = [n for n in self.traced if n in (*SHARED, LAG)]
        if missing or unknown or untraceable or shadowing:
            raise ValueError(f"{self.name}: tuned lacks {missing}, has unknown {unknown}; "
                             f"traced or tuned_options name non-fields {untraceable}; traced "
                             f"names shared hyperparameters {shadowing}")

    @property
    def uses_clip(self) -> bool:
        """True when ε (`--clip-coef`) is one of its tuned options."""
        return "clip_coef" in self.tuned

    def tuned_value(self, name: str) -> float | int:
        """The tuned value of shared option `name` (ε of an unclipped one: `UNUSED_CLIP`)."""
        return self.tuned.get(name, UNUSED_CLIP)

    def runs_as_tuned(self, options: Any) -> bool:
        """True when `options` keep the tuned defaults of `tuned_options`."""
        defaults = self.options()
        return all(getattr(options, n) == getattr(defaults, n) for n in self.tuned_options)

    def flag(self, field: str) -> str:
        """The command-line flag of one of its options: delta -> --vaco.delta."""
        return f"--{self.name}.{field}".replace("_", "-")

    def problems(self, options: Any) -> list[str]:
        """What is wrong with `options`, one line each (empty when they are valid)."""
        return self.check(options, self.flag)

    def traced_values(self, options: Any) -> dict[str, float]:
        """{traced name: value} of `options`."""
        return {name: getattr(options, name) for name in self.traced}

    def learner_critic(self, options: Any) -> bool:
        """True when its advantages come from the learner's critic (recomputed once per
        iteration, or at every minibatch), not from the values recorded by the actors."""
        return self.build(options).critic in ("learner", "current")
