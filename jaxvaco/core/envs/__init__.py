"""Environment adapters: one batched, auto-resetting, jittable interface for gymnax and brax.

Names are gymnax ids (``CartPole-v1``, ``Breakout-MinAtar``, ...) and brax names (``ant``,
``inverted_pendulum``, ...), the latter also accepted as ``brax/<name>``. Each family is
imported only when one of its environments (or the list of names) is requested.
"""

from __future__ import annotations

import difflib
import functools

from jaxvaco.core.envs.base import EnvSpec, StepResult, VecEnv, VecEnvState
from jaxvaco.core.envs.brax_env import (
    BRAX_ENV_NAMES,
    BRAX_ONLY_BACKENDS,
    BRAX_SHAPES,
    DEFAULT_BRAX_BACKEND,
    BraxVecEnv,
    brax_spec,
    registered_brax_envs,
)

__all__ = [
    "EnvSpec",
    "StepResult",
    "UnknownEnvError",
    "VecEnv",
    "VecEnvState",
    "available_envs",
    "env_catalog",
    "env_spec",
    "make_env",
]

BRAX_PREFIX = "brax/"


class UnknownEnvError(ValueError):
    """Raised for an environment name that neither gymnax nor brax knows."""


def _gymnax_envs() -> list[str]:
    from jaxvaco.core.envs.gymnax_env import gymnax

    return list(gymnax.registered_envs)


def available_envs() -> list[str]:
    """All accepted environment names: gymnax ids, then brax names (without prefix)."""
    return _gymnax_envs() + list(BRAX_ENV_NAMES)


def _unknown(name: str) -> UnknownEnvError:
    """Build the error for ``name``, suggesting close matches (case-insensitive)."""
    by_lower = {known.lower(): known for known in available_envs()}
    query = name.removeprefix(BRAX_PREFIX).lower()
    matches = [by_lower[m] for m in difflib.get_close_matches(query, by_lower, n=5, cutoff=0.6)]
    hint = f" Did you mean: {', '.join(matches)}?" if matches else ""
    return UnknownEnvError(
        f"Unknown environment {name!r}.{hint} Call jaxvaco.core.envs.available_envs() to list "
        "all names."
    )


def _resolve(name: str) -> tuple[str, str]:
    """Map a user-facing name to ``(family, canonical name)`` or raise :class:`UnknownEnvError`."""
    if name in BRAX_ENV_NAMES:  # first: a brax run need not import gymnax (no name is both)
        return "brax", name
    if name in _gymnax_envs():
        return "gymnax", name
    bare = name.removeprefix(BRAX_PREFIX)
    if name.startswith(BRAX_PREFIX) and bare in registered_brax_envs():
        return "brax", bare
    raise _unknown(name)


@functools.cache
def env_spec(name: str, brax_backend: str = DEFAULT_BRAX_BACKEND) -> EnvSpec:
    """Static spec of environment ``name`` (shape inference only; no batch is built).
    Cached: a spec is a frozen value, and validation asks for it many times per run (each
    grid value, the memory estimate), which built a Brax environment each time."""
    family, canonical = _resolve(name)
    if family == "gymnax":
        from jaxvaco.core.envs.gymnax_env import gymnax_spec

        return gymnax_spec(canonical)
    return brax_spec(canonical, brax_backend)


def make_env(name: str, num_envs: int, brax_backend: str = DEFAULT_BRAX_BACKEND) -> VecEnv:
    """Build ``num_envs`` batched, auto-resetting copies of environment ``name``.

    ``brax_backend`` selects the brax physics pipeline and is ignored for gymnax environments.
    """
    family, canonical = _resolve(name)
    if family == "gymnax":
        from jaxvaco.core.envs.gymnax_env import GymnaxVecEnv

        return GymnaxVecEnv(canonical, num_envs)
    return BraxVecEnv(canonical, num_envs, backend=brax_backend)


CLASSIC_CONTROL = ("CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCar-v0",
                   "MountainCarContinuous-v0")
NOT_SPECCED = {"MNISTBandit-bsuite": "downloads MNIST when made"}
"""gymnax envs whose spec is not computed when listing (what making them would do)."""


def gymnax_family(name: str) -> str:
    """"classic control", "MinAtar", "bsuite" or "misc" for a gymnax id."""
    if name in CLASSIC_CONTROL:
        return "classic control"
    for suffix in ("MinAtar", "bsuite", "misc"):
        if name.endswith(f"-{suffix}"):
            return suffix
    return "other"


def env_catalog() -> list[dict]:
    """Every environment name with its family (gymnax classic control, MinAtar, bsuite,
    misc; Brax), observation shape and action space (discrete with n actions, or
    continuous of a dimension), for `jaxvaco envs`. gymnax shapes come from `env_spec`
    (shape inference only); Brax's from the static `BRAX_SHAPES` (building a Brax env
    takes about a second). An env whose spec cannot be had says why in "note"."""
    rows = []
    for name in _gymnax_envs():
        row = {"family": f"gymnax {gymnax_family(name)}", "name": name, "obs_shape": None,
               "discrete": None, "num_actions": None, "note": NOT_SPECCED.get(name, "")}
        if not row["note"]:
            try:
                spec = env_spec(name)
            except Exception as error:  # noqa: BLE001 - an env gymnax cannot make here
                row["note"] = f"cannot be made here ({type(error).__name__})"
            else:
                row.update(obs_shape=spec.obs_shape, discrete=spec.discrete,
                           num_actions=spec.num_actions)
        rows.append(row)
    order = {family: i for i, family in enumerate(
        ("gymnax classic control", "gymnax MinAtar", "gymnax bsuite", "gymnax misc"))}
    rows.sort(key=lambda row: order.get(row["family"], len(order)))
    for name in BRAX_ENV_NAMES:
        obs_size, action_dim = BRAX_SHAPES[name]
        only = BRAX_ONLY_BACKENDS.get(name)
        rows.append({"family": "Brax", "name": name, "obs_shape": (obs_size,),
                     "discrete": False, "num_actions": action_dim,
                     "note": f"--brax-backend {only} only" if only else ""})
    return rows
