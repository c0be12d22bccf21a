"""The second held-out pool's runner (experiments/held_out_2.py): its sweep never writes
into the committed results folder, and a rerun skips the cells the committed CSV holds."""

from __future__ import annotations

import shutil
from pathlib import Path

from experiments import held_out_2
from experiments.common import run_spec
from jaxvaco.lab.sweep import load_sweep_file


def test_no_sweep_of_the_spec_writes_into_the_committed_results_folder(tmp_path):
    """A sweep rewrites its folder's results.csv from the cells complete in its own run
    folders (none in a fresh checkout): neither `jaxvaco sweep` on the spec nor `--run` may
    use the folder of the committed CSV."""
    spec = load_sweep_file(held_out_2.SPEC)
    repo = Path(__file__).resolve().parents[1]
    assert (repo / spec.results_dir / spec.name).resolve() != held_out_2.DATA.parent
    ours = held_out_2.held_out_2_sweep(tmp_path)
    assert Path(ours.results_dir) / ours.name == tmp_path / "runs" / "held_out_2"


def test_a_rerun_skips_the_cells_the_csv_holds(tmp_path):
    csv = tmp_path / "results.csv"
    shutil.copy(held_out_2.DATA, csv)
    before = csv.read_bytes()
    spec = held_out_2.held_out_2_sweep(tmp_path, envs=["Seaquest-MinAtar"], seeds=1, steps=256)
    run_spec(spec, csv)
    assert csv.read_bytes() == before
    assert not (tmp_path / "runs" / "held_out_2" / "runs").exists()
