"""The run folder has one owner: every file a run writes is known to `RunFolder`, each
reader reads what its writer wrote, and no other module of jaxvaco spells a file name."""

from __future__ import annotations

import ast
import dataclasses
import random
from pathlib import Path

import pytest

from jaxvaco.core.config import EvalConfig, TrainConfig
from jaxvaco.core.errors import ConfigError, RunFileError
from jaxvaco.host.run_dir import RunControl
from jaxvaco.host.run_folder import (
    LAG_SCHEDULE_COLUMNS,
    ExportFolder,
    JsonlWriter,
    RunFolder,
    SweepFolder,
    read_json,
    read_rows,
    read_table,
    write_json,
    write_table,
)

FOLDERS = (RunFolder, SweepFolder, ExportFolder)
PATTERNS = ("metrics.before-restart-", "warm_start_")
"""Names of files made with a number or a tag (`RunFolder.set_aside`, `RunFolder.warm_start`)."""


@pytest.fixture(scope="module", autouse=True)
def _fast(fast_compile):
    yield


def known_paths(folder: RunFolder) -> set[Path]:
    """Every path `RunFolder` names (its properties)."""
    return {getattr(folder, name) for name, value in vars(RunFolder).items()
            if isinstance(value, property)}


def test_every_file_of_a_run_is_known(tmp_path, monkeypatch):
    pytest.importorskip("tensorboardX")
    pytest.importorskip("wandb")
    from jaxvaco.host.runner import run

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    config = TrainConfig(env="CartPole-v1", algo="ppo", num_envs=4, num_steps=8,
                         total_timesteps=64, update_epochs=1, num_minibatches=1,
                         hidden_sizes=(8,), progress=False, chunk_iterations=1,
                         eval=EvalConfig(every_chunks=0, num_episodes=2),
                         results_dir=str(tmp_path), run_name="r")
    result = run(config, control=RunControl(tensorboard=True, wandb=True))
    folder = RunFolder(result.run_dir)
    found = set(folder.path.iterdir())
    assert found <= known_paths(folder), found - known_paths(folder)
    assert {folder.config, folder.runs, folder.metrics, folder.checkpoints, folder.timings,
            folder.tensorboard, folder.wandb_id} <= found
    assert folder.trained() == [RunFolder.METRICS, RunFolder.CHECKPOINTS]
    assert folder.checkpoint_steps() == [2]
    assert folder.recorded_iterations() == 2
    assert read_rows(folder.metrics) == result.rows
    assert folder.read_runs() == {"grid": {}, "runs": result.runs}
    assert folder.read_config()["control"]["tensorboard"] is True


def random_value(rng: random.Random, depth: int = 0):
    kinds = ["int", "float", "text", "none", "bool"] + (["list", "dict"] if depth < 2 else [])
    kind = rng.choice(kinds)
    if kind == "int":
        return rng.randint(-10**12, 10**12)
    if kind == "float":
        return rng.uniform(-1e6, 1e6)
    if kind == "text":
        return random_text(rng)
    if kind == "list":
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == "dict":
        return {random_text(rng): random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return None if kind == "none" else rng.random() < 0.5


def random_text(rng: random.Random) -> str:
    return "".join(rng.choice("ab, \"'\n\tλθ\u2028/=") for _ in range(rng.randint(0, 8)))


def random_rows(rng: random.Random, n: int) -> list[dict]:
    return [{random_text(rng): random_value(rng) for _ in range(rng.randint(1, 6))}
            for _ in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_jsonl_reader_reads_what_the_writer_wrote(tmp_path, seed):
    rng = random.Random(seed)
    path = RunFolder(tmp_path).metrics
    first, second, third = (random_rows(rng, rng.randint(1, 5)) for _ in range(3))
    writer = JsonlWriter(path, None)
    writer.write(first)
    kept = writer.sync()
    writer.write(second)
    writer.close()
    assert read_rows(path) == first + second
    assert read_rows(path, kept) == first
    writer = JsonlWriter(path, kept)  # a resume cuts the rows after the checkpoint
    writer.write(third)
    writer.close()
    assert read_rows(path) == first + third
    with open(path, "a") as file:
        file.write('{"cut": ')  # a running run, mid-line
    assert read_rows(path) == first + third
    with pytest.raises(RunFileError, match=f"line {len(first + third) + 1} is damaged"):
        read_rows(path, path.stat().st_size)
    assert read_rows(path, path.stat().st_size, strict=False) == first + third + [None]


@pytest.mark.parametrize("seed", range(5))
def test_json_csv_and_lag_schedule_round_trip(tmp_path, seed):
    rng = random.Random(seed)
    folder = RunFolder(tmp_path)
    record = {random_text(rng): random_value(rng) for _ in range(6)}
    folder.write_config(record)
    assert folder.read_config() == record == read_json(folder.config)
    runs = random_rows(rng, 3)
    folder.write_runs({"lag_delay": [0, 4]}, runs)
    assert folder.read_runs() == {"grid": {"lag_delay": [0, 4]}, "runs": runs}
    write_json(folder.timings, record)
    assert read_json(folder.timings) == record

    lines = [{name: rng.randint(0, 99) for name in LAG_SCHEDULE_COLUMNS} for _ in range(7)]
    folder.write_lag_schedule(lines[:3], append=False)
    folder.write_lag_schedule(lines[3:], append=True)
    assert folder.read_lag_schedule() == lines
    folder.write_lag_schedule(lines[:2], append=False)
    assert folder.read_lag_schedule() == lines[:2]

    fields = ["a", "b, c", "d"]
    table = [{name: random_text(rng) for name in fields} for _ in range(4)]
    path = tmp_path / "derived.csv"
    assert read_table(path) == []
    write_table(path, table[:1], fields, append=True)
    write_table(path, table[1:], fields, append=True)
    assert read_table(path) == table


def test_set_aside_and_config_errors(tmp_path):
    folder = RunFolder(tmp_path / "r")
    with pytest.raises(ConfigError, match="has no config.json"):
        folder.read_config()
    folder.path.mkdir()
    assert folder.set_aside_metrics() is None
    for n in (1, 2):
        folder.metrics.write_text('{"iteration": 3}\n')
        assert folder.set_aside_metrics() == folder.set_aside(n)
    assert not folder.metrics.exists() and folder.set_aside(2).name.startswith(PATTERNS[0])
    folder.config.write_text("[1, 2]")
    with pytest.raises(RunFileError, match="JSON object"):
        folder.read_config()
    folder.runs.write_text("{}")
    with pytest.raises(RunFileError, match="grid"):
        folder.read_runs()


def file_names() -> set[str]:
    """Every file name of a run, sweep or export folder."""
    return {value for cls in FOLDERS for name, value in vars(cls).items()
            if name.isupper() and isinstance(value, str)}


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            found.update(id(stmt.value) for stmt in node.body if isinstance(stmt, ast.Expr)
                         and isinstance(stmt.value, ast.Constant))
    return found


def spelled_names(path: Path, names: set[str]) -> list[str]:
    """The file names a module spells outside docstrings: in any string (a dotted name, or a
    pattern), or as the right side of a path join (`x / "checkpoints"`)."""
    tree = ast.parse(path.read_text(), str(path))
    skip = docstrings(tree)
    dotted = {name for name in names if "." in name or "-" in name} | set(PATTERNS)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            found += [f"{path}:{node.lineno}: {name}" for name in dotted if name in node.value]
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
                and isinstance(node.right, ast.Constant) and node.right.value in names):
            found.append(f"{path}:{node.lineno}: / {node.right.value!r}")
    return found


def test_only_run_folder_spells_file_names():
    package = Path(__file__).resolve().parents[1] / "jaxvaco"
    names = file_names()
    assert {"config.json", "metrics.jsonl", "lag_schedule.csv", "checkpoints"} <= names
    found = [hit for path in sorted(package.rglob("*.py")) if path.name != "run_folder.py"
             for hit in spelled_names(path, names)]
    assert not found, "\n".join(found)


def test_folders_take_paths_and_strings(tmp_path):
    assert RunFolder(str(tmp_path)) == RunFolder(tmp_path)
    sweep = SweepFolder(tmp_path)
    assert sweep.cell("c").path == sweep.cells / "c"
    assert dataclasses.replace(RunFolder(tmp_path), path=str(tmp_path)).path == tmp_path
