"""Throughput benchmark: env-steps per second, training included, compilation excluded.

Every figure is a ratio of two programs measured side by side in this one process,
alternating A, B, A, B, ... and keeping each one's best time (shared CPUs are noisy;
the ratio is the result, absolute numbers are context).

    python experiments/throughput.py                 # all comparisons
    python experiments/throughput.py --only ref seeds
    python experiments/throughput.py --total 2e6 --repeats 5
    python experiments/throughput.py --devices 4     # 1, 2, 4 devices (simulated on a CPU)

Comparisons (--env, default CartPole-v1; 256 envs × 128 steps, 4 epochs × 4 minibatches,
64×64 tanh; `ref` is CartPole only):
  ref    jaxvaco PPO (1 seed) / the single-file reference ../shared/bench/ref_ppo_cartpole.py
  seeds  jaxvaco PPO, 16 seeds in one program / 1 seed (total env-steps/s)
  brax   the same two figures on a Brax environment at its default backend
  vaco   VACO / PPO at K = 0
  lag    PPO at K = 16 (uniform, 4 groups) / PPO at K = 0
  devices  (with --devices N) PPO data-parallel over D = 2, 4, ..., N devices / 1 device,
           global and local shuffle. On a CPU the "devices" share the same cores, so this
           measures the overhead of sharding and collectives, not a speed-up.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp

from jaxvaco.core.config import DistributedConfig, LagConfig, PPOConfig, TrainConfig, VacoConfig
from jaxvaco.host.runner import Compiled, expand_runs, make_train

DEFAULT_REFERENCE = Path(__file__).resolve().parents[1] / ".." / "shared" / "bench"
BENCH_CONFIG = TrainConfig(num_envs=256, num_steps=128, update_epochs=4, num_minibatches=4,
                           hidden_sizes=(64, 64), activation="tanh", learning_rate=2.5e-4,
                           clip_coef=0.2, ent_coef=0.01, ppo=PPOConfig(critic="behaviour"),
                           vaco=VacoConfig(delta=0.2), progress=False)
"""The benchmarked programs: PPO with the recorded critic, as the reference computes it
(ε, c_e, the critic and δ are the defaults before issue 30's tuned defaults, pinned)."""


def jaxvaco_program(config: TrainConfig) -> tuple[Callable[[], None], int]:
    """A zero-argument function running the whole training once (compiled beforehand)."""
    _, keys, hp = expand_runs(config)
    programs = Compiled(make_train(config))
    n_iter = jnp.int32(config.num_iterations)
    state = programs.init(keys, hp)
    compiled = programs.chunk.lower(state, hp, n_iter).compile()
    steps = config.num_iterations * config.batch_size * config.num_seeds
    return lambda: jax.block_until_ready(compiled(state, hp, n_iter)), steps


def reference_program(path: Path, config: TrainConfig) -> tuple[Callable[[], None], int]:
    spec = importlib.util.spec_from_file_location("ref_ppo_cartpole", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    train, steps = module.make_train(config.num_envs, config.num_steps, config.total_timesteps,
                                     config.update_epochs, config.num_minibatches)
    keys = jax.random.split(jax.random.PRNGKey(0), config.num_seeds)
    compiled = jax.jit(jax.vmap(train)).lower(keys).compile()
    return lambda: jax.block_until_ready(compiled(keys)), steps * config.num_seeds


def side_by_side(programs: dict[str, tuple[Callable[[], None], int]], repeats: int):
    """Alternate the programs `repeats` times; env-steps/s from each one's best time."""
    best = {name: float("inf") for name in programs}
    for _ in range(repeats):
        for name, (fn, _) in programs.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return {name: programs[name][1] / best[name] for name in programs}


def report(title: str, sps: dict[str, float], numerator: str, denominator: str,
           goal: str) -> dict:
    ratio = sps[numerator] / sps[denominator]
    print(f"\n{title}")
    for name, value in sps.items():
        print(f"  {name:<28} {value:>12,.0f} env-steps/s")
    print(f"  ratio {numerator} / {denominator}: {ratio:.2f}   ({goal})")
    return {"title": title, "sps": sps, "ratio": ratio, "goal": goal}


def compare_reference(base: TrainConfig, args) -> dict:
    config = dataclasses.replace(base, num_seeds=1)
    sps = side_by_side({"jaxvaco ppo": jaxvaco_program(config),
                        "reference ppo": reference_program(args.reference, config)},
                       args.repeats)
    return report("jaxvaco vs reference (CartPole-v1, 1 seed)", sps, "jaxvaco ppo",
                  "reference ppo", "must be >= 1.0, goal >= 1.2")


def compare_seeds(base: TrainConfig, args, label: str = "") -> dict:
    label = label or base.env
    one = dataclasses.replace(base, num_seeds=1)
    many = dataclasses.replace(base, num_seeds=args.seeds)
    sps = side_by_side({f"{args.seeds} seeds": jaxvaco_program(many),
                        "1 seed": jaxvaco_program(one)}, args.repeats)
    return report(f"seeds vmapped in one program ({label})", sps, f"{args.seeds} seeds",
                  "1 seed", "must be >= 1.0 on CPU; > 10 expected on a GPU")


def compare_brax(base: TrainConfig, args) -> dict:
    config = dataclasses.replace(base, env=args.brax_env, total_timesteps=args.brax_total,
                                 num_envs=args.brax_envs, normalize_obs=True)
    return compare_seeds(config, args, label=f"{args.brax_env}, Brax {config.brax_backend}")


def compare_vaco(base: TrainConfig, args) -> dict:
    sps = side_by_side({"vaco K=0": jaxvaco_program(dataclasses.replace(base, algo="vaco")),
                        "ppo K=0": jaxvaco_program(base)}, args.repeats)
    return report(f"VACO vs PPO at K = 0 ({base.env}, 1 seed)", sps, "vaco K=0", "ppo K=0",
                  "goal >= 0.9")


def compare_lag(base: TrainConfig, args) -> dict:
    lagged = dataclasses.replace(base, lag=LagConfig(max_delay=16, mode="uniform", num_groups=4))
    sps = side_by_side({"ppo K=16": jaxvaco_program(lagged), "ppo K=0": jaxvaco_program(base)},
                       args.repeats)
    return report(f"PPO with lag K = 16 vs K = 0 ({base.env}, 1 seed)", sps, "ppo K=16",
                  "ppo K=0", "goal >= 0.95")


def device_counts(most: int) -> list[int]:
    """1, 2, 4, ... up to `most` (and `most` itself)."""
    counts = [1]
    while counts[-1] * 2 <= most:
        counts.append(counts[-1] * 2)
    return counts if counts[-1] == most else counts + [most]


def compare_devices(base: TrainConfig, args) -> dict:
    programs = {}
    for devices in device_counts(args.devices):
        shuffles = ("global", "local") if devices > 1 else ("global",)
        for shuffle in shuffles:
            dist = DistributedConfig(num_devices=devices, shuffle=shuffle)
            name = f"{devices} device(s)" + (f", {shuffle}" if devices > 1 else "")
            programs[name] = jaxvaco_program(dataclasses.replace(base, distributed=dist))
    sps = side_by_side(programs, args.repeats)
    most = f"{args.devices} device(s), global"
    return report(f"data-parallel PPO over devices ({base.env}, {base.num_envs} envs)", sps,
                  most, "1 device(s)", "CPU: overhead only; accelerators: scaling")


def simulate_cpu_devices(count: int) -> None:
    """Re-run this script with XLA simulating `count` CPU devices (must precede JAX's start)."""
    flag = f"--xla_force_host_platform_device_count={count}"
    env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip())
    print(f"only {jax.device_count()} CPU device(s): restarting with XLA_FLAGS={flag}",
          flush=True)
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


COMPARISONS = {"ref": compare_reference, "seeds": compare_seeds, "brax": compare_brax,
               "vaco": compare_vaco, "lag": compare_lag, "devices": compare_devices}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=list(COMPARISONS),
                        help="default: all but devices; with --devices N: devices only")
    parser.add_argument("--total", type=float, default=1e6, help="env steps per seed")
    parser.add_argument("--env", default="CartPole-v1", help="gymnax id for all but brax")
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--brax-env", default="inverted_pendulum")
    parser.add_argument("--brax-envs", type=int, default=256)
    parser.add_argument("--brax-total", type=int, default=262_144)
    parser.add_argument("--reference", type=Path,
                        default=DEFAULT_REFERENCE / "ref_ppo_cartpole.py")
    parser.add_argument("--devices", type=int, default=0,
                        help="compare data-parallel training on 1, 2, 4, ... N devices")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.only is None:
        args.only = ["devices"] if args.devices else [c for c in COMPARISONS if c != "devices"]
    if "devices" in args.only:
        if args.devices < 2:
            sys.exit("the devices comparison needs --devices N with N >= 2")
        if jax.device_count() < args.devices:
            if jax.default_backend() != "cpu":
                sys.exit(f"--devices {args.devices}: only {jax.device_count()} "
                         f"{jax.default_backend()} device(s) present")
            simulate_cpu_devices(args.devices)
    if "ref" in args.only and args.env != "CartPole-v1":
        sys.exit("the reference is CartPole-v1 only: drop 'ref' from --only or --env")
    if "ref" in args.only and not args.reference.exists():
        sys.exit(f"reference script not found at {args.reference}; pass --reference PATH "
                 "or drop 'ref' from --only")
    base = dataclasses.replace(BENCH_CONFIG, env=args.env, total_timesteps=int(args.total),
                               num_envs=args.num_envs)
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind} "
          f"({jax.device_count()} device(s)); {time.strftime('%Y-%m-%d %H:%M')}")
    results = [COMPARISONS[name](base, args) for name in args.only]
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
