"""Using a trained policy (issue 32): `jaxvaco.load_policy`, `jaxvaco eval | export | envs`.

One tiny CartPole run of 2 seeds is trained once (in-process, checkpoints and evaluations
at iterations 2 and 4); the commands run as processes (`python -m jaxvaco`), compiled as
the in-process training was (XLA's fast-compile mode), so the evaluation they repeat is
the same program on the same keys and must give the run's recorded returns bit for bit.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxvaco
from jaxvaco.cli import main
from jaxvaco.core.config import ConfigError, TrainConfig
from jaxvaco.core.envs import env_spec
from jaxvaco.core.networks import greedy_action, make_network
from jaxvaco.core.normalize import RunningMeanStd, normalize_obs
from jaxvaco.host.policy import Policy, load_policy
from jaxvaco.host.policy_eval import evaluate_runs
from jaxvaco.host.policy_export import export_policy
from jaxvaco.host.policy_source import Source, open_source, parse_run, select_run
from tests.processes import CRASHES, Outcome, process

TINY = ["--num-envs", "8", "--num-steps", "16", "--total-timesteps", "512",
        "--num-minibatches", "2", "--update-epochs", "1", "--hidden-sizes", "8", "8",
        "--no-progress"]
"""4 iterations of one chunk each."""
EPISODES = 4
@pytest.fixture(scope="module", autouse=True)
def _fast(fast_compile):
    yield


def jaxvaco_process(*argv: str) -> Outcome:
    return process(list(argv))


def assert_refused(outcome: Outcome, *needles: str) -> str:
    """Exit 2, no traceback or crash, stderr one `jaxvaco:` line holding every needle."""
    for crash in CRASHES:
        assert crash not in outcome.out + outcome.err, outcome
    assert outcome.status == 2, outcome
    lines = outcome.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jaxvaco: "), outcome.err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def assert_ok(outcome: Outcome) -> None:
    for crash in CRASHES:
        assert crash not in outcome.out + outcome.err, outcome
    assert outcome.status == 0, outcome


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """results/r: CartPole-v1, PPO, seeds 0 and 1, evaluated (4 episodes) and checkpointed
    at iterations 2 and 4."""
    results = tmp_path_factory.mktemp("results")
    argv = ["train", *TINY, "--num-seeds", "2", "--eval.num-episodes", str(EPISODES),
            "--eval.every-chunks", "2", "--checkpoint-every", "2", "--results-dir",
            str(results), "--run-name", "r"]
    assert main(argv) == 0
    return results / "r"


def recorded(run_dir: Path, iteration: int, run: int, name: str) -> float:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    [row] = [r for r in rows if r["iteration"] == iteration and r["run"] == run]
    return row[name]


@pytest.fixture
def run_copy(trained, tmp_path) -> Path:
    """A private copy of the run (eval writes eval.json into its run folder)."""
    return Path(shutil.copytree(trained, tmp_path / "r"))


# ------------------------------------------------------------------- jaxvaco eval


def test_eval_reproduces_the_runs_final_greedy_evaluation(run_copy):
    outcome = jaxvaco_process("eval", str(run_copy), "--episodes", str(EPISODES))
    assert_ok(outcome)
    report = json.loads((run_copy / "eval.json").read_text())
    assert (report["checkpoint"], report["mode"], report["episodes"]) == (4, "greedy", EPISODES)
    assert [row["run"] for row in report["runs"]] == [0, 1]
    for row in report["runs"]:
        final = recorded(run_copy, 4, row["run"], "eval/greedy_return")
        assert row["mean"] == final  # bit for bit: the runner's program and keys
        assert row["recorded"] == final and len(row["returns"]) == EPISODES
        assert row["ci95"][0] <= row["mean"] <= row["ci95"][1]
    assert "return: mean [95% CI]" in outcome.out and "eval.json" in outcome.out


def test_eval_one_run_stochastic_at_an_earlier_checkpoint(run_copy):
    outcome = jaxvaco_process("eval", str(run_copy), "--run", "seed=1", "--stochastic",
                              "--checkpoint", "2")
    assert_ok(outcome)
    report = json.loads((run_copy / "eval.json").read_text())
    [row] = report["runs"]
    assert (row["run"], row["labels"], report["checkpoint"]) == (1, {"seed": 1}, 2)
    assert row["mean"] == recorded(run_copy, 2, 1, "eval/stochastic_return")


def test_eval_video_gif_of_cartpole(run_copy, tmp_path):
    from PIL import Image

    video = tmp_path / "r.gif"
    outcome = jaxvaco_process("eval", str(run_copy), "--run", "1", "--episodes", "3",
                              "--seed", "7", "--video", str(video))
    assert_ok(outcome)
    with Image.open(video) as gif:
        assert gif.format == "GIF" and gif.n_frames > 1
    report = json.loads((run_copy / "eval.json").read_text())
    [row] = report["runs"]
    assert (report["seed"], len(row["returns"]), row["recorded"]) == (7, 3, None)
    # The video is the evaluation's episode 0 (CartPole's returns are whole numbers).
    assert f"episode 0 (return {row['returns'][0]:g}," in outcome.out
    assert not list(tmp_path.glob(".*.tmp"))


# ------------------------------------------------------------ export and load_policy


def test_export_and_load_policy_round_trip(trained, tmp_path):
    out = tmp_path / "policy"
    assert_ok(jaxvaco_process("export", str(trained), "--run", "1", "--out", str(out)))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["env"] == "CartPole-v1" and manifest["algo"] == "ppo"
    assert manifest["network"]["hidden_sizes"] == [8, 8]
    assert manifest["network"]["obs_shape"] == [4]
    assert manifest["network"]["action_type"] == "discrete"
    assert manifest["network"]["num_actions"] == 2
    assert manifest["obs_normalization"] is None and manifest["labels"] == {"seed": 1}
    assert manifest["source"]["checkpoint"] == 4 and manifest["source"]["run"] == 1
    assert manifest["jaxvaco_version"] == jaxvaco.__version__
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "params.msgpack"]

    original, exported = load_policy(trained, run=1), jaxvaco.load_policy(out)
    assert exported.labels == {"seed": 1} and exported.config == original.config
    obs = jax.random.normal(jax.random.PRNGKey(3), (256, 4)) * 2
    assert np.array_equal(original.act(obs), exported.act(obs))
    key = jax.random.PRNGKey(11)
    drawn = original.act(obs, key, greedy=False)
    assert np.array_equal(drawn, exported.act(obs, key, greedy=False))
    assert not np.array_equal(drawn, original.act(obs))  # a sample, not the arg-max

    # The export evaluates like the run (CartPole: whole-number returns).
    returns = evaluate_runs(open_source(out), 4, EPISODES, True)
    assert returns.shape == (1, EPISODES)
    assert returns[0].mean() == recorded(trained, 4, 1, "eval/greedy_return")


def test_load_policy_picks_a_run_by_index_labels_and_checkpoint(trained):
    by_labels = load_policy(trained, run={"seed": 1})
    by_index = load_policy(trained, run=1)
    first = load_policy(trained)
    assert by_labels.labels == {"seed": 1} and first.labels == {"seed": 0}
    assert by_labels.source == {"path": str(trained), "kind": "run", "run": 1, "checkpoint": 4}
    same = jax.tree.map(np.array_equal, by_labels.params, by_index.params)
    assert all(jax.tree.leaves(same))
    differs = jax.tree.map(np.array_equal, first.params, by_index.params)
    assert not all(jax.tree.leaves(differs))
    earlier = load_policy(trained, run=1, checkpoint=2)
    assert earlier.source["checkpoint"] == 2
    assert not all(jax.tree.leaves(jax.tree.map(np.array_equal, earlier.params,
                                                by_index.params)))
    assert by_index.obs_stats is None  # the run did not normalise observations
    assert isinstance(by_index.config, TrainConfig) and by_index.config.num_seeds == 2
    with pytest.raises(ConfigError, match=r"run 2 is out of range.*0 \(seed 0\), 1 \(seed 1\)"):
        load_policy(trained, run=2)
    with pytest.raises(ConfigError, match=r"no run .* match seed 5"):
        load_policy(trained, run={"seed": 5})
    with pytest.raises(ConfigError, match="no label 'lag_delay'"):
        load_policy(trained, run={"lag_delay": 4})
    with pytest.raises(ConfigError, match="no checkpoint 3.*2, 4"):
        load_policy(trained, checkpoint=3)


def test_select_run_among_grid_labels():
    runs = [{"seed": s, "lag_delay": k} for k in (0, 4) for s in (0, 1)]
    source = Source(Path("results/grid"), "run", TrainConfig(), runs, [8])
    assert select_run(source, {"seed": 1, "lag_delay": 4}) == 3
    assert select_run(source, {"lag_delay": 0, "seed": 0}) == 0
    assert select_run(source, 2) == 2
    with pytest.raises(ConfigError, match=r"2 runs \(2, 3\) of results/grid match lag_delay=4"):
        select_run(source, {"lag_delay": 4})
    with pytest.raises(ConfigError, match="out of range"):
        select_run(source, -1)
    assert parse_run("3") == 3 and parse_run(None) is None
    assert parse_run("seed=1,lag_delay=4") == {"seed": 1, "lag_delay": 4}
    assert parse_run("learning_rate=0.001") == {"learning_rate": 0.001}
    with pytest.raises(ConfigError, match="--run"):
        parse_run("seed")


def test_act_normalises_observations_jits_and_checks_shapes(tmp_path):
    """A policy whose run normalised observations: act() applies the statistics, and an
    export keeps them exactly."""
    config = TrainConfig(env="Pendulum-v1", normalize_obs=True, hidden_sizes=(8, 8))
    spec = env_spec(config.env)
    network = make_network(spec, config.hidden_sizes, config.activation)
    params = network.init(jax.random.PRNGKey(0), jnp.zeros((1, 3)))
    stats = RunningMeanStd(jnp.array([0.5, -0.2, 1.0]), jnp.array([0.3, 2.0, 9.0]),
                           jnp.float32(100.0))
    policy = Policy(network, spec, config, params, stats, {"seed": 0},
                    {"path": str(tmp_path), "kind": "run", "run": 0, "checkpoint": 7})
    obs = jax.random.normal(jax.random.PRNGKey(1), (32, 3)) * 4

    @jax.jit
    def by_hand(params, stats, obs):
        pi, _ = network.apply(params, normalize_obs(stats, obs))
        return jnp.clip(greedy_action(pi), -2.0, 2.0)  # Pendulum's action bounds

    expected = by_hand(params, stats, obs)
    unnormalised, _ = network.apply(params, obs)
    assert not np.allclose(expected, jnp.clip(greedy_action(unnormalised), -2.0, 2.0))
    assert np.array_equal(policy.act(obs), expected)
    # Jitted around, the parameters become constants of the program (XLA may round the
    # last bit otherwise).
    np.testing.assert_allclose(jax.jit(policy.act)(obs), expected, rtol=1e-6, atol=1e-7)
    assert policy.act(obs[0]).shape == (1,)
    key = jax.random.PRNGKey(2)
    drawn = policy.act(obs, key, greedy=False)
    np.testing.assert_allclose(jax.jit(lambda o, k: policy.act(o, k, greedy=False))(obs, key),
                               drawn, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match=r"shape \(3,\) or \[B, 3\]"):
        policy.act(jnp.zeros((2, 4)))
    with pytest.raises(ValueError, match="pass a key"):
        policy.act(obs, greedy=False)

    loaded = load_policy(export_policy(policy, tmp_path / "export"))
    assert np.array_equal(loaded.act(obs), expected)
    assert np.array_equal(loaded.act(obs, key, greedy=False), drawn)
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(loaded.obs_stats),
                                                    jax.tree.leaves(stats), strict=True))


def test_a_damaged_export_is_refused(trained, tmp_path):
    out = export_policy(load_policy(trained), tmp_path / "policy")
    data = bytearray((out / "params.msgpack").read_bytes())
    data[-1] ^= 1
    (out / "params.msgpack").write_bytes(bytes(data))
    with pytest.raises(ConfigError, match="differs from the digest"):
        load_policy(out)


# ----------------------------------------------------------------------- bad input


@pytest.fixture
def no_checkpoints(run_copy) -> Path:
    shutil.rmtree(run_copy / "checkpoints")
    return run_copy


def test_refused_not_a_run(tmp_path):
    assert_refused(jaxvaco_process("eval", str(tmp_path)), "not a jaxvaco run directory")


def test_refused_run_without_checkpoints(no_checkpoints):
    assert_refused(jaxvaco_process("eval", str(no_checkpoints)), "has no checkpoints")
    assert not (no_checkpoints / "eval.json").exists()


def test_refused_run_index_out_of_range(run_copy):
    assert_refused(jaxvaco_process("eval", str(run_copy), "--run", "5"),
                   "run 5 is out of range", "0 (seed 0), 1 (seed 1)")


def test_refused_unwritable_video_path(run_copy, tmp_path):
    assert_refused(jaxvaco_process("eval", str(run_copy), "--video",
                                   str(tmp_path / "missing" / "r.gif")),
                   "--video", "does not exist")


def test_refused_video_format(run_copy):
    assert_refused(jaxvaco_process("eval", str(run_copy), "--video", "r.avi"), ".gif or .mp4")


def test_refused_mp4_without_an_encoder(run_copy, tmp_path):
    from jaxvaco.host.video import ffmpeg_executable

    if ffmpeg_executable() is not None:
        pytest.skip("an ffmpeg is installed here: .mp4 can be written")
    line = assert_refused(jaxvaco_process("eval", str(run_copy), "--video",
                                          str(tmp_path / "r.mp4")), "ffmpeg")
    assert "jaxvaco[video]" in line
    assert not (run_copy / "eval.json").exists()  # refused before evaluating


@pytest.mark.parametrize(("argv", "needles"), [
    (["eval", "{run}", "--checkpoint", "3"], ["no checkpoint 3", "2, 4"]),
    (["eval", "{run}", "--run", "seed=9"], ["no run", "seed 9"]),
    (["eval", "{run}", "--episodes", "0"], ["--episodes"]),
    (["eval", "{run}/missing"], ["is not a folder"]),
    (["export", "{run}", "--out", "{run}"], ["not empty"]),
    (["export", "{run}", "--run", "2", "--out", "{tmp}/p"], ["out of range"]),
    (["eval", "{run}", "--bogus"], ["--bogus"]),
])
def test_refused_in_process(trained, tmp_path, capsys, argv, needles):
    argv = [a.format(run=trained, tmp=tmp_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxvaco: "), err
    for needle in needles:
        assert needle in err[0], (needle, err[0])


FRAMES = [np.full((24, 31, 3), 40 * i, np.uint8) for i in range(5)]


def test_write_video_gif(tmp_path):
    from PIL import Image

    from jaxvaco.host.video import write_video

    with Image.open(write_video(FRAMES, tmp_path / "v.gif", 20.0)) as gif:
        assert gif.n_frames == 5 and gif.size == (31, 24) and gif.info["duration"] == 50
    assert [p.name for p in tmp_path.iterdir()] == ["v.gif"]  # no temporary file left


def test_write_video_mp4(tmp_path):
    from jaxvaco.host.video import ffmpeg_executable, write_video

    if ffmpeg_executable() is None:
        pytest.skip("no ffmpeg here for .mp4 (pip install imageio-ffmpeg)")
    data = write_video(FRAMES, tmp_path / "v.mp4", 20.0).read_bytes()
    assert data[4:8] == b"ftyp" and len(data) > 100  # an MP4 file (odd width padded)
    assert [p.name for p in tmp_path.iterdir()] == ["v.mp4"]


def test_env_without_renderer_is_refused():
    from jaxvaco.host.video import check_renderable

    with pytest.raises(ConfigError, match="DeepSea-bsuite has no renderer"):
        check_renderable("DeepSea-bsuite")
    check_renderable("CartPole-v1")
    check_renderable("Breakout-MinAtar")


# ------------------------------------------------------------- envs and --version


def test_envs_lists_families_and_shapes_and_version():
    outcome = jaxvaco_process("envs")
    assert_ok(outcome)
    lines = {line.split("│")[2].strip(): line for line in outcome.out.splitlines()
             if line.count("│") >= 5}
    assert "discrete 2" in lines["CartPole-v1"] and " 4 " in lines["CartPole-v1"]
    assert "gymnax classic control" in lines["CartPole-v1"]
    assert "discrete 3" in lines["Breakout-MinAtar"] and "10×10×4" in lines["Breakout-MinAtar"]
    assert "gymnax MinAtar" in lines["Breakout-MinAtar"]
    assert "continuous 1" in lines["inverted_pendulum"] and " 4 " in lines["inverted_pendulum"]
    assert "continuous 8" in lines["ant"] and " 27 " in lines["ant"]
    assert "gymnax bsuite" in lines["Catch-bsuite"]
    version = jaxvaco_process("--version")
    assert_ok(version)
    assert version.out.strip() == f"jaxvaco {jaxvaco.__version__}"


def test_brax_shapes_table_matches_brax_spec():
    from jaxvaco.core.envs.brax_env import BRAX_SHAPES, brax_spec

    spec = brax_spec("inverted_pendulum")
    assert BRAX_SHAPES["inverted_pendulum"] == (spec.obs_shape[0], spec.num_actions)


@pytest.mark.slow
def test_brax_shapes_table_matches_every_brax_env():
    from jaxvaco.core.envs.brax_env import (
        BRAX_ENV_NAMES,
        BRAX_ONLY_BACKENDS,
        BRAX_SHAPES,
        brax_spec,
    )

    assert set(BRAX_SHAPES) == set(BRAX_ENV_NAMES)
    for name in BRAX_ENV_NAMES:
        spec = brax_spec(name, BRAX_ONLY_BACKENDS.get(name, "spring"))
        assert BRAX_SHAPES[name] == (spec.obs_shape[0], spec.num_actions), name


# ------------------------------------------------------------------------- Brax video


def headless_gl_problem() -> str | None:
    """Why MuJoCo cannot render headless here (None when it can), asked in a process."""
    probe = subprocess.run([sys.executable, "-c", "from jaxvaco.host.video import headless_gl; "
                            "headless_gl()"], capture_output=True, text=True, timeout=120)
    return None if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["?"])[-1]


@pytest.mark.slow
def test_eval_video_gif_of_brax(tmp_path):
    from PIL import Image

    problem = headless_gl_problem()
    if problem:
        pytest.skip(f"no headless rendering here: {problem}")
    argv = ["train", *TINY, "--env", "inverted_pendulum", "--normalize-obs",
            "--eval.num-episodes", "2", "--results-dir", str(tmp_path), "--run-name", "b"]
    assert main(argv) == 0
    video = tmp_path / "b.gif"
    outcome = jaxvaco_process("eval", str(tmp_path / "b"), "--video", str(video))
    assert_ok(outcome)
    report = json.loads((tmp_path / "b" / "eval.json").read_text())
    assert report["runs"][0]["mean"] == recorded(tmp_path / "b", 4, 0, "eval/greedy_return")
    with Image.open(video) as gif:
        assert gif.n_frames > 1 and gif.size == (320, 240)
