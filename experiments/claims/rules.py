"""The rules under which a new measurement reproduces a recorded one (each `compare(recorded,
now) -> (holds?, note)`) and the one-line summaries `check` prints (`show_*`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

SOLVED = 475.0
"""CartPole-v1's solved threshold: greedy return >= 475."""

def same(recorded: dict, now: dict) -> tuple[bool, str]:
    """Data claims: equal to the printed precision."""
    if recorded == now:
        return True, "identical"
    diffs = [key for key in set(recorded) | set(now) if recorded.get(key) != now.get(key)]
    return False, f"differs in {', '.join(sorted(diffs))}"


def solved_at_least(need: int) -> Callable[[dict, dict], tuple[bool, str]]:
    def compare(recorded: dict, now: dict) -> tuple[bool, str]:
        solved = sum(g >= SOLVED for g in now["greedy"])
        return solved >= need, f"{solved} of {len(now['greedy'])} solved (need {need})"
    return compare


def show_solved(value: dict) -> str:
    greedy = value["greedy"]
    solved = sum(g >= SOLVED for g in greedy)
    wall = f", {value['wall_s']} s" if "wall_s" in value else ""
    return f"{solved}/{len(greedy)} solved, mean {np.mean(greedy):.1f}{wall}"


def inside_ci(recorded: dict, now: dict) -> tuple[bool, str]:
    ok = recorded["lo"] <= now["mean"] <= recorded["hi"]
    return ok, f"mean {now['mean']} {'inside' if ok else 'outside'} [{recorded['lo']}, " \
               f"{recorded['hi']}]"


def show_mean_ci(value: dict) -> str:
    return f"{value['mean']} [{value['lo']}, {value['hi']}]"


def ratio_band(low: float, high: float) -> Callable[[dict, dict], tuple[bool, str]]:
    def compare(recorded: dict, now: dict) -> tuple[bool, str]:
        r = now["ratio"] / recorded["ratio"]
        return low <= r <= high, f"now / recorded = {r:.2f} (band {low}–{high})"
    return compare


def show_ratio(value: dict) -> str:
    detail = " vs ".join(f"{v / 1e3:.0f}k" for v in value.get("pair", []))
    return f"{value['ratio']:.2f}" + (f" ({detail})" if detail else "")


def show_table(value: dict) -> str:
    cells = sum(len(row) - 1 for rows in value.values() for row in rows)
    return f"{len(value)} table(s), {cells} cells"


def has_interval(cell: str) -> bool:
    """Whether a table cell holds an estimate with an interval that `parse_ci` reads."""
    return " [" in cell or " ± " in cell


def parse_ci(cell: str) -> tuple[float, float, float]:
    """'0.781 [0.736, 0.811]' -> (0.781, 0.736, 0.811); '0.84 ± 0.02' -> (0.84, 0.82, 0.86)."""
    if " ± " in cell:
        point, half = map(float, cell.split(" ± "))
        return point, point - half, point + half
    point, rest = cell.split(" [")
    lo, hi = rest.rstrip("]").split(", ")
    return float(point), float(lo), float(hi)


def cells_by_label(tables: dict) -> dict[tuple[str, str, str], str]:
    """{(table, row label, column header): cell} of tables whose first row is the header
    and first column the row label, so that a rerun of some rows or columns is compared
    cell by cell with the same cells of the recorded tables."""
    return {(name, row[0], column): cell for name, rows in tables.items() for row in rows[1:]
            for column, cell in zip(rows[0][1:], row[1:], strict=False)}


def most_cells_inside(share: float) -> Callable[[dict, dict], tuple[bool, str]]:
    """Rerun of a sweep (or of some of its cells): the new point estimate inside the
    recorded 95% CI in >= share of the cells both hold (with 95% intervals, a few cells
    fall outside by chance alone)."""
    def compare(recorded: dict, now: dict) -> tuple[bool, str]:
        old_cells, new_cells = cells_by_label(recorded), cells_by_label(now)
        pairs = [(old_cells[key], new) for key, new in new_cells.items()
                 if key in old_cells and has_interval(old_cells[key]) and has_interval(new)]
        inside = 0
        for old, new in pairs:
            _, lo, hi = parse_ci(old)
            inside += lo <= parse_ci(new)[0] <= hi
        ok = bool(pairs) and inside >= share * len(pairs)
        return ok, f"{inside} of {len(pairs)} cells inside the recorded CI (need {share:.0%})"
    return compare


def solved_and_wall(recorded: dict, now: dict) -> tuple[bool, str]:
    solved = now["greedy"][0] >= SOLVED
    wall = now["wall_s"] / recorded["wall_s"]
    ok = solved and wall <= 2.0
    return ok, f"greedy {now['greedy'][0]} ({'solved' if solved else 'NOT solved'}), " \
               f"wall {wall:.2f}× recorded (at most 2×)"


def show_greedy(value: dict) -> str:
    return " / ".join(f"{g:g}" for g in value["greedy"]) + \
        (f" (mean {value['mean']} [{value['lo']}, {value['hi']}])" if "mean" in value else "")


def sync_means_close(recorded: dict, now: dict) -> tuple[bool, str]:
    """Each S: the new mean final return within 2 recorded standard deviations (3 seeds:
    a standard error would be too tight to call drift), lag/iterations within 0.05."""
    bad = []
    for old, new in zip(recorded["sync"][1:], now["sync"][1:], strict=True):
        (m0, s0), (m1, _) = (tuple(float(x) for x in c[1].split(" ± ")) for c in (old, new))
        lag0, lag1 = float(old[2].split(" ± ")[0]), float(new[2].split(" ± ")[0])
        if abs(m1 - m0) > 2 * s0 or abs(lag1 - lag0) > 0.05:
            bad.append(old[0])
    return not bad, "every S within 2 std" if not bad else f"S = {', '.join(bad)} outside"


# ------------------------------------------------------------------ the start-up claim

STARTUP_DEFAULT = "jaxvaco train (defaults), warm"
STARTUP_RATIOS = ("jaxvaco cold", "jaxvaco warm", STARTUP_DEFAULT)
STARTUP_TARGETS = (  # (median, what the target is on, bound, the README's wording)
    ("jaxvaco cold", "ratio", 1.2, "≥ 1.2"),
    ("jaxvaco warm", "ratio", 1.8, "≥ 1.8"),
    (STARTUP_DEFAULT, "seconds", 8.0, "< 8 s on an idle CPU"),
)


def startup_targets(value: dict) -> list[tuple[str, str, bool]]:
    """Each target: (the median it is on, its wording, met?), from the recorded numbers."""
    out = []
    for name, on, bound, wording in STARTUP_TARGETS:
        if on == "ratio":
            met = value["ratios"][name] >= bound
        else:
            met = value["medians"][name] < bound
        out.append((name, wording, met))
    return out


def startup_band(low: float, high: float) -> Callable[[dict, dict], tuple[bool, str]]:
    """Every ratio (reference / jaxvaco: cold, warm, default job warm) within low–high× of
    its recorded value: the whole process is timed against the reference run alternately,
    so the ratios, not the seconds, carry over between machines and loads."""
    def compare(recorded: dict, now: dict) -> tuple[bool, str]:
        notes, ok = [], True
        for name in STARTUP_RATIOS:
            if name not in recorded["ratios"]:
                continue
            r = now["ratios"][name] / recorded["ratios"][name]
            ok &= low <= r <= high
            notes.append(f"{name.removeprefix('jaxvaco ')} {r:.2f}")
        return ok, f"now / recorded: {', '.join(notes)} (band {low}–{high})"
    return compare


def show_startup(value: dict) -> str:
    m, r = value["medians"], value["ratios"]
    return (f"cold {r['jaxvaco cold']:.2f}, warm {r['jaxvaco warm']:.2f}; defaults "
            f"{m[STARTUP_DEFAULT]:.1f} s; load {value['load']['start']}")


# --------------------------------------------------------------- the compile claims

BRAX_COMPILE_TARGET = ("inverted_pendulum", 20.0)
"""Issue 37's target: a cold Brax inverted_pendulum run compiles for < 20 s on an idle CPU."""


def compile_band(low: float, high: float) -> Callable[[dict, dict], tuple[bool, str]]:
    """Every env's cold compile seconds within low–high× of the recorded ones. Seconds, not
    ratios: there is no side-by-side reference for compiling, so measure on an idle CPU."""
    def compare(recorded: dict, now: dict) -> tuple[bool, str]:
        notes, ok = [], True
        for env, old in recorded["envs"].items():
            r = now["envs"][env]["compile_s"] / old["compile_s"]
            ok &= low <= r <= high
            notes.append(f"{env} {r:.2f}")
        return ok, f"compile now / recorded: {', '.join(notes)} (band {low}–{high})"
    return compare


def brax_target_met(value: dict) -> bool:
    env, bound = BRAX_COMPILE_TARGET
    return value["envs"][env]["compile_s"] < bound


def show_compile(value: dict) -> str:
    env, bound = BRAX_COMPILE_TARGET
    return ", ".join(f"{e} {v['compile_s']:.1f} s" for e, v in value["envs"].items()) + \
        f" (target {env} < {bound:g} s: {'met' if brax_target_met(value) else 'missed'}); " \
        f"load {value['load']['start']}"


def second_cell_cached(recorded: dict, now: dict) -> tuple[bool, str]:
    """The sweep's later cells, which differ only in hyperparameters, compile no XLA
    program of their own: every one they compile is loaded from the cache."""
    later = now["cells"][1:]
    ok = all(c["programs"] == c["cache_hits"] for c in later)
    return ok, ", ".join(f"{c['cell']}: {c['cache_hits']} of {c['programs']} XLA programs "
                         "from the cache" for c in later)


def show_sweep_compile(value: dict) -> str:
    first, *later = value["cells"]
    return f"compiling {value['share']:.0%} of the cells' time; cell 1 {first['compile_s']:.1f}" \
        " s, then " + ", ".join(f"{c['compile_s']:.1f} s ({c['cache_hits']}/{c['programs']} "
                                "cached)" for c in later)
