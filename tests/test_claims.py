"""The README's figures as data (experiments/claims/): the README's generated tables match
the recorded claims, every claim is recorded, and the tolerance rules say what they state.

Re-measuring the claims is `python -m experiments.check_claims --fast` (CI runs it after
the tests), not a test.
"""

from __future__ import annotations

import dataclasses

import pytest

from experiments.claims import blocks, data, registry, render, rules, runs
from experiments.claims.record import load_record, recorded_for
from experiments.markdown import table, table_rows


@pytest.fixture(scope="module")
def record() -> dict:
    return load_record()


def test_readme_tables_are_generated_from_the_record(record):
    assert render.out_of_sync(record) == [], \
        "run `python -m experiments.render_readme` after changing claims.json"


def test_every_claim_is_recorded_with_its_command_and_commit(record):
    ids = [claim.id for claim in registry.CLAIMS]
    assert len(ids) == len(set(ids))
    missing = [i for i in ids if i not in record and not i.endswith("-rerun")]
    assert missing == []
    for claim_id, entry in record.items():
        assert claim_id in registry.BY_ID, f"{claim_id} is recorded but not a claim"
        assert entry["commit"] and entry["date"]
        assert entry["command"] == registry.BY_ID[claim_id].command, claim_id


def test_fast_set_holds_no_speed_claim():
    fast = [c for c in registry.CLAIMS if c.fast]
    assert fast and all(c.kind != "speed" for c in fast)


def test_seed_count_rule():
    rule = rules.solved_at_least(15)
    assert rule({}, {"greedy": [500.0] * 15 + [200.0]})[0]
    assert not rule({}, {"greedy": [500.0] * 14 + [474.9, 200.0]})[0]


def test_mean_inside_ci_rule():
    recorded = {"mean": 300.0, "lo": 250.0, "hi": 350.0}
    assert rules.inside_ci(recorded, {"mean": 349.0})[0]
    assert not rules.inside_ci(recorded, {"mean": 351.0})[0]


def test_ratio_band_rule():
    rule = rules.ratio_band(0.8, 1.25)
    assert rule({"ratio": 1.0}, {"ratio": 1.2})[0]
    assert not rule({"ratio": 1.0}, {"ratio": 0.75})[0]


def test_sweep_rerun_rule_counts_cells():
    recorded = {"t": [["algo", "K=0", "K=4"], ["ppo", "0.5 [0.4, 0.6]", "0.3 [0.2, 0.4]"]]}
    inside = {"t": [["algo", "K=0", "K=4"], ["ppo", "0.55 [0.5, 0.6]", "0.25 [0.2, 0.3]"]]}
    half = {"t": [["algo", "K=0", "K=4"], ["ppo", "0.55 [0.5, 0.6]", "0.9 [0.8, 1.0]"]]}
    assert rules.most_cells_inside(0.9)(recorded, inside)[0]
    assert not rules.most_cells_inside(0.9)(recorded, half)[0]
    pm = {"t": [["variant", "K = 0"], ["grpo β", "0.84 ± 0.02"]]}  # the LLM tables' cells
    near = {"t": [["variant", "K = 0"], ["grpo β", "0.83 ± 0.1"]]}
    far = {"t": [["variant", "K = 0"], ["grpo β", "0.87 ± 0.01"]]}
    assert rules.most_cells_inside(1.0)(pm, near)[0]
    assert not rules.most_cells_inside(1.0)(pm, far)[0]
    assert rules.most_cells_inside(0.5)(recorded, half)[0]
    # a rerun of some cells is compared by row label and column header, not position
    two = {"t": [["algo", "K=0", "K=4"], ["ppo", "0.5 [0.4, 0.6]", "0.3 [0.2, 0.4]"],
                 ["vaco", "0.7 [0.6, 0.8]", "0.7 [0.6, 0.8]"]]}
    some = {"t": [["algo", "K=4"], ["vaco", "0.75 [0.7, 0.8]"]]}
    assert rules.most_cells_inside(1.0)(two, some) == (True, "1 of 1 cells inside the "
                                                                "recorded CI (need 100%)")
    assert not rules.most_cells_inside(1.0)(two, {"t": [["algo", "K=4"],
                                                         ["ppo", "0.75 [0.7, 0.8]"]]})[0]
    assert not rules.most_cells_inside(0.5)(two, {"t": [["algo", "K=2"],
                                                         ["ppo", "0.3 [0.2, 0.4]"]]})[0]


def test_data_claims_compare_exactly():
    assert rules.same({"t": [["a", "1"]]}, {"t": [["a", "1"]]})[0]
    ok, note = rules.same({"t": [["a", "1"]]}, {"t": [["a", "2"]]})
    assert not ok and "t" in note


def test_llm_lag_tables_from_summary_csv(tmp_path):
    """Both accuracies per variant and K as 'mean ± half-width', '—' where a (variant, K)
    has not run; TV and clip/filter fraction at the largest K."""
    from jaxvaco.lab.results import write_rows

    rows = [{"method": "grpo β", "K": 0, "final_acc": 0.8404, "ci95": 0.0221,
             "sampled_acc": 0.7881, "sampled_ci95": 0.007, "tv/backward": 0.0,
             "fraction": 0.001},
            {"method": "grpo β", "K": 8, "final_acc": 0.81, "ci95": 0.03, "sampled_acc": 0.75,
             "sampled_ci95": 0.02, "tv/backward": 0.0412, "fraction": 0.0234},
            {"method": "vaco β", "K": 0, "final_acc": 0.83, "ci95": 0.01, "sampled_acc": 0.78,
             "sampled_ci95": 0.01, "tv/backward": 0.0, "fraction": 0.0}]
    write_rows(tmp_path / "summary.csv", rows)
    tables = data.llm_lag_tables(tmp_path)
    assert tables["greedy"] == [
        ["variant", "K = 0", "K = 8", "tv/backward at K = 8", "clip/filter frac at K = 8"],
        ["grpo β", "0.840 ± 0.022", "0.810 ± 0.030", "0.041", "0.023"],
        ["vaco β", "0.830 ± 0.010", "—", "—", "—"]]
    assert tables["sampled"] == [["variant", "K = 0", "K = 8"],
                                 ["grpo β", "0.788 ± 0.007", "0.750 ± 0.020"],
                                 ["vaco β", "0.780 ± 0.010", "—"]]


def test_table_rows_round_trip():
    rows = [["algo", "K=0"], ["ppo", "0.781 [0.736, 0.811]"]]
    assert table_rows(table(rows)) == rows
    assert rules.parse_ci(rows[1][1]) == (0.781, 0.736, 0.811)
    assert rules.parse_ci("0.5 ± 0.25") == (0.5, 0.25, 0.75)


def test_render_replaces_only_between_markers(record):
    text = "before\n<!-- claims:sync-sweep -->\nold table\n<!-- /claims:sync-sweep -->\nafter\n"
    new, missing = render.render(text, record)
    assert new.startswith("before\n<!-- claims:sync-sweep -->\n| S |")
    assert new.endswith("\n<!-- /claims:sync-sweep -->\nafter\n")
    assert "old table" not in new and "sync-sweep" not in missing


STARTUP_VALUE = {
    "repeats": 3, "total": 1_000_000, "cpus": 2, "load": {"start": 0.4, "end": 0.6},
    "medians": {"reference": 12.0, "jaxvaco cold": 9.5, "jaxvaco warm": 6.0,
                "jaxvaco train (defaults), warm": 7.9},
    "ratios": {"jaxvaco cold": 1.26, "jaxvaco warm": 2.0, "jaxvaco train (defaults), warm": 1.52},
    "reference_inside": {"compile": 4.0, "train": 5.0},
    "breakdown": {mode: {"start-up (interpreter, imports, CLI)": 1.5, "setup: compiling": c,
                         "setup: running": 0.2, "train: compiling": c, "train: running": 3.0,
                         "checkpoint: compiling": 0.0, "checkpoint: running": 0.1,
                         "exit (summary table, shutdown)": 0.1, "total": t}
                  for mode, c, t in (("cold", 2.0, 9.5), ("warm", 0.5, 6.0))},
    "programs": {"cold": [12, 0], "warm": [12, 12]},
}


def startup_record(value: dict) -> dict:
    return {"startup": {"value": value, "commit": "abc1234", "date": "2026-12-04 10:00 UTC",
                        "command": runs.STARTUP}}


def with_(value: dict, **changes: dict) -> dict:
    """A copy of a start-up value with some of its medians / ratios replaced."""
    out = {**value}
    for key, update in changes.items():
        out[key] = {**value[key], **update}
    return out


def test_startup_targets_are_computed_from_the_figures():
    assert [met for _, _, met in rules.startup_targets(STARTUP_VALUE)] == [True, True, True]
    missed = with_(STARTUP_VALUE, ratios={"jaxvaco cold": 1.19, "jaxvaco warm": 1.8},
                   medians={"jaxvaco train (defaults), warm": 8.0})
    assert [met for _, _, met in rules.startup_targets(missed)] == [False, True, False]


def test_startup_table_renders_the_verdicts():
    text = blocks.startup(startup_record(STARTUP_VALUE))
    rows = table_rows(text.split("\n\n")[0])
    assert rows[0][0].startswith("run (2026-12-04 10:00, load average 0.4 at the start, 0.6 "
                                 "at the end")
    by_label = {row[0]: row[1:] for row in rows[1:]}
    assert by_label["`jaxvaco train`, cold cache"] == ["9.50 s", "**1.26**", "≥ 1.2 (met)"]
    assert by_label["`jaxvaco train` with no options, warm cache"][2] == \
        "< 8 s on an idle CPU (met)"
    slow = with_(STARTUP_VALUE, ratios={"jaxvaco warm": 1.61},
                 medians={"jaxvaco train (defaults), warm": 10.0}, load={"end": None})
    text = blocks.startup(startup_record(slow))
    assert "≥ 1.8 (missed)" in text and "< 8 s on an idle CPU (missed)" in text
    assert "load average 0.4," in text and "at the end" not in text
    assert "`abc1234` (2026-12-04)" in text


def test_startup_breakdown_table():
    text = blocks.startup_breakdown(startup_record(STARTUP_VALUE))
    rows = {row[0]: row[1:] for row in table_rows(text.split("\n\n")[0])}
    assert rows["training: compiling / running"] == ["2.00 / 3.00 s", "0.50 / 3.00 s"]
    assert rows["checkpoints"] == ["0.10 s", "0.10 s"]  # nothing compiled: one figure
    assert rows["**total**"] == ["**9.5 s**", "**6.0 s**"]
    assert "evaluation: compiling / running" not in rows  # a phase the run did not have
    assert "cold 12 (0 from the compilation cache)" in text and "`abc1234`" in text
    earlier = {**STARTUP_VALUE, "breakdown_from": "an earlier run"}
    text = blocks.startup_breakdown(startup_record(earlier))
    assert "phase (an earlier run)" in text and "`abc1234`" not in text


def test_startup_rule_is_a_ratio_band_on_every_ratio():
    rule = rules.startup_band(0.8, 1.25)
    assert rule(STARTUP_VALUE, STARTUP_VALUE)[0]
    close = with_(STARTUP_VALUE, ratios={"jaxvaco cold": 1.5},
                  medians={"reference": 30.0, "jaxvaco cold": 20.0})  # seconds do not count
    assert rule(STARTUP_VALUE, close)[0]
    for name in rules.STARTUP_RATIOS:
        assert not rule(STARTUP_VALUE, with_(STARTUP_VALUE, ratios={
            name: STARTUP_VALUE["ratios"][name] * 0.75}))[0], name


def test_startup_value_from_the_script_output():
    run = {"start-up (interpreter, imports, CLI)": 1.234, "total": 9.876}
    result = {"repeats": 1, "total": 7e4, "cpus": 2, "load_start": 0.41, "load_end": 1.234,
              "medians": {"reference": 10.0, "jaxvaco cold": 8.0, "jaxvaco warm": 4.0,
                          "jaxvaco train (defaults), warm": 5.0},
              "ratios": {"reference": 1.0, "jaxvaco cold": 1.25, "jaxvaco warm": 2.5,
                         "jaxvaco train (defaults), warm": 2.0},
              "reference": [{"seconds": 10.0, "compile": 4.04, "train": 5.06}],
              "breakdown": {"cold": run, "warm": run},
              "compile": {m: {"programs": 12, "cache_hits": h, "seconds": 1.0, "by_program": {}}
                          for m, h in (("cold", 0), ("warm", 12))}}
    value = runs.startup_value(result)
    assert value["load"] == {"start": 0.41, "end": 1.23}
    assert "reference" not in value["ratios"] and value["ratios"]["jaxvaco warm"] == 2.5
    assert value["reference_inside"] == {"compile": 4.0, "train": 5.1}
    assert value["breakdown"]["cold"]["total"] == 9.88
    assert value["programs"] == {"cold": [12, 0], "warm": [12, 12]}
    assert rules.startup_targets(value)  # renders: every target has its figure
    blocks.startup(startup_record(value))
    blocks.startup_breakdown(startup_record(value))


def test_startup_claim_is_slow_and_recorded(record):
    claim = registry.BY_ID["startup"]
    assert claim.kind == "speed" and not claim.fast and claim.minutes >= 2
    assert "--default-job" in claim.command
    assert record["startup"]["command"] == claim.command


def test_gpu_throughput_rows_come_from_the_json(tmp_path):
    """The GPU check's JSON becomes one row per comparison, ratio and rates as written."""
    import json

    (tmp_path / "throughput_cartpole.json").write_text(json.dumps([
        {"title": "a vs b", "sps": {"a": 3.0e7, "b": 1.5e7}, "ratio": 2.0, "goal": ">= 1"}]))
    rows = data.measure_gpu_throughput(None, tmp_path)["gpu_throughput"]
    assert rows == [["comparison", "ratio", "env-steps/s", "goal"],
                    ["a vs b", "**2.00**", "a 30.0M vs b 15.0M", ">= 1"]]


def test_a_rerun_is_compared_with_the_data_claims_it_reruns():
    """A rerun has no record of its own: it is compared with the merged records of the data
    claims it reruns, and with nothing while one of them is unrecorded."""
    rerun = dataclasses.replace(registry.BY_ID["sync-sweep-rerun"], reruns=("tables", "aggregate"))
    record = {"tables": {"value": {"CartPole-v1": [["a"]]}, "commit": "c1"},
              "aggregate": {"value": {"aggregate": [["b"]]}, "commit": "c2"}}
    assert recorded_for(rerun, record) == {
        "value": {"CartPole-v1": [["a"]], "aggregate": [["b"]]}, "commit": "c1, c2"}
    assert recorded_for(rerun, {"tables": record["tables"]}) is None
    assert recorded_for(registry.BY_ID["sync-sweep"], record) is None
    for claim in registry.CLAIMS:
        assert claim.id.endswith("-rerun") == bool(claim.reruns), claim.id
        assert all(registry.BY_ID[i].kind == "data" for i in claim.reruns)


def test_blocks_are_rendered_and_checked_in_whichever_file_holds_them(record, tmp_path):
    """A block moved from the README into a docs page is generated and checked there."""
    readme, page = tmp_path / "README.md", tmp_path / "page.md"
    readme.write_text("no blocks here\n")
    page.write_text("text\n<!-- claims:sync-sweep -->\nold table\n<!-- /claims:sync-sweep -->\n")
    problems = render.out_of_sync(record, [readme, page])
    assert f"sync-sweep in {page}" in problems
    assert "sync-sweep (no markers)" not in problems
    assert "fair-study (no markers)" in problems
    missing = render.render_all(record, [readme, page])
    assert "sync-sweep" not in missing and "fair-study" in missing
    assert "old table" not in page.read_text()
    assert not [p for p in render.out_of_sync(record, [readme, page])
                if p.startswith("sync-sweep")]
    assert readme.read_text() == "no blocks here\n"


def test_generated_blocks_live_in_the_readme_or_the_docs():
    names = {path.name for path in render.documents()}
    assert "README.md" in names and "fair-study.md" in names


def test_async_validation_table_from_runs_csv():
    """Means over seeds as numpy gives them; replay agrees when both its CIs overlap the
    asynchronous runs', uniform (values far away) does not; uniform's K in its label."""
    import numpy as np

    from experiments.async_tables import validation_table

    rng = np.random.default_rng(0)
    greedy, tv = rng.normal(400, 10, 8), rng.normal(0.05, 0.002, 8)
    rows = []
    for arm, shift, k in (("async", 0.0, 0), ("replay", 0.0, 0), ("uniform", 1.0, 5)):
        rows += [{"env": "E", "algo": "ppo", "arm": arm, "seed": str(s), "k": str(k),
                  "greedy": str(greedy[s] + 300 * shift), "train": str(greedy[s] - 50),
                  "tv": str(tv[s] + shift), "lag": "2.5"} for s in range(8)]
    header, async_, replay, uniform = validation_table(rows)
    assert header[-1] == "agree" and async_[:4] == ["E", "PPO-clip(L)", "async", "8"]
    assert async_[4].startswith(f"{greedy.mean():.1f} [") and async_[-1] == ""
    assert async_[5].startswith(f"{greedy.mean() - 50:.1f} [")
    assert replay[-1] == "yes" and uniform[-1] == "no"
    assert uniform[2] == "uniform (K = 5)" and uniform[6].startswith(f"{tv.mean() + 1:.4f}")


def test_async_pays_table_ratios():
    """Ratios as their definitions: env-steps/s async / sync, time to threshold sync / async;
    a run that never reached the threshold says so."""
    from experiments.async_tables import pays_table

    def run(sps, t, t_train, greedy=500.0, lag=2.0):
        return {"sps": sps, "time_to_threshold": t, "train_time_to_threshold": t_train,
                "greedy": greedy, "mean_lag": lag}

    rows = pays_table({"ppo": {"sync": run(1000.0, 10.0, 4.0), "async": run(500.0, 5.0, None)}})
    assert rows[1][:7] == ["PPO-clip(L)", "1000", "500", "0.50", "10.0", "5.0", "2.00"]
    assert rows[1][7:9] == ["4.0 / never", "n/a"]
