"""The trainer refactor changed no numbers (issue 12), except where a fix meant it to.

Each case of `tests/fingerprint.py` is rerun on the code as it is and compared with the
metrics recorded on the code before the trainer was split into stages. The comparison
allows float32 reassociation (rtol 1e-4 on sums over four iterations); a real change to
an estimate or a loss moves these sums by far more (the cases differ from each other in
the second or third digit).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxvaco.lab.results import FRACTIONS, LEGACY_FRACTION
from tests import fingerprint

RECORDED = json.loads(fingerprint.PATH.read_text())

# Old option spellings of the recorded cases -> the composition's options.
TRANSLATE = {
    ("ppo", "advantages", "values"): {"critic": "learner", "advantages": "gae"},
    ("ppo", "advantages", "vtrace"): {"critic": "learner", "advantages": "vtrace"},
    ("vaco", "align", "vtrace"): {"critic": "learner", "advantages": "vtrace"},
}

# Changed on purpose: decoupled PPO with V-trace multiplied ρ in twice (≈ ρ²); issue 11.
CHANGED = {"ppo_decoupled_vtrace"}
FAST = ("ppo", "ppo_decoupled_gae", "vaco", "vaco_spec")


def translate(group: str, changes: dict) -> tuple[str, dict]:
    out = {}
    for field, value in changes.items():
        out.update(TRANSLATE.get((group, field, value), {field: value}))
    return group, out


def renamed(recorded: dict, algo: str) -> dict:
    """Recorded metric names -> today's: the one `filter/fraction` is now the algorithm's
    own metric (`jaxvaco.lab.results.FRACTIONS`); algorithms without one recorded a constant 0."""
    out = dict(recorded)
    value = out.pop(LEGACY_FRACTION)
    if algo in FRACTIONS:
        out[FRACTIONS[algo]] = value
    else:
        assert value == 0.0
    return out


def cases():
    for name in fingerprint.CASES:
        if name in CHANGED:
            continue
        marks = () if name in FAST else (pytest.mark.slow,)
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(cases()))
def test_same_numbers_as_before_the_refactor(name, fast_compile):
    config = fingerprint.make_config(name, translate)
    now = fingerprint.fingerprint(config)
    before = renamed(RECORDED[name], config.algo)
    assert set(now) == set(before)
    for key in before:
        np.testing.assert_allclose(now[key], before[key], rtol=1e-4, atol=1e-5, err_msg=key)
