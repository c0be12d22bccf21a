"""Bad inputs and faults at the command line (issues #14, #34), one table row each.

Every row runs the `jaxvaco` program as a process (`python -m jaxvaco`, as a user runs it)
and asserts the exit status, that every stderr line is a `jaxvaco:` line and the last one
says what to change, no `Traceback`, no `FATAL` or crash, and, where an earlier run is
involved, that its files are byte-for-byte intact. Most rows fail before anything is
compiled; a few train a tiny run. The faults that need a patched library (a full disk,
non-finite values) run in-process (`main(argv)`), as does the finished run the rows copy.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp
import pytest

from jaxvaco.cli import main
from jaxvaco.cli.train import resume_defaults
from jaxvaco.core.config import ConfigError, LagConfig, TrainConfig
from jaxvaco.host import runner, session
from jaxvaco.host.run_dir import RunAlreadyComplete, RunControl
from jaxvaco.host.run_folder import RunFolder
from jaxvaco.lab import sweep
from tests.processes import CRASHES, Outcome, process, start

TINY = ["--num-envs", "8", "--num-steps", "16", "--total-timesteps", "512",
        "--num-minibatches", "2", "--update-epochs", "1", "--hidden-sizes", "8", "8",
        "--eval.num-episodes", "2", "--no-progress"]
"""4 iterations of one chunk each."""


@pytest.fixture(scope="module", autouse=True)
def _fast(fast_compile):
    yield


def cli(argv: list[str]) -> Outcome:
    """main(argv) in-process, with its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exit_:
            status = exit_.code
    return Outcome(status, out.getvalue(), err.getvalue())


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under directory (relative path -> bytes)."""
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def assert_one_line(outcome: Outcome, status: int, *needles: str) -> str:
    """The exit status, no traceback or crash, and one message line holding every needle:
    on failure, stderr's last line (every stderr line a `jaxvaco:` line, at most one of them
    not a warning); on success, the one `jaxvaco:` line of stdout."""
    for crash in CRASHES:
        assert crash not in outcome.err + outcome.out, outcome
    assert outcome.status == status, outcome
    stream = outcome.err if status else outcome.out
    lines = [line for line in stream.splitlines() if line.startswith("jaxvaco: ")]
    if status:
        assert stream.strip().splitlines() == lines, stream
        lines = [line for line in lines if not line.startswith("jaxvaco: warning: ")]
        assert lines and stream.strip().splitlines()[-1] == lines[-1], stream
    assert len(lines) == 1, stream
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> dict:
    """One finished tiny run (checkpoints at iterations 2 and 4), trained once."""
    results = tmp_path_factory.mktemp("finished")
    outcome = cli(["train", *TINY, "--results-dir", str(results), "--run-name", "r",
                   "--checkpoint-every", "2", "--keep-checkpoints", "2"])
    assert outcome.status == 0, outcome
    return {"run": results / "r", "outcome": outcome}


@pytest.fixture
def run_copy(finished, tmp_path) -> Path:
    """A private copy of the finished run, under tmp_path/results/r, as if trained there."""
    target = tmp_path / "results" / "r"
    shutil.copytree(finished["run"], target)
    edit_json(target / "config.json", lambda data: data.update(results_dir=str(target.parent)))
    return target


# ----------------------------------------------------------- rejected before anything runs

REJECTED = [
    ("eval-num-episodes-0", ["--eval.num-episodes", "0"], "--eval.num-episodes"),
    ("eval-every-chunks-negative", ["--eval.every-chunks", "-1"], "--eval.every-chunks"),
    ("run-name-parent", ["--run-name", "../x"], "--run-name"),
    ("run-name-nested", ["--run-name", "a/b"], "--run-name"),
    ("run-name-absolute", ["--run-name", "/tmp/jaxvaco-absolute-run"], "--run-name"),
    ("run-name-dot", ["--run-name", "."], "--run-name"),
    ("brax-backend-typo", ["--brax-backend", "sprng"], "Did you mean spring"),
    ("brax-backend-unknown", ["--brax-backend", "foo"], "--brax-backend 'foo'"),
    ("vaco-delta-above-1", ["--algo", "vaco", "--vaco.delta", "1.5"], "--vaco.delta"),
    ("reward-scale-0", ["--reward-scale", "0"], "--reward-scale"),
    ("reward-scale-negative", ["--reward-scale", "-0.1"], "--reward-scale"),
    ("vf-coef-negative", ["--vf-coef", "-1"], "--vf-coef"),
    ("ent-coef-negative", ["--ent-coef", "-0.01"], "--ent-coef"),
    ("learning-rate-nan", ["--learning-rate", "nan"], "--learning-rate"),
    ("learning-rate-inf", ["--learning-rate", "inf"], "--learning-rate"),
    ("gamma-inf", ["--gamma", "inf"], "--gamma"),
    ("num-seeds-negative", ["--num-seeds", "-2"], "--num-seeds"),
    ("num-groups-not-dividing", ["--lag.num-groups", "3"], "--lag.num-groups 3"),
    ("max-delay-negative", ["--lag.max-delay", "-1"], "--lag.max-delay"),
    ("total-below-one-batch", ["--total-timesteps", "100"], "--total-timesteps"),
    ("keep-checkpoints-negative", ["--keep-checkpoints", "-1"], "--keep-checkpoints"),
    ("unknown-algo", ["--algo", "vacoo"], "Did you mean vaco"),
    ("unknown-env", ["--env", "CartPole-v0"], "CartPole-v1"),
    ("resume-with-changes-alone", ["--resume-with-changes"], "needs --resume DIR"),
    ("parse-not-an-integer", ["--num-envs", "abc"], "Error parsing --num-envs"),
    ("parse-unknown-option", ["--bogus", "1"], "Unrecognized options: --bogus"),
    ("parse-missing-value", ["--algo"], "Missing value for argument '--algo'"),
    ("total-timesteps-overflow", ["--total-timesteps", "10000000000000000000"],
     "int32 counter"),
    ("seed-above-2^64", ["--seed", "100000000000000000000"], "seeds must lie in [0, 2^32)"),
    ("seed-negative", ["--seed", "-3"], "seeds must lie in [0, 2^32)"),
    ("seeds-past-2^32", ["--seed", "4294967295", "--num-seeds", "2"], "up to 4294967296"),
    ("multihost-without-coordinator", ["--distributed.multihost"],
     "--distributed.coordinator-address"),
    ("too-many-devices", ["--distributed.num-devices", "2"], "more than the 1 devices"),
    ("ring-buffer-beyond-memory", ["--lag.max-delay", "100000000", "--hidden-sizes", "256", "256"],
     "ring buffer"),
]


@pytest.mark.parametrize("argv,needle", [r[1:] for r in REJECTED], ids=[r[0] for r in REJECTED])
def test_rejected_options_write_nothing(tmp_path, argv, needle):
    results = tmp_path / "results"
    outcome = process(["train", *TINY, "--results-dir", str(results), *argv])
    assert_one_line(outcome, 2, needle)
    assert not results.exists() or not any(results.rglob("*"))
    assert not Path("/tmp/jaxvaco-absolute-run").exists()
    assert not (tmp_path / "x").exists()


# ------------------------------------------------------------- an earlier run is involved


def edit_json(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def damage_line(path: Path, number: int) -> None:
    """Overwrite the second half of line `number` (1-based) with '#', keeping the size."""
    lines = path.read_text().splitlines(keepends=True)
    half = len(lines[number - 1]) // 2
    lines[number - 1] = lines[number - 1][:half] + "#" * (len(lines[number - 1]) - half - 1) + "\n"
    path.write_text("".join(lines))


def truncate_config(run: Path) -> None:
    (run / "config.json").write_text((run / "config.json").read_text()[:200])


def no_checkpoints(run: Path) -> None:
    shutil.rmtree(run / "checkpoints")


def halve_metrics(run: Path) -> None:
    path = run / "metrics.jsonl"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def keep_first_rows(run: Path, rows: int) -> None:
    path = run / "metrics.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:rows]))


def cut_results_csv(run: Path) -> None:
    """A tidy CSV whose last row was cut short (as a sweep's results.csv)."""
    text = "env,algo,K,seed,step,return\n" + "".join(
        f"CartPole-v1,ppo,0,{seed},{step},{10.0 + step}\n" for seed in (0, 1) for step in (1, 2))
    (run / "table.csv").write_text(text[:-12])


def block_config_write(run: Path) -> None:
    (run / "config.json.tmp").mkdir()  # write_json's temporary file cannot be created


def resume(run: Path, *flags: str) -> list[str]:
    return ["train", "--resume", str(run), *flags]


def fresh_run_as(seed: str, *flags: str):
    return lambda run: ["train", *TINY, "--seed", seed, "--results-dir", str(run.parent),
                        "--run-name", run.name, *flags]


WITH_A_RUN = [
    # id, change to the earlier run, argv, status, needles
    ("reuse-name-without-checkpoints", no_checkpoints, fresh_run_as("2", "--keep-checkpoints", "0"),
     2, ["already holds a run", "--resume", "--run-name", "delete"]),
    ("reuse-name-with-checkpoints", None, fresh_run_as("2"), 2, ["already holds a run"]),
    ("resume-corrupted-config", truncate_config, resume, 2, ["config.json", "line"]),
    ("resume-unknown-nested-key",
     lambda run: edit_json(run / "config.json", lambda d: d["lag"].update(modee="fixed")),
     resume, 2, ["config.json", "lag.modee", "did you mean lag.mode"]),
    ("resume-unknown-key",
     lambda run: edit_json(run / "config.json", lambda d: d.update(learning_rat=0.1)),
     resume, 2, ["learning_rat", "did you mean learning_rate"]),
    ("resume-string-number",
     lambda run: edit_json(run / "config.json", lambda d: d.update(num_envs="16")),
     resume, 2, ["config.json", "num_envs must be an integer", "'16'"]),
    ("resume-damaged-metrics", lambda run: damage_line(run / "metrics.jsonl", 2), resume, 2,
     ["metrics.jsonl line 2 is damaged"]),
    ("resume-truncated-metrics", halve_metrics, resume, 2, ["metrics.jsonl holds", "fewer"]),
    ("resume-unwritable", block_config_write, resume, 1, ["config.json.tmp", "writable"]),
    ("resume-shape-change", None, lambda run: resume(run, "--num-envs", "16"), 2,
     ["--num-envs: 8 -> 16", "new run"]),
    ("resume-missing", None, lambda run: resume(run.parent / "nothing"), 2, ["no config.json"]),
    ("resume-finished", None, resume, 0, ["already complete", "metrics.jsonl"]),
    ("resume-finished-without-checkpoints", no_checkpoints, resume, 0, ["already complete"]),
    ("plot-damaged-metrics", lambda run: damage_line(run / "metrics.jsonl", 3),
     lambda run: ["plot", str(run)], 2, ["metrics.jsonl line 3 is damaged"]),
    ("plot-empty-metrics", lambda run: (run / "metrics.jsonl").write_text(""),
     lambda run: ["plot", str(run)], 2, ["metrics.jsonl has no rows yet"]),
    ("resume-config-edited-shape",
     lambda run: edit_json(run / "config.json", lambda d: d.update(num_envs=16)), resume, 2,
     ["compared with checkpoint 4", "--num-envs: 8 -> 16"]),
    ("resume-config-edited-learning-rate",
     lambda run: edit_json(run / "config.json", lambda d: d.update(learning_rate=0.01)),
     resume, 2, ["compared with checkpoint 4", "--learning-rate", "add --resume-with-changes"]),
    ("plot-cut-results-csv", cut_results_csv, lambda run: ["plot", str(run / "table.csv")], 2,
     ["table.csv line", "cut or edited"]),
]


@pytest.mark.parametrize("change,argv,status,needles", [r[1:] for r in WITH_A_RUN],
                         ids=[r[0] for r in WITH_A_RUN])
def test_an_earlier_run_is_kept_intact(run_copy, change, argv, status, needles):
    if change:
        change(run_copy)
    before = snapshot(run_copy)
    assert_one_line(process(argv(run_copy)), status, *needles)
    assert snapshot(run_copy) == before


def test_plot_skips_a_line_being_written(run_copy):
    """A running run's metrics.jsonl may end mid-line: plot draws the complete rows."""
    with open(run_copy / "metrics.jsonl", "a") as file:
        file.write('{"chunk": 5, "iter')
    outcome = process(["plot", str(run_copy), "--out", str(run_copy / "figs")])
    assert outcome.status == 0 and "Traceback" not in outcome.err, outcome
    assert (run_copy / "figs" / "learning_curves.png").is_file()


def test_no_progress_still_prints_summary_and_results_path(finished):
    out = finished["outcome"].out
    assert "ppo on CartPole-v1" in out and f"results: {finished['run']}" in out


def test_resume_remembers_host_loop_options(finished):
    assert resume_defaults(finished["run"]).control == RunControl(checkpoint_every=2,
                                                                  keep_checkpoints=2)
    assert RunFolder(finished["run"]).checkpoint_steps() == [2, 4]


# ------------------------------------------------------------------------------ sweeps

SWEEP_BASE = 'name = "s"\n[base]\nnum_envs = 8\nnum_steps = 16\ntotal_timesteps = 512\n'

BAD_SWEEPS = [
    ("malformed", 'name = "s"\n[base\n', ["sweep.toml is not valid TOML", "line 2"]),
    ("unknown-nested-key", SWEEP_BASE + 'lag = { modee = "fixed" }\n',
     ["sweep.toml", "base.lag.modee", "did you mean base.lag.mode"]),
    ("string-for-number", 'name = "s"\n[base]\ntotal_timesteps = "20k"\n',
     ["base.total_timesteps must be an integer", "'20k'"]),
    ("misspelt-base-key", SWEEP_BASE + "learning_rat = 0.01\n",
     ["base.learning_rat", "did you mean base.learning_rate"]),
    ("unknown-top-level", 'algo = ["ppo"]\n', ["unknown option algo", "did you mean algos"]),
    ("string-for-list", 'envs = "CartPole-v1"\n', ["envs must be a list"]),
    ("empty-lag-delays", "lag_delays = []\n", ["lag_delays is empty"]),
    ("empty-algos", "algos = []\n", ["algos is empty"]),
    ("empty-grid-list", 'grid = { learning_rate = [] }\n' + SWEEP_BASE,
     ["invalid sweep", "'learning_rate' has no values"]),
    ("non-number-in-grid", 'grid = { learning_rate = ["fast"] }\n',
     ["grid.learning_rate[0] must be a number"]),
    ("name-with-path", 'name = "../elsewhere"\n', ["name must be a single folder name"]),
    ("unknown-algo", 'algos = ["ppo", "vacoo"]\n' + SWEEP_BASE, ["Did you mean vaco"]),
    ("zero-envs", 'name = "s"\n[base]\nnum_envs = 0\n', ["--num-envs must be positive"]),
    ("duplicate-env", 'envs = ["CartPole-v1", "CartPole-v1"]\n' + SWEEP_BASE,
     ["envs lists CartPole-v1 more than once"]),
    ("duplicate-algo", 'algos = ["ppo", "vaco", "ppo"]\n' + SWEEP_BASE,
     ["algos lists ppo more than once"]),
    ("duplicate-lag", "lag_delays = [0, 2, 2]\n" + SWEEP_BASE,
     ["lag_delays lists 2 more than once"]),
    ("grid-gamma-above-1", 'grid = { gamma = [0.9, 1.5] }\n' + SWEEP_BASE,
     ["grid value gamma = 1.5", "--gamma must be in (0, 1]"]),
    ("grid-negative-learning-rate", 'grid = { learning_rate = [-0.001] }\n' + SWEEP_BASE,
     ["grid value learning_rate = -0.001", "--learning-rate must be > 0"]),
    ("second-cell-invalid", 'envs = ["CartPole-v1", "Acrobot-v1"]\n' + SWEEP_BASE
     + '[env_overrides]\nAcrobot-v1 = { num_minibatches = 3 }\n', ["--num-minibatches 3"]),
]


@pytest.mark.parametrize("text,needles", [r[1:] for r in BAD_SWEEPS],
                         ids=[r[0] for r in BAD_SWEEPS])
def test_bad_sweep_files(tmp_path, text, needles):
    (tmp_path / "sweep.toml").write_text(text)
    results = tmp_path / "results"
    outcome = process(["sweep", str(tmp_path / "sweep.toml"), "--results-dir", str(results)])
    assert_one_line(outcome, 2, *needles)
    assert not results.exists()


def test_missing_sweep_file(tmp_path):
    assert_one_line(process(["sweep", str(tmp_path / "nope.toml")]), 2, "cannot read",
                    "nope.toml")


GRID_VALUES = [({"lag_delay": [0, 1.5]}, "K must be an integer"),
               ({"delta": [0.0]}, "--vaco.delta must be > 0"),
               ({"gae_lambda": [0.95, -1.0]}, "--gae-lambda must be in [0, 1]"),
               ({"learning_rate": [float("nan")]}, "--learning-rate must be a finite number")]


@pytest.mark.parametrize("grid,needle", GRID_VALUES, ids=[next(iter(g)) for g, _ in GRID_VALUES])
def test_every_grid_value_is_validated_before_a_folder_is_made(tmp_path, grid, needle):
    config = TrainConfig(algo="vaco", results_dir=str(tmp_path / "results"),
                         lag=LagConfig(max_delay=4))
    with pytest.raises(ConfigError, match=re.escape(needle)):
        runner.run(config, grid=grid)
    assert not (tmp_path / "results").exists()


# ------------------------------------------------------------------- valid but ineffective

WARNED = [
    (["--vaco.delta", "0.5"], "--vaco.delta has no effect with --algo ppo"),
    (["--ppo-kl.target-kl", "0.02"], "--ppo-kl.target-kl has no effect with --algo ppo"),
    (["--algo", "vaco", "--ppo.anchor", "learner"], "--ppo.anchor has no effect with --algo vaco"),
    (["--brax-backend", "mjx"], "--brax-backend has no effect with the gymnax environment"),
    (["--lag.max-delay", "8"], "--lag.max-delay 8 is not below the run's 4 iterations"),
    (["--lag.mode", "uniform"], "--lag.mode has no effect with --lag.max-delay 0"),
    (["--distributed.sync-interval", "4"], "--distributed.sync-interval has no effect with one"),
]


@pytest.mark.parametrize("argv,warning", WARNED, ids=[w[1].split()[0] for w in WARNED])
def test_ineffective_options_warn_once(tmp_path, monkeypatch, argv, warning):
    def stop(*args, **kwargs):
        raise RunAlreadyComplete("stopped before training")

    monkeypatch.setattr(runner, "run", stop)
    outcome = cli(["train", *TINY, "--results-dir", str(tmp_path), *argv])
    assert outcome.status == 0 and "Traceback" not in outcome.err, outcome
    lines = outcome.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"jaxvaco: warning: {warning}"), outcome


def test_sweep_lag_longer_than_the_run_warns(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "run_sweep",
                        lambda spec, control, plan=None: sweep.SweepResult(tmp_path, [], [], {}))
    (tmp_path / "sweep.toml").write_text("lag_delays = [0, 8]\n" + SWEEP_BASE)
    outcome = cli(["sweep", str(tmp_path / "sweep.toml")])
    lines = outcome.err.splitlines()
    assert outcome.status == 0, outcome
    assert len(lines) == 1 and lines[0].startswith("jaxvaco: warning: lag_delays [8] are not "
                                                    "below the cells' 4 iterations"), outcome


# --------------------------------------------------------------- faults while training


def test_full_disk_during_a_checkpoint_keeps_the_earlier_ones(tmp_path, monkeypatch):
    save = ocp.CheckpointManager.save

    def full_disk(manager, step, *args, **kwargs):
        if step >= 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return save(manager, step, *args, **kwargs)

    monkeypatch.setattr(ocp.CheckpointManager, "save", full_disk)
    argv = ["train", *TINY, "--results-dir", str(tmp_path), "--run-name", "r",
            "--checkpoint-every", "1"]
    run_dir = tmp_path / "r"
    assert_one_line(cli(argv), 1, "could not write checkpoint 2", "No space left on device",
                    "(iterations 1) are intact", f"jaxvaco train --resume {run_dir.absolute()}")
    assert RunFolder(run_dir).checkpoint_steps() == [1]
    monkeypatch.undo()
    outcome = cli(["train", "--resume", str(run_dir)])
    assert outcome.status == 0, outcome
    assert RunFolder(run_dir).checkpoint_steps()[-1] == 4


def poison_above(learning_rate: float, iteration: int):
    """make_train whose chunks turn params to NaN from `iteration` on in runs whose learning
    rate is above `learning_rate` (pure, inside jit)."""
    make_train = runner.make_train

    def make(config, layout=None, replay_delays=None):
        trainer = make_train(config, layout, replay_delays)

        def train_chunk(state, hp, n):
            state, sums = trainer.train_chunk(state, hp, n)
            bad = (state.iteration >= iteration) & (hp.learning_rate > learning_rate)
            params = jax.tree.map(lambda p: jnp.where(bad, jnp.nan, p), state.params)
            return state.replace(params=params), sums

        return trainer._replace(train_chunk=train_chunk)

    return make


def test_nan_stopped_run_resumes_with_a_lower_learning_rate(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "make_train", poison_above(6e-4, 3))
    run_dir = tmp_path / "r"
    argv = ["train", *TINY, "--learning-rate", "0.001", "--results-dir", str(tmp_path),
            "--run-name", "r", "--checkpoint-every", "1"]
    assert_one_line(cli(argv), 1, "Non-finite values in iteration 3",
                    "last good checkpoint: iteration 2")
    before = snapshot(run_dir)
    assert_one_line(cli(resume(run_dir, "--learning-rate", "0.0005")), 2,
                    "--learning-rate: 0.001 -> 0.0005", "add --resume-with-changes")
    assert_one_line(cli(resume(run_dir, "--resume-with-changes", "--num-envs", "16",
                               "--learning-rate", "0.0005")), 2, "--num-envs: 8 -> 16",
                    "no array shape")
    assert snapshot(run_dir) == before
    outcome = cli(resume(run_dir, "--resume-with-changes", "--learning-rate", "0.0005"))
    assert outcome.status == 0, outcome
    record = json.loads((run_dir / "config.json").read_text())
    assert record["learning_rate"] == 0.0005
    assert record["resume_changes"] == [{"iteration": 2,
                                         "changes": ["--learning-rate: 0.001 -> 0.0005"]}]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == [1, 2, 3, 4]
    assert RunFolder(run_dir).checkpoint_steps() == [2, 3, 4]  # --checkpoint-every 1 remembered


# ------------------------------------------------------- through the console entry point


def test_no_traceback_reaches_stderr_from_the_entry_point(run_copy, tmp_path):
    truncate_config(run_copy)
    (tmp_path / "sweep.toml").write_text('name = "s"\n[base\n')
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    for args, needle in ((["train", "--resume", str(run_copy)], "config.json"),
                         (["sweep", str(tmp_path / "sweep.toml")], "not valid TOML")):
        proc = subprocess.run([sys.executable, "-m", "jaxvaco", *args], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], proc.stderr


def test_resuming_a_finished_run_exits_cleanly_while_programs_compile_ahead(run_copy, tmp_path):
    """With its programs in the program cache, a run starts compiling them in background
    threads; a command that returns before they finish (a finished run resumed) ended in
    the interpreter's teardown under them: `FATAL: exception not rethrown`, exit 134. A
    private cache, so that XLA has not compiled them yet; the first resume fills the
    program cache, the later ones compile ahead from it."""
    before = snapshot(run_copy)
    for _ in range(3):
        outcome = process(resume(run_copy), {"JAXVACO_CACHE_DIR": str(tmp_path / "cache")})
        assert_one_line(outcome, 0, "already complete")
    assert snapshot(run_copy) == before


# ---------------------------------------------------------------- signals, at any moment

LONG = [*TINY[:4], "--total-timesteps", "40960", *TINY[6:], "--chunk-iterations", "1"]
"""320 iterations of one chunk each: long enough to be interrupted while training."""


def interrupt(argv: list[str], when: Callable[[], bool], sig: int = signal.SIGINT) -> Outcome:
    """Start `jaxvaco ARGV`, send `sig` once `when()` holds, and wait for it to end."""
    child = start(argv)
    deadline = time.time() + 120
    while not when() and child.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    child.send_signal(sig)
    out, err = child.communicate(timeout=300)
    return Outcome(child.returncode, out, err)


def after(seconds: float) -> Callable[[], bool]:
    ready = time.time() + seconds
    return lambda: time.time() >= ready


@pytest.mark.parametrize("seconds", [0.3, 1.0, 2.5], ids=["imports", "jax", "tracing"])
def test_a_signal_during_start_up_ends_with_one_line_and_the_name_stays_free(tmp_path, seconds):
    argv = ["train", *LONG, "--results-dir", str(tmp_path), "--run-name", "r"]
    outcome = interrupt(argv, after(seconds))
    if outcome.status == 130:  # stopped before training: one line, no run to continue
        assert_one_line(outcome, 130, "stopped by SIGINT")
    else:  # this machine was fast: it had begun training and stopped at a chunk boundary
        assert_one_line(outcome, 130, "at a chunk boundary", "--resume")
        return
    assert not (tmp_path / "r" / "metrics.jsonl").exists()
    finished = process(["train", *TINY, "--results-dir", str(tmp_path), "--run-name", "r"])
    assert finished.status == 0, finished  # the folder left by start-up does not block it


def test_a_signal_while_options_are_parsed_still_prints_its_line():
    """Options are parsed with stderr redirected into a buffer (tyro's error box becomes one
    line); a signal arriving then printed its line into that buffer and the process ended
    with status 130 and nothing on stderr (seen on CI, where imports take seconds)."""
    script = ("import contextlib, io, os, signal\n"
              "from jaxvaco.cli import process\n"
              "process.interrupt_at_once()\n"
              "with contextlib.redirect_stderr(io.StringIO()):\n"
              "    os.kill(os.getpid(), signal.SIGINT)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert_one_line(Outcome(proc.returncode, proc.stdout, proc.stderr), 130,
                    "stopped by SIGINT")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_training_saves_a_checkpoint_and_the_run_continues(tmp_path, sig):
    run_dir = tmp_path / "r"
    argv = ["train", *LONG, "--results-dir", str(tmp_path), "--run-name", "r"]
    outcome = interrupt(argv, lambda: (run_dir / "metrics.jsonl").exists(), sig)
    assert_one_line(outcome, 128 + sig, f"stopped by {signal.Signals(sig).name} at a chunk "
                    "boundary", f"jaxvaco train --resume {run_dir}")
    assert RunFolder(run_dir).checkpoint_steps()
    resumed = process(["train", "--resume", str(run_dir)])
    assert resumed.status == 0, resumed
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == list(range(1, 321))


def test_a_signal_just_after_the_checkpoint_check_still_saves(tmp_path, monkeypatch):
    """The signal arrives after a chunk's "is a checkpoint due?" check said no: the loop
    stops, and the checkpoint the stop message names must still be written (it was not:
    the loop ended between the check and the save)."""
    def signal_then_not_due(self, loop):
        os.kill(os.getpid(), signal.SIGINT)  # StopSignals' handler sets the flag
        return False

    monkeypatch.setattr(session.Session, "checkpoint_due", signal_then_not_due)
    outcome = cli(["train", *TINY, "--results-dir", str(tmp_path), "--run-name", "r",
                   "--chunk-iterations", "1"])
    assert_one_line(outcome, 130, "stopped by SIGINT at a chunk boundary")
    assert RunFolder(tmp_path / "r").checkpoint_steps() == [1]


# ------------------------------------------------------------------ the program cache


def flip_middle_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def final_numbers(run_dir: Path) -> list[dict]:
    """metrics.jsonl without its timings."""
    timings = {"sps", "wall_time", "compile_time"}
    return [{k: v for k, v in json.loads(line).items() if k not in timings}
            for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_damaged_program_cache_entry_is_removed_and_the_numbers_are_the_same(tmp_path):
    cache = {"JAXVACO_CACHE_DIR": str(tmp_path / "cache")}
    train = ["train", *TINY, "--results-dir", str(tmp_path)]
    assert process([*train, "--run-name", "a"], cache).status == 0
    entries = sorted((tmp_path / "cache" / "jaxvaco-programs").iterdir())
    assert entries
    for entry in entries:
        flip_middle_byte(entry)
    entries[0].write_bytes(entries[0].read_bytes()[:100])  # and one truncated
    damaged = process([*train, "--run-name", "b"], cache)
    assert damaged.status == 0, damaged
    warnings = damaged.err.strip().splitlines()
    assert len(warnings) == len(entries), damaged.err
    assert all("program cache entry" in w and "was removed" in w for w in warnings), damaged.err
    assert final_numbers(tmp_path / "b") == final_numbers(tmp_path / "a")
    again = process([*train, "--run-name", "c"], cache)
    assert again.status == 0 and again.err == "", again  # the entries were written again
    assert final_numbers(tmp_path / "c") == final_numbers(tmp_path / "a")


def test_a_cache_location_that_is_a_file_is_said_once(tmp_path):
    (tmp_path / "cache").write_text("not a folder")
    outcome = process(["train", *TINY, "--results-dir", str(tmp_path), "--run-name", "a"],
                      {"JAXVACO_CACHE_DIR": str(tmp_path / "cache")})
    assert outcome.status == 0, outcome
    lines = outcome.err.strip().splitlines()
    assert len(lines) == 1 and "compilation cache" in lines[0] and "cannot be used" in lines[0]


# ------------------------------------------------------------- what a resume may not lose


def test_a_run_without_a_checkpoint_starts_again_and_keeps_the_rows_it_had(run_copy):
    """Killed before its first checkpoint completed (a sweep cell killed in its first
    chunks): the rows it wrote are moved aside, never written over, and the run trains from
    iteration 0 to the same rows."""
    no_checkpoints(run_copy)
    complete = (run_copy / "metrics.jsonl").read_bytes()
    keep_first_rows(run_copy, 2)
    partial = (run_copy / "metrics.jsonl").read_bytes()
    outcome = process(resume(run_copy))
    assert outcome.status == 0, outcome
    warning = outcome.err.strip().splitlines()
    assert len(warning) == 1 and "starts again at iteration 0" in warning[0], outcome.err
    assert (run_copy / "metrics.before-restart-1.jsonl").read_bytes() == partial
    timings = {"sps", "wall_time", "compile_time"}
    rows = [{k: v for k, v in json.loads(line).items() if k not in timings}
            for line in complete.decode().splitlines()]
    assert final_numbers(run_copy) == rows


def test_a_grid_run_without_runs_json_resumes_from_its_checkpoint_record(tmp_path):
    """The checkpoint records the grid: a lost runs.json is written again, nothing is lost
    (it cost two checkpoints and half of the metric rows before)."""
    config = TrainConfig(num_envs=8, num_steps=16, total_timesteps=1024, num_minibatches=2,
                         update_epochs=1, hidden_sizes=(8, 8), progress=False,
                         results_dir=str(tmp_path), run_name="g", chunk_iterations=2)
    control = RunControl(checkpoint_every=1, keep_checkpoints=3)
    grid = {"learning_rate": [1e-3, 3e-3]}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(session.Session, "checkpoint_due",
                      lambda self, loop: loop.iteration in (2, 4, 6))  # stop short of the end
        runner.run(config, grid=grid, control=control)
    run_dir = tmp_path / "g"
    runs_json = (run_dir / "runs.json").read_text()
    (run_dir / "runs.json").unlink()
    keep_first_rows(run_dir, 6)  # three chunks of two runs: up to the checkpoint of iteration 6
    before = snapshot(run_dir / "checkpoints")
    outcome = process(["train", "--resume", str(run_dir)])
    assert outcome.status == 0, outcome
    assert json.loads((run_dir / "runs.json").read_text()) == json.loads(runs_json)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [(row["iteration"], row["run"]) for row in rows] == [
        (i, r) for i in (2, 4, 6, 8) for r in (0, 1)]
    assert set(before) <= set(snapshot(run_dir / "checkpoints")) | {
        name for name in before if name.startswith("2/")}  # only the oldest rotated out


def test_a_full_disk_on_a_real_filesystem_ends_with_one_line(tmp_path):
    """A 3 MB tmpfs (where this machine lets the tests mount one): the checkpoint writer's
    background errors stay quiet, the command's one line says what happened."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3M", "tmpfs", str(disk)],
                             capture_output=True)
    if mounted.returncode:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        (disk / "filler").write_bytes(bytes(2_800_000))
        outcome = process(["train", *TINY, "--hidden-sizes", "64", "64", "--results-dir",
                           str(disk), "--run-name", "r", "--checkpoint-every", "1"])
        assert_one_line(outcome, 1, "could not write", "No space left on device",
                        f"jaxvaco train --resume {disk / 'r'}")
        (disk / "filler").unlink()
        assert process(["train", "--resume", str(disk / "r")]).status == 0
        assert RunFolder(disk / "r").checkpoint_steps()[-1] == 4
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_a_run_recorded_under_the_old_defaults_resumes_with_its_recorded_values(tmp_path):
    """Before the tuned defaults (issue 30) a run recorded ε 0.2, c_e 0.01, lr 2e-3 and the
    recorded critic in its config.json; resumed now, from its newest checkpoint, it goes on
    with those values: its last iteration is the very row it computed the first time."""
    old = ["--learning-rate", "2e-3", "--ent-coef", "0.01", "--clip-coef", "0.2",
           "--ppo.critic", "behaviour", "--chunk-iterations", "1", "--checkpoint-every", "1"]
    assert cli(["train", *TINY, *old, "--results-dir", str(tmp_path), "--run-name", "r"]
               ).status == 0
    run_dir = tmp_path / "r"
    recorded = json.loads((run_dir / "config.json").read_text())
    first = final_numbers(run_dir)
    shutil.rmtree(run_dir / "checkpoints" / "4")
    keep_first_rows(run_dir, 3)
    assert process(["train", "--resume", str(run_dir)]).status == 0
    resumed = json.loads((run_dir / "config.json").read_text())
    for key in ("learning_rate", "ent_coef", "clip_coef", "update_epochs", "num_minibatches"):
        assert resumed[key] == recorded[key]
    assert resumed["ppo"]["critic"] == "behaviour"
    assert final_numbers(run_dir) == first
