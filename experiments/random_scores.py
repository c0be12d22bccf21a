"""The return of a uniform-random policy: the 0 of every environment's normalised score.

`jaxvaco.lab.REFERENCE_SCORES` maps each environment to (random return, reference
return); this script measures the first number, so that a new environment's entry can be
declared before any agent's result on it exists (held-out environments, issue 11).

    python -m experiments.random_scores Asterix-MinAtar Freeway-MinAtar
    python -m experiments.random_scores hopper --episodes 256

Each environment runs `--envs-per-batch` copies with uniformly random actions (discrete:
uniform over the actions; continuous: uniform in the action box) for as many steps as
`--episodes` episodes of maximal length take, in one jitted `lax.scan`, and prints the
mean and standard error over every finished episode.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from jaxvaco import make_env


def random_actions(key: jax.Array, spec, num_envs: int) -> jax.Array:
    if spec.discrete:
        return jax.random.randint(key, (num_envs,), 0, spec.num_actions)
    low, high = jnp.asarray(spec.action_low), jnp.asarray(spec.action_high)
    return jax.random.uniform(key, (num_envs, len(spec.action_low)), minval=low, maxval=high)


def completed_returns(env_name: str, num_envs: int, episodes: int, seed: int) -> np.ndarray:
    """Returns of every episode finished by random play long enough for `episodes` of them.

    All finished episodes are kept: keeping only the first ones would favour short episodes.
    """
    env = make_env(env_name, num_envs)
    steps = int(np.ceil(episodes / num_envs)) * env.spec.max_episode_steps

    def step(carry, key):
        state = carry
        k_act, k_env = jax.random.split(key)
        state, result = env.step(k_env, state, random_actions(k_act, env.spec, num_envs))
        done = result.terminated | result.truncated
        return state, (result.completed_return, done)

    @jax.jit
    def play(key):
        k_reset, k_steps = jax.random.split(key)
        _, state = env.reset(k_reset)
        _, (returns, done) = jax.lax.scan(step, state, jax.random.split(k_steps, steps))
        return returns, done

    returns, done = jax.device_get(play(jax.random.key(seed)))
    return returns[done]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="+")
    parser.add_argument("--episodes", type=int, default=512)
    parser.add_argument("--envs-per-batch", dest="num_envs", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name in args.envs:
        returns = completed_returns(name, args.num_envs, args.episodes, args.seed)
        sem = returns.std(ddof=1) / np.sqrt(len(returns))
        print(f"{name}: random return {returns.mean():.2f} (s.e. {sem:.2f}, "
              f"{len(returns)} episodes)")


if __name__ == "__main__":
    main()
