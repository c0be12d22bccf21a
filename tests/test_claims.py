"""The README's figures as data (experiments/claims.py): the README's generated tables match
the recorded claims, every claim is recorded, and the tolerance rules say what they state.

Re-measuring the claims is `python -m experiments.check_claims --fast` (CI runs it after
the tests), not a test.
"""

from __future__ import annotations

import pytest

from experiments import claims, render_readme


@pytest.fixture(scope="module")
def record() -> dict:
    return claims.load_record()


def test_readme_tables_are_generated_from_the_record(record):
    assert render_readme.out_of_sync(record) == [], \
        "run `python -m experiments.render_readme` after changing claims.json"


def test_every_claim_is_recorded_with_its_command_and_commit(record):
    ids = [claim.id for claim in claims.CLAIMS]
    assert len(ids) == len(set(ids))
    missing = [i for i in ids if i not in record and not i.endswith("-rerun")]
    assert missing == []
    for claim_id, entry in record.items():
        assert claim_id in claims.BY_ID, f"{claim_id} is recorded but not a claim"
        assert entry["commit"] and entry["date"]
        assert entry["command"] == claims.BY_ID[claim_id].command, claim_id


def test_fast_set_holds_no_speed_claim():
    fast = [c for c in claims.CLAIMS if c.fast]
    assert fast and all(c.kind != "speed" for c in fast)


def test_seed_count_rule():
    rule = claims.solved_at_least(15)
    assert rule({}, {"greedy": [500.0] * 15 + [200.0]})[0]
    assert not rule({}, {"greedy": [500.0] * 14 + [474.9, 200.0]})[0]


def test_mean_inside_ci_rule():
    recorded = {"mean": 300.0, "lo": 250.0, "hi": 350.0}
    assert claims.inside_ci(recorded, {"mean": 349.0})[0]
    assert not claims.inside_ci(recorded, {"mean": 351.0})[0]


def test_ratio_band_rule():
    rule = claims.ratio_band(0.8, 1.25)
    assert rule({"ratio": 1.0}, {"ratio": 1.2})[0]
    assert not rule({"ratio": 1.0}, {"ratio": 0.75})[0]


def test_sweep_rerun_rule_counts_cells():
    recorded = {"t": [["algo", "K=0", "K=4"], ["ppo", "0.5 [0.4, 0.6]", "0.3 [0.2, 0.4]"]]}
    inside = {"t": [["algo", "K=0", "K=4"], ["ppo", "0.55 [0.5, 0.6]", "0.25 [0.2, 0.3]"]]}
    half = {"t": [["algo", "K=0", "K=4"], ["ppo", "0.55 [0.5, 0.6]", "0.9 [0.8, 1.0]"]]}
    assert claims.most_cells_inside(0.9)(recorded, inside)[0]
    assert not claims.most_cells_inside(0.9)(recorded, half)[0]
    assert claims.most_cells_inside(0.5)(recorded, half)[0]


def test_data_claims_compare_exactly():
    assert claims.same({"t": [["a", "1"]]}, {"t": [["a", "1"]]})[0]
    ok, note = claims.same({"t": [["a", "1"]]}, {"t": [["a", "2"]]})
    assert not ok and "t" in note


def test_table_rows_round_trip():
    rows = [["algo", "K=0"], ["ppo", "0.781 [0.736, 0.811]"]]
    assert claims.table_rows(render_readme.table(rows)) == rows
    assert claims.parse_ci(rows[1][1]) == (0.781, 0.736, 0.811)


def test_render_replaces_only_between_markers(record):
    text = "before\n<!-- claims:sync-sweep -->\nold table\n<!-- /claims:sync-sweep -->\nafter\n"
    new, missing = render_readme.render(text, record)
    assert new.startswith("before\n<!-- claims:sync-sweep -->\n| S |")
    assert new.endswith("\n<!-- /claims:sync-sweep -->\nafter\n")
    assert "old table" not in new and "sync-sweep" not in missing
