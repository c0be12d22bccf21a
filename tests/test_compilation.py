"""Start-up: the persistent compilation cache, compile-time reporting, one evaluation
program, and importing only what the environment family needs."""

from __future__ import annotations

import dataclasses
import functools
import json
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from jaxvaco.cli import main
from jaxvaco.core.config import EvalConfig, TrainConfig
from jaxvaco.host import compilation
from jaxvaco.host.compilation import CompileClock, configure_cache, resolve_cache_dir
from jaxvaco.host.run_dir import RunControl
from jaxvaco.host.runner import run

TINY = ["--num-envs", "8", "--num-steps", "16", "--total-timesteps", "256",
        "--num-minibatches", "2", "--update-epochs", "1", "--hidden-sizes", "8", "8",
        "--eval.num-episodes", "2", "--no-progress", "--keep-checkpoints", "0"]


def tiny(tmp_path: Path, name: str) -> TrainConfig:
    return TrainConfig(num_envs=8, num_steps=16, total_timesteps=256, num_minibatches=2,
                       update_epochs=1, hidden_sizes=(8, 8), eval=EvalConfig(num_episodes=2),
                       progress=False, results_dir=str(tmp_path / "results"), run_name=name)


@pytest.fixture(autouse=True)
def _restore_cache():
    """Each test may point the cache elsewhere; put the session's back afterwards."""
    yield
    configure_cache("auto")


def cache_files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file()] if directory.exists() else []


def test_cache_location_precedence(monkeypatch, tmp_path):
    monkeypatch.setattr(compilation, "_jax_dir_before_us", [None])
    monkeypatch.delenv("JAXVACO_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert resolve_cache_dir() == tmp_path / "xdg" / "jaxvaco" / "jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert resolve_cache_dir() == Path.home() / ".cache" / "jaxvaco" / "jax"
    monkeypatch.setattr(compilation, "_jax_dir_before_us", [str(tmp_path / "jax")])
    assert resolve_cache_dir() == tmp_path / "jax"  # a directory the user gave JAX
    monkeypatch.setenv("JAXVACO_CACHE_DIR", str(tmp_path / "env"))
    assert resolve_cache_dir() == tmp_path / "env"
    for off in ("off", "", "OFF"):
        monkeypatch.setenv("JAXVACO_CACHE_DIR", off)
        assert resolve_cache_dir() is None
    assert resolve_cache_dir(str(tmp_path / "flag")) == tmp_path / "flag"
    assert resolve_cache_dir("off") is None


def test_help_shows_the_cache_location(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("JAXVACO_CACHE_DIR", str(tmp_path / "here"))
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert str(tmp_path / "here") in out and "--compilation-cache" in out


def test_second_identical_run_loads_from_the_cache(tmp_path):
    cache = tmp_path / "cache"
    argv = ["train", *TINY, "--results-dir", str(tmp_path / "results"),
            "--compilation-cache", str(cache)]
    jax.clear_caches()  # compile everything, as a fresh process would, whatever ran before
    compilation.compiler_options.cache_clear()  # and probe XLA's options again
    compilation._xla_knows.cache_clear()
    assert main([*argv, "--run-name", "first"]) == 0
    assert jax.config.jax_compilation_cache_dir == str(cache.absolute())
    written = cache_files(cache)
    assert written, "the first run wrote no cache entry"
    first = json.loads((tmp_path / "results" / "first" / "timings.json").read_text())
    assert first["compile"]["cache_hits"] == 0 and first["compile"]["programs"] >= 3

    # A new process (nothing compiled in memory) loads every program from the cache.
    subprocess.run([sys.executable, "-m", "jaxvaco", *argv, "--run-name", "second"],
                   check=True, capture_output=True)
    second = json.loads((tmp_path / "results" / "second" / "timings.json").read_text())
    hits, programs = second["compile"]["cache_hits"], second["compile"]["programs"]
    assert programs >= 3 and hits == programs  # init, chunk, evaluate, ...: all loaded
    assert len(cache_files(cache)) == len(written)  # nothing new to write
    rows = [json.loads(line) for line in
            (tmp_path / "results" / "second" / "metrics.jsonl").read_text().splitlines()]
    assert all(row["compile_time"] >= 0 for row in rows)
    timings = json.loads((tmp_path / "results" / "second" / "timings.json").read_text())
    assert {"setup", "train", "evaluate"} <= set(timings["phases"])

    # A run that differs only in hyperparameters (array arguments of the programs, not
    # constants in them), as a sweep's cells do, compiles nothing: XLA's programs are the
    # same and come from the cache (tracing and lowering run again).
    other = ["--learning-rate", "0.0007", "--ent-coef", "0.02", "--clip-coef", "0.15"]
    subprocess.run([sys.executable, "-m", "jaxvaco", *argv, *other, "--run-name", "third"],
                   check=True, capture_output=True)
    third = json.loads((tmp_path / "results" / "third" / "timings.json").read_text())
    assert third["compile"]["cache_hits"] == third["compile"]["programs"] >= 3


def test_disabled_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXVACO_CACHE_DIR", str(tmp_path / "env-cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    result = run(tiny(tmp_path, "off"), control=RunControl(compilation_cache="off"))
    assert not jax.config.jax_enable_compilation_cache
    assert int(result.summary["cache_hits"]) == 0
    assert not cache_files(tmp_path / "env-cache") and not cache_files(tmp_path / "xdg")
    monkeypatch.setenv("JAXVACO_CACHE_DIR", "off")  # the environment variable alone
    result = run(tiny(tmp_path, "env-off"))
    assert not cache_files(tmp_path / "xdg") and int(result.summary["cache_hits"]) == 0


def test_one_evaluation_program_for_both_modes(tmp_path):
    from jaxvaco.core.train import make_train
    from jaxvaco.host.compiled import Compiled, evaluate_policy
    from jaxvaco.host.grid import expand_runs

    config = tiny(tmp_path, "eval")
    runs, keys, hp = expand_runs(config)
    compiled = Compiled(make_train(config))
    state = compiled.init(keys, hp)
    out = evaluate_policy(compiled, state, 0, runs)
    assert set(out) == {"eval/greedy_return", "eval/stochastic_return"}
    assert compiled.evaluate._cache_size() == 1


def test_compile_clock_counts_nested_spans_once():
    clock = CompileClock()
    for event in compilation._COMPILE_EVENTS:
        clock._span(event, 10.0, 12.0, fun_name="f")  # three phases, same interval
    clock._span(compilation._BACKEND_COMPILE, 11.0, 13.0, fun_name="g")
    stats = clock.stats(since=0.0)
    assert stats.seconds == pytest.approx(3.0) and stats.programs == 2
    assert clock.stats(since=12.5).seconds == pytest.approx(0.5)
    assert clock.overlap([(9.0, 10.5), (12.0, 20.0)]) == pytest.approx(1.5)


def test_gymnax_run_skips_render_imports_and_brax_skips_gymnax():
    code = (
        "import sys\n"
        "import jaxvaco.cli\n"
        "from jaxvaco.core.envs import _resolve, make_env\n"
        "assert _resolve('inverted_pendulum')[0] == 'brax' and 'gymnax' not in sys.modules\n"
        "make_env('CartPole-v1', 2)\n"
        "assert 'seaborn' not in sys.modules and 'matplotlib.pyplot' not in sys.modules\n"
        "from gymnax.environments.misc import pong\n"
        "assert callable(pong.sns.color_palette)  # the real module, imported on first use\n"
        "assert 'seaborn' in sys.modules\n"
        "import matplotlib.pyplot as plt\n"
        "assert plt.subplots is pong.plt.subplots\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


HOST_TIMINGS = ("sps", "wall_time", "compile_time")


def metric_rows(tmp_path: Path, name: str) -> list[dict]:
    lines = (tmp_path / "results" / name / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in HOST_TIMINGS}
            for line in lines]


def test_program_cache_skips_tracing_and_changes_no_number(tmp_path, monkeypatch):
    from jaxvaco.core import train
    from jaxvaco.host.programs import FOLDER

    traced = []
    iteration = train.iteration
    monkeypatch.setattr(train, "iteration", lambda *a: traced.append(1) or iteration(*a))
    cache = tmp_path / "cache"

    run(tiny(tmp_path, "plain"), control=RunControl(compilation_cache="off"))
    assert traced, "the jit path traces the iteration"
    run(tiny(tmp_path, "first"), control=RunControl(compilation_cache=str(cache)))
    entries = {p.name: p.read_bytes() for p in (cache / FOLDER).iterdir()}
    assert len(entries) == 3  # init, chunk (with its finite check), evaluate
    traced.clear()
    run(tiny(tmp_path, "second"), control=RunControl(compilation_cache=str(cache)))
    assert not traced, "a rerun of the same configuration traced the training loop again"
    assert {p.name: p.read_bytes() for p in (cache / FOLDER).iterdir()} == entries
    plain = metric_rows(tmp_path, "plain")
    assert metric_rows(tmp_path, "first") == plain and metric_rows(tmp_path, "second") == plain


def test_damaged_program_entry_is_replaced_not_fatal(tmp_path):
    from jaxvaco.host.programs import FOLDER

    cache = tmp_path / "cache"
    run(tiny(tmp_path, "first"), control=RunControl(compilation_cache=str(cache)))
    entries = sorted((cache / FOLDER).iterdir())
    for entry in entries:
        entry.write_bytes(b"not a program")
    run(tiny(tmp_path, "second"), control=RunControl(compilation_cache=str(cache)))
    assert all(entry.read_bytes() != b"not a program" for entry in entries)
    assert metric_rows(tmp_path, "second") == metric_rows(tmp_path, "first")


def test_program_key_ignores_host_only_fields_and_follows_the_rest(tmp_path):
    from jaxvaco.host.programs import config_key

    config = tiny(tmp_path, "a")
    moved = dataclasses.replace(config, run_name="b", results_dir="elsewhere", progress=True)
    assert config_key(moved) == config_key(config)
    assert config_key(dataclasses.replace(config, num_envs=16)) != config_key(config)
    assert config_key(dataclasses.replace(config, gamma=0.9)) != config_key(config)


def test_a_trainer_built_elsewhere_never_gets_jaxvacos_cached_programs(tmp_path, monkeypatch):
    """A test's poisoned chunk (or a user's own stage) with the same config must not load
    the clean program the first run cached."""
    import jax.numpy as jnp

    from jaxvaco.core.guard import NonFiniteError
    from jaxvaco.host import runner

    control = RunControl(compilation_cache=str(tmp_path / "cache"))
    run(tiny(tmp_path, "clean"), control=control)
    make_train = runner.make_train

    def poisoned(config, layout=None, replay_delays=None):
        trainer = make_train(config, layout, replay_delays)

        def train_chunk(state, hp, n):
            state, sums = trainer.train_chunk(state, hp, n)
            return state.replace(params=jax.tree.map(lambda p: p * jnp.nan, state.params)), sums

        return trainer._replace(train_chunk=train_chunk)

    monkeypatch.setattr(runner, "make_train", poisoned)
    with pytest.raises(NonFiniteError):
        run(tiny(tmp_path, "poisoned"), control=control)


def test_program_compiled_ahead_matches_jit_and_other_signatures_still_work(tmp_path):
    import jax.numpy as jnp
    import numpy as np

    from jaxvaco.host.programs import ProgramCache

    def f(x):
        return {"y": jnp.sin(x) * 2.0, "total": jnp.sum(x)}

    program = ProgramCache(tmp_path, tiny(tmp_path, "p"), (f,)).jit("f", f)
    out_type = program.compile_ahead(jax.ShapeDtypeStruct((3,), jnp.float32))
    assert out_type["y"].shape == (3,) and out_type["total"].shape == ()
    for x in (jnp.arange(3.0), jnp.arange(4.0)):  # the compiled-ahead types, then others
        for name, value in program(x).items():
            np.testing.assert_array_equal(value, jax.jit(f)(x)[name])
    assert jax.eval_shape(program, jnp.arange(3.0))["y"].shape == (3,)  # under a trace


def test_chunk_carries_its_finite_check_and_changes_no_number(tmp_path):
    """The guard's check is an output of the chunk program (no program of its own): the
    state and sums are bit-identical to the plain vmapped `train_chunk`, and the flags
    match an independent host check, also when one run's parameters are poisoned."""
    import jax.numpy as jnp
    import numpy as np

    from jaxvaco.core.train import make_train
    from jaxvaco.host.compiled import Compiled
    from jaxvaco.host.grid import expand_runs
    from jaxvaco.host.runs_trainer import host_finite

    config = dataclasses.replace(tiny(tmp_path, "finite"), num_seeds=2)
    _, keys, hp = expand_runs(config)
    trainer = make_train(config)
    compiled = Compiled(trainer)
    state = compiled.init(keys, hp)
    plain = jax.jit(jax.vmap(trainer.train_chunk, in_axes=(0, 0, None)))
    want = jax.tree.leaves(plain(state, hp, jnp.int32(2)))
    new, sums, finite = compiled.chunk(state, hp, jnp.int32(2))
    assert all(np.array_equal(a, b) for a, b in zip(want, jax.tree.leaves((new, sums)),
                                                   strict=True))
    assert finite.tolist() == [True, True] == host_finite(new.params).tolist()
    first = jax.tree.leaves(state.params)[0]
    poisoned = state.replace(params=jax.tree.map(  # run 0 gets a NaN weight
        lambda x: x.at[0, 0].set(jnp.nan) if x is first else x, state.params))
    assert host_finite(poisoned.params).tolist() == [False, True]
    _, _, finite = compiled.chunk(poisoned, hp, jnp.int32(1))
    assert finite.tolist() == [False, True]


def test_one_run_is_computed_unbatched_exactly_as_jit_computes_it(tmp_path):
    """A single run's chunk and evaluation equal `jax.jit` of the unbatched functions on
    that run bit for bit (the fingerprints' path; a vmap over one run need not: batching
    changes XLA's float reduction order). Two runs still go through the vmap: they equal
    those runs under `jax.vmap`."""
    import jax.numpy as jnp
    import numpy as np

    from jaxvaco.core.train import make_train
    from jaxvaco.host.compiled import Compiled, checked_chunk
    from jaxvaco.host.grid import expand_runs

    def leaves_equal(a, b) -> bool:
        return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b),
                                                       strict=True))

    first = lambda tree: jax.tree.map(lambda x: x[0], tree)  # noqa: E731
    for seeds in (1, 2):
        config = dataclasses.replace(tiny(tmp_path, "one"), num_seeds=seeds)
        _, keys, hp = expand_runs(config)
        trainer = make_train(config)
        compiled = Compiled(trainer)
        state = compiled.init(keys, hp)
        chunk = compiled.chunk(state, hp, jnp.int32(2))
        returns = compiled.evaluate(state, keys, True)
        if seeds == 1:
            alone = jax.jit(functools.partial(checked_chunk, trainer))
            assert leaves_equal(first(chunk), alone(first(state), first(hp), jnp.int32(2)))
            assert np.array_equal(returns[0], jax.jit(trainer.evaluate, static_argnums=2)(
                first(state), keys[0], True))
        else:
            vmapped = jax.jit(jax.vmap(functools.partial(checked_chunk, trainer),
                                       in_axes=(0, 0, None)))
            assert leaves_equal(chunk, vmapped(state, hp, jnp.int32(2)))


def test_compile_clock_reports_phases_by_program_name():
    clock = CompileClock()
    names = ("chunk", "jit_chunk", "jit(chunk)")
    for (event, name), (start, end) in zip(zip(compilation._COMPILE_EVENTS, names, strict=True),
                                           [(0.0, 1.0), (1.0, 1.5), (1.5, 4.0)], strict=True):
        clock._span(event, start, end, fun_name=name)
    clock._span(compilation._BACKEND_COMPILE, 4.0, 4.25, fun_name="jit(evaluate)")
    phases = clock.stats(since=0.5).phases
    assert phases == {"chunk": {"trace": 0.5, "lower": 0.5, "compile": 2.5},
                      "evaluate": {"trace": 0.0, "lower": 0.0, "compile": 0.25}}


def brax_chunk_sums(options: dict) -> dict[str, float]:
    """Metrics summed over one chunk of two iterations of PPO on Brax inverted_pendulum,
    init and chunk compiled with these XLA options."""
    import jax.numpy as jnp
    import numpy as np

    from jaxvaco.core.train import make_train
    from jaxvaco.host.grid import hyperparams_from_config

    config = TrainConfig(env="inverted_pendulum", num_envs=8, num_steps=16, hidden_sizes=(16,),
                         total_timesteps=8 * 16 * 2, num_minibatches=2, update_epochs=2,
                         chunk_iterations=2, progress=False,
                         eval=EvalConfig(every_chunks=0, num_episodes=2))
    trainer, hp = make_train(config), hyperparams_from_config(config)
    state = jax.jit(trainer.init, compiler_options=options)(jax.random.PRNGKey(0), hp)
    _, sums = jax.jit(trainer.train_chunk, compiler_options=options)(state, hp, jnp.int32(2))
    return {key: float(np.asarray(value)) for key, value in sums.items()}


def test_brax_compiler_options_change_the_numbers_only_by_float_rounding():
    """[ours] Brax runs compile with XLA's elemental emitters on the CPU
    (`compilation.CPU_COMPILER_OPTIONS`); the same iterations compiled with XLA's defaults
    agree to the fingerprints' tolerance (rtol 1e-4), and the options are in force."""
    import numpy as np

    options = compilation.compiler_options("brax")
    if not options:
        pytest.skip("this XLA does not know the option (it then compiles with its defaults)")
    assert compilation.compiler_options("gymnax") == {}
    ours, xla_defaults = brax_chunk_sums(options), brax_chunk_sums({})
    assert set(ours) == set(xla_defaults)
    for key, value in xla_defaults.items():
        np.testing.assert_allclose(ours[key], value, rtol=1e-4, atol=1e-5, err_msg=key)


def test_xla_defaults_variable_switches_the_options_off(monkeypatch):
    monkeypatch.setenv(compilation.DEFAULTS_ENV_VAR, "1")
    compilation.compiler_options.cache_clear()
    try:
        assert compilation.compiler_options("brax") == {}
    finally:
        monkeypatch.delenv(compilation.DEFAULTS_ENV_VAR)
        compilation.compiler_options.cache_clear()


@pytest.mark.parametrize("env", ["CartPole-v1", "Breakout-MinAtar", "inverted_pendulum"])
def test_rarely_run_programs_compile_lighter_to_bit_identical_outputs(env):
    """[ours] Init and evaluation compile with LLVM's lighter level on the CPU
    (`compilation.RARELY_RUN_OPTIONS`); their outputs (every state leaf, greedy and
    stochastic returns) are bit-identical to the same programs at XLA's default level."""
    import jax.numpy as jnp
    import numpy as np

    from jaxvaco.core.train import make_train
    from jaxvaco.host.grid import hyperparams_from_config

    config = TrainConfig(env=env, num_envs=4, num_steps=8, hidden_sizes=(16,),
                         total_timesteps=4 * 8, num_minibatches=1, update_epochs=1,
                         progress=False, eval=EvalConfig(every_chunks=0, num_episodes=3))
    trainer, hp = make_train(config), hyperparams_from_config(config)
    lighter = compilation.compiler_options(trainer.spec.family, "evaluate")
    if "xla_backend_optimization_level" not in lighter:
        pytest.skip("this XLA does not know the option (it then compiles with its defaults)")
    assert lighter == compilation.compiler_options(trainer.spec.family, "init")
    family = compilation.compiler_options(trainer.spec.family)  # the chunk's
    assert lighter == {**family, **compilation.RARELY_RUN_OPTIONS}

    def outputs(options: dict) -> list[np.ndarray]:
        state = jax.jit(trainer.init, compiler_options=options)(jax.random.PRNGKey(3), hp)
        evaluate = jax.jit(trainer.evaluate, compiler_options=options)
        key = jax.random.PRNGKey(4)
        returns = [evaluate(state, key, jnp.bool_(greedy)) for greedy in (True, False)]
        return [np.asarray(leaf) for leaf in jax.tree.leaves((state, returns))]

    ours, xla_level = outputs(lighter), outputs(family)
    assert len(ours) == len(xla_level)
    for a, b in zip(ours, xla_level, strict=True):
        np.testing.assert_array_equal(a, b)
