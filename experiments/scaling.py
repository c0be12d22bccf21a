"""Scaling: env-steps/s and peak memory against the number of environments and of seeds.

Each point is one subprocess that builds `jaxvaco`'s training program (PPO, 128 steps per
env per iteration, 4 epochs × 4 minibatches, 64×64 tanh MLP), compiles it ahead of time,
runs one iteration as a warm-up and then times enough iterations for about
`--target-steps` env steps (training included, compilation excluded; all seeds together).
Peak memory is the subprocess's maximum resident set size on a CPU (process-wide: the
Python interpreter and XLA's compiler included) and the device's `peak_bytes_in_use` on
an accelerator.

    python experiments/scaling.py                        # CPU defaults, about 10 min
    python experiments/scaling.py --envs 256 4096 65536 --seeds 1 16 256 --target-steps 2e7
    python experiments/scaling.py --only CartPole-v1 --plot-only

Two sweeps per environment (CartPole-v1, Breakout-MinAtar, Brax inverted_pendulum on the
spring backend with observation normalisation):
  envs   1 seed, N environments for N in --envs;
  seeds  S seeds vmapped in one program, --seed-envs environments each, S in --seeds.
Writes scaling.csv (one row per point; reruns skip points already there) and
scaling.png to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from jaxvaco.lab.results import append_rows, read_rows

ENVS = {"CartPole-v1": {}, "Breakout-MinAtar": {},
        "inverted_pendulum": {"normalize_obs": True, "brax_backend": "spring"}}
FIELDS = ["env", "sweep", "num_envs", "num_seeds", "env_steps_per_sec", "peak_memory_mb",
          "memory", "compile_sec", "iterations", "run_sec", "backend", "device", "date"]
OUT = Path(__file__).resolve().parent / "results" / "scaling"


def measure(env: str, num_envs: int, num_seeds: int, target_steps: float) -> dict:
    """One point, in this process (the child)."""
    import resource

    import jax
    import jax.numpy as jnp

    from jaxvaco.core.config import PPOConfig, TrainConfig
    from jaxvaco.host.runner import Compiled, expand_runs, make_train

    batch = num_envs * 128
    iterations = max(1, round(target_steps / (batch * num_seeds)))
    config = TrainConfig(env=env, num_envs=num_envs, num_seeds=num_seeds, num_steps=128,
                         total_timesteps=batch * (iterations + 1), progress=False,
                         learning_rate=2.5e-4, update_epochs=4, num_minibatches=4,
                         clip_coef=0.2, ent_coef=0.01, ppo=PPOConfig(critic="behaviour"),
                         **ENVS[env])  # the defaults before issue 30, pinned
    _, keys, hp = expand_runs(config)
    programs = Compiled(make_train(config))
    state = programs.init(keys, hp)
    t0 = time.perf_counter()
    chunk = programs.chunk.lower(state, hp, jnp.int32(1)).compile()
    compile_sec = time.perf_counter() - t0
    state, *_ = jax.block_until_ready(chunk(state, hp, jnp.int32(1)))  # warm-up
    t0 = time.perf_counter()
    jax.block_until_ready(chunk(state, hp, jnp.int32(iterations)))
    run_sec = time.perf_counter() - t0
    device = jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and "peak_bytes_in_use" in stats:
        peak, memory = stats["peak_bytes_in_use"] / 2**20, "device peak_bytes_in_use"
    else:
        peak, memory = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "process RSS"
    return {"env": env, "num_envs": num_envs, "num_seeds": num_seeds,
            "env_steps_per_sec": iterations * batch * num_seeds / run_sec,
            "peak_memory_mb": peak, "memory": memory, "compile_sec": compile_sec,
            "iterations": iterations, "run_sec": run_sec, "backend": device.platform,
            "device": device.device_kind, "date": time.strftime("%Y-%m-%d %H:%M")}


def points(args) -> list[tuple[str, str, int, int]]:
    out = []
    for env in args.only:
        out += [(env, "envs", n, 1) for n in args.envs]
        out += [(env, "seeds", args.seed_envs, s) for s in args.seeds  # 1 seed: measured
                if s > 1 or args.seed_envs not in args.envs]             # in the envs sweep
    return out


def run_points(args, path: Path) -> None:
    done = {(r["env"], r["sweep"], int(r["num_envs"]), int(r["num_seeds"]))
            for r in read_rows(path)}
    todo = [p for p in points(args) if p not in done]
    print(f"{len(todo)} points to measure ({len(done)} already in {path})", flush=True)
    for env, sweep, num_envs, num_seeds in todo:
        cmd = [sys.executable, __file__, "--child", json.dumps([env, num_envs, num_seeds,
                                                                 args.target_steps])]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        if proc.returncode:
            print(f"  {env} {num_envs} envs × {num_seeds} seeds FAILED:\n"
                  f"{proc.stderr[-2000:]}", flush=True)
            continue
        row = dict(json.loads(proc.stdout.strip().splitlines()[-1]), sweep=sweep)
        append_rows(path, [{k: row[k] for k in FIELDS}], FIELDS)
        print(f"  {env:<18} {num_envs:>6} envs × {num_seeds:>3} seeds: "
              f"{row['env_steps_per_sec']:>11,.0f} env-steps/s, peak {row['peak_memory_mb']:,.0f}"
              f" MB, compile {row['compile_sec']:.1f} s ({time.perf_counter() - t0:.0f} s)",
              flush=True)


def plot(path: Path, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(path)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharex="col")
    seed_envs = next((r["num_envs"] for r in rows if r["sweep"] == "seeds"), "?")
    for col, (sweep, x, label) in enumerate((("envs", "num_envs", "environments (1 seed)"),
                                             ("seeds", "num_seeds", "seeds vmapped"))):
        for env in ENVS:
            sel = sorted((r for r in rows if r["env"] == env and (
                r["sweep"] == sweep or (sweep == "seeds" and r["num_seeds"] == "1"
                                        and r["num_envs"] == seed_envs))),
                key=lambda r: int(r[x]))
            if not sel:
                continue
            xs = [int(r[x]) for r in sel]
            axes[0, col].plot(xs, [float(r["env_steps_per_sec"]) for r in sel], "o-",
                              label=env)
            axes[1, col].plot(xs, [float(r["peak_memory_mb"]) for r in sel], "o-", label=env)
        axes[1, col].set_xlabel(label)
        for ax in axes[:, col]:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].set_title("one seed, N environments")
    axes[0, 1].set_title(f"S seeds × {seed_envs} environments each")
    axes[0, 0].set_ylabel("env-steps/s (training included)")
    memory = rows[0]["memory"] if rows else ""
    axes[1, 0].set_ylabel(f"peak memory, MB ({memory})")
    axes[0, 0].legend()
    device = f"{rows[0]['device']} ({rows[0]['backend']}), {rows[0]['date'][:10]}" if rows else ""
    fig.suptitle(f"jaxvaco PPO throughput and memory, {device}")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--only", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--envs", type=int, nargs="+", default=[16, 64, 256, 1024, 4096, 8192])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--seed-envs", type=int, default=16,
                        help="environments per seed in the seeds sweep")
    parser.add_argument("--target-steps", type=float, default=5e5,
                        help="env steps per timed measurement (at least one iteration)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per point")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--plot-only", action="store_true")
    args = parser.parse_args(argv)
    if args.child:
        env, num_envs, num_seeds, target = json.loads(args.child)
        print(json.dumps(measure(env, num_envs, num_seeds, target)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "scaling.csv"
    if not args.plot_only:
        print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        run_points(args, path)
    plot(path, args.out / "scaling.png")


if __name__ == "__main__":
    main()
