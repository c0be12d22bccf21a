"""`RunsTrainer`: the RL trainer as the host loop drives it (`jaxvaco.host.session.LoopTrainer`),
the synchronous one that `jaxvaco.host.runner.run` builds and the asynchronous one
(`jaxvaco.host.asynchronous.trainer.AsyncTrainer`) extends."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxvaco.core.hparams import Hyperparams
from jaxvaco.core.train import TrainState
from jaxvaco.host.compiled import Compiled, evaluate_policy
from jaxvaco.host.rows import chunk_rows


@dataclasses.dataclass
class RunsTrainer:
    """The RL trainer as the host loop drives it (`jaxvaco.host.session.LoopTrainer`): the
    compiled programs with the runs' keys and hyperparameters bound."""

    compiled: Compiled
    keys: jax.Array
    hp: Hyperparams
    runs: list[dict]
    state_type: Any = None  # the state's ShapeDtypeStructs, when compiled ahead
    checked: tuple[Any, np.ndarray] | None = None  # the last chunk's state, params finite

    def prepare(self) -> None:
        self.state_type = self.compiled.compile_ahead(self.keys, self.hp)

    def init(self) -> TrainState:
        return self.compiled.init(self.keys, self.hp)

    def abstract_state(self) -> Any:
        return self.state_type or jax.eval_shape(self.compiled.init, self.keys, self.hp)

    def chunk(self, state: TrainState, n: int) -> tuple[TrainState, dict[str, np.ndarray]]:
        state, sums, finite = self.compiled.chunk(state, self.hp, jnp.int32(n))
        self.checked = (state, np.asarray(finite))
        return state, jax.tree.map(np.asarray, sums)

    def finite(self, state: TrainState) -> np.ndarray:
        """[R] bools: the chunk's own check for the state it returned; any other state is
        checked on the host (no program is compiled for it)."""
        if self.checked is not None and self.checked[0] is state:
            return self.checked[1]
        return host_finite(state.params)

    def evaluate(self, state: TrainState, iteration: int) -> dict[str, np.ndarray]:
        return evaluate_policy(self.compiled, state, iteration, self.runs)

    def rows(self, sums: dict[str, np.ndarray], n: int, info: dict) -> list[dict]:
        return chunk_rows(sums, n, info, self.runs)

    def close(self) -> None:
        """Nothing to release (the asynchronous trainer stops its threads here)."""


def host_finite(params: Any) -> np.ndarray:
    """[R] bools: True where every parameter of the run is finite (numpy, on the host)."""
    leaves = [np.asarray(x) for x in jax.tree.leaves(params)]
    return np.all([np.isfinite(x.reshape(len(x), -1)).all(axis=1) for x in leaves], axis=0)
