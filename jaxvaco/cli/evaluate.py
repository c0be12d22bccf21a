"""`jaxvaco eval`: roll a trained policy out in fresh environments; its returns per run,
into RUN/eval.json, and optionally a video of one episode."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import tyro

from jaxvaco.cli.common import parse_args, report_failure, wide_console
from jaxvaco.core.config import ConfigError
from jaxvaco.host.run_folder import ExportFolder, RunFolder, write_json


@dataclasses.dataclass(frozen=True)
class EvalArgs:
    run_dir: tyro.conf.Positional[Path]
    """A run directory (results/<run>) or a policy folder written by jaxvaco export."""
    run: str | None = None
    """The run to evaluate: its index (0, 1, ...) or its labels (seed=1,lag_delay=4);
    default: every run of the directory (the video shows run 0)."""
    episodes: int | None = None
    """Episodes per run, run in parallel; default: the run's --eval.num-episodes."""
    stochastic: bool = False
    """Draw actions from the policy instead of acting greedily (arg-max / mean)."""
    checkpoint: int | None = None
    """The checkpoint to evaluate (its iteration); default: the newest."""
    video: Path | None = None
    """Also render the run's first episode to this .gif (Pillow) or .mp4 (needs ffmpeg:
    pip install "jaxvaco[video]")."""
    seed: int | None = None
    """Draw other episodes (keys fold_in(PRNGKey(SEED), run seed)); default: the run's own
    evaluation keys at that checkpoint (fold_in(PRNGKey(10000 + iteration), run seed)), so
    with its episode count the returns are the run's own evaluation, bit for bit."""


def eval_command(argv: list[str]) -> int:
    args = parse_args(EvalArgs, argv, prog="jaxvaco eval",
                      description="Evaluate a trained policy in fresh environments; "
                                  f"writes RUN/{RunFolder.EVALUATION}.")
    try:
        return evaluate(args)
    except (ConfigError, OSError) as error:
        return report_failure(error, "")


def evaluate(args: EvalArgs) -> int:
    """`jaxvaco eval`: every check first (options, video file, run, checkpoint, renderer),
    then the evaluation, the table, eval.json and the video."""
    from jaxvaco.host.policy import source_state
    from jaxvaco.host.policy_source import choose_checkpoint, open_source, parse_run, select_run

    if args.episodes is not None and args.episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {args.episodes}.")
    if args.video is not None:
        from jaxvaco.host.video import check_video_path

        check_video_path(args.video)
    source = open_source(args.run_dir)
    choice = parse_run(args.run)
    chosen = [select_run(source, choice)] if choice is not None else list(range(len(
        source.runs)))
    step = choose_checkpoint(source, args.checkpoint)
    if args.video is not None:
        import matplotlib

        from jaxvaco.host.video import check_renderable

        matplotlib.use("Agg")
        check_renderable(source.config.env)
    from jaxvaco.host.policy_eval import evaluate_runs

    episodes = args.episodes or source.config.eval.num_episodes
    greedy = not args.stochastic
    state = source_state(source, step)
    returns = evaluate_runs(source, step, episodes, greedy, args.seed, state)
    report = eval_report(source, step, episodes, greedy, args.seed, returns, chosen)
    print_eval_table(source, report)
    folder = ExportFolder if source.kind == "export" else RunFolder
    path = folder(source.path).evaluation
    write_json(path, report)
    print(f"wrote {path}")
    if args.video is not None:
        print(render_video(args, source, step, episodes, greedy, state, chosen[0]))
    return 0


def eval_report(source: Any, step: int | None, episodes: int, greedy: bool,
                seed: int | None, returns: Any, chosen: list[int]) -> dict:
    """eval.json: what was evaluated, how, and per chosen run its returns, mean, 95% CI
    and, where the run evaluated the same episodes, its own recorded return."""
    import jaxvaco
    from jaxvaco.host.policy_eval import recorded_returns
    from jaxvaco.lab.stats import seed_mean_ci

    same_episodes = seed is None and episodes == source.config.eval.num_episodes
    recorded = recorded_returns(source, step, greedy) if same_episodes else {}
    means = returns.mean(axis=1)  # as the runner averages (float32)
    runs = []
    for r in chosen:
        _, low, high = seed_mean_ci(returns[r])
        runs.append({"run": r, "labels": source.runs[r], "mean": float(means[r]),
                     "ci95": [low, high], "recorded": recorded.get(r),
                     "returns": [float(x) for x in returns[r]]})
    keys = ("fold_in(PRNGKey(10000 + iteration), seed)" if seed is None
            else f"fold_in(PRNGKey({seed}), seed)")
    return {"path": str(source.path), "kind": source.kind, "env": source.config.env,
            "algo": source.config.algo, "checkpoint": step,
            "mode": "greedy" if greedy else "stochastic", "episodes": episodes,
            "seed": seed, "keys": keys, "jaxvaco_version": jaxvaco.__version__, "runs": runs}


def print_eval_table(source: Any, report: dict) -> None:
    from rich.table import Table

    from jaxvaco.lab.tables import format_estimate, format_number

    config = source.config
    at = ("" if report["checkpoint"] is None
          else f", checkpoint {report['checkpoint']}")
    table = Table(title=f"{config.algo} on {config.env}{at}: {report['mode']} return, "
                        f"{report['episodes']} episodes per run")
    labels = list(dict.fromkeys(k for row in report["runs"] for k in row["labels"]))
    recorded = any(row["recorded"] is not None for row in report["runs"])
    for name in ["run", *labels]:
        table.add_column(name, justify="right")
    for name in ["return: mean [95% CI]", "min", "max",
                 *(["recorded", "same"] if recorded else [])]:
        table.add_column(name, justify="right")
    for row in report["runs"]:
        values = row["returns"]
        cells = [str(row["run"]), *(str(row["labels"].get(k, "")) for k in labels),
                 format_estimate((row["mean"], *row["ci95"])), format_number(min(values)),
                 format_number(max(values))]
        if recorded:
            same = row["recorded"] is not None and row["recorded"] == row["mean"]
            cells += [format_number(row["recorded"]), "yes" if same else "no"]
        table.add_row(*cells)
    console = wide_console(table)
    console.print(table)
    episodes = ("the run's own evaluation episodes at this checkpoint" if report["seed"] is None
                else f"episodes of --seed {report['seed']}")
    console.print(f"{episodes} (keys {report['keys']})" + (
        f"; recorded: the run's eval/{report['mode']}_return in {RunFolder.METRICS}, same: "
        "equal to the last bit" if recorded else ""), soft_wrap=True)


def render_video(args: EvalArgs, source: Any, step: int | None, episodes: int, greedy: bool,
                 state: Any, index: int) -> str:
    """Render the first evaluation episode of run `index` to --video; what was written."""
    from jaxvaco.host.compiled import eval_keys
    from jaxvaco.host.policy import source_policy
    from jaxvaco.host.policy_eval import record_episode
    from jaxvaco.host.video import render_episode, write_video

    policy = source_policy(source, index, step, state)
    key = eval_keys(step or 0, [source.runs[index]], args.seed)[0]
    episode = record_episode(policy, key, greedy, episodes)
    frames, fps = render_episode(episode)
    write_video(frames, args.video, fps)
    return (f"wrote {args.video}: run {index}, episode 0 (return {episode.episode_return:g}, "
            f"{episode.length} steps), {len(frames)} frames at {fps:.3g} fps")
