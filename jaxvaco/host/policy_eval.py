"""Evaluate a trained policy as its run did, and keep one episode to render.

`evaluate_runs` is what `jaxvaco eval` computes: the runner's own evaluation program
(`jaxvaco.host.compiled.Compiled.evaluate`, vmapped over every run of the directory) with the
runner's keys (`jaxvaco.host.compiled.eval_keys`), so with the run's episode count it reproduces
the run's evaluation at that checkpoint bit for bit. `record_episode` keeps the states of
one evaluation episode for `jaxvaco.host.video`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from jaxvaco.core.config import DistributedConfig, TrainConfig
from jaxvaco.core.normalize import RunningMeanStd, init_running_stats
from jaxvaco.host.compilation import compiler_options
from jaxvaco.host.policy import Policy, source_state
from jaxvaco.host.policy_source import Source
from jaxvaco.host.run_folder import RunFolder, read_rows


def evaluation_config(config: TrainConfig, episodes: int) -> TrainConfig:
    """The run's config for evaluating on one device with `episodes` episodes per run."""
    return dataclasses.replace(config, eval=dataclasses.replace(config.eval,
                                                                num_episodes=episodes),
                               distributed=DistributedConfig())


def stacked_state(params: Any, obs_stats: RunningMeanStd) -> Any:
    """A `TrainState` holding only what evaluation reads (parameters and observation
    statistics, [R, ...]); the other fields are None."""
    from jaxvaco.core.train import TrainState

    return TrainState(params=params, opt_state=None, obs=None, env_state=None,
                      obs_stats=obs_stats, lag=None, algo_state=None, key=None, iteration=None)


def evaluate_runs(source: Source, step: int | None, episodes: int, greedy: bool,
                  seed: int | None = None, state: tuple[Any, RunningMeanStd] | None = None,
                  compilation_cache: str = "auto") -> np.ndarray:
    """Returns [R, episodes] of every run of `source` at checkpoint `step`: the runner's
    evaluation program (vmapped over the runs) on the runner's keys
    (`fold_in(PRNGKey(10_000 + step), run seed)`; `seed` draws other episodes:
    `fold_in(PRNGKey(seed), run seed)`). `state`: `source_state(source, step)`, if read."""
    from jaxvaco.core.train import make_train
    from jaxvaco.host.compilation import configure_cache
    from jaxvaco.host.compiled import Compiled, eval_keys
    from jaxvaco.host.runner import replay_delays

    params, obs_stats = state or source_state(source, step)
    cache_dir = configure_cache(compilation_cache)
    config = evaluation_config(source.config, episodes)
    compiled = Compiled(make_train(config, replay_delays=replay_delays(config)), cache_dir)
    keys = eval_keys(step or 0, source.runs, seed)
    return np.asarray(compiled.evaluate(stacked_state(params, obs_stats), keys, greedy))


def recorded_returns(source: Source, step: int | None, greedy: bool) -> dict[int, float]:
    """The run's own evaluation return at iteration `step` (metrics.jsonl), by run."""
    path = RunFolder(source.path).metrics
    if source.kind != "run" or step is None or not path.exists():
        return {}
    name = f"eval/{'greedy' if greedy else 'stochastic'}_return"
    found = {}
    for row in read_rows(path, path.stat().st_size, strict=False):
        if isinstance(row, dict) and row.get("iteration") == step and row.get(name) is not None:
            found[int(row["run"])] = float(row[name])
    return found


@dataclasses.dataclass
class Episode:
    """One evaluation episode of env 0, for rendering: the env adapter (`VecEnv`), the
    states it acted on (a stacked pytree [T]: gymnax states, or Brax pipeline states), the
    rewards [T], its return and length (T)."""

    env: Any
    states: Any
    rewards: np.ndarray
    episode_return: float
    length: int


def record_episode(policy: Policy, key: jax.Array, greedy: bool = True,
                   num_envs: int = 1) -> Episode:
    """The first evaluation episode of `policy` with `key` in `num_envs` parallel envs (with
    a run's evaluation key and episode count: that evaluation's episode 0), its states kept
    (`jaxvaco.core.evaluation.evaluate_episodes`)."""
    from jaxvaco.core.envs import make_env
    from jaxvaco.core.evaluation import evaluate_episodes

    config = policy.config
    env = make_env(config.env, num_envs, brax_backend=config.brax_backend).first_episodes_only()
    brax = env.spec.family == "brax"

    def record(env_state, out):
        inner = jax.tree.map(lambda x: x[0], env_state.inner)
        return (inner.pipeline_state if brax else inner, out.reward[0],
                out.terminated[0] | out.truncated[0])

    stats = (init_running_stats(policy.spec.obs_shape) if policy.obs_stats is None
             else policy.obs_stats)
    rollout = jax.jit(lambda params, stats, key, greedy: evaluate_episodes(
        config, policy.network, env, params, stats, key, greedy, record),
        compiler_options=compiler_options(env.spec.family, "evaluate"))
    returns, (states, rewards, done) = rollout(policy.params, stats, key, greedy)
    done = np.asarray(done)
    length = int(np.argmax(done)) + 1 if done.any() else len(done)
    states = jax.tree.map(lambda x: np.asarray(x[:length]), states)
    return Episode(env, states, np.asarray(rewards[:length]), float(returns[0]), length)
