"""Tests for jaxvaco.lab (stats, tables, plots, lag_plots): aggregates vs hand
computations, SciPy and rliable; plots."""

from __future__ import annotations

import io

import numpy as np
import pytest

from jaxvaco.lab import lag_plots, plots, stats, sweep_table, tables

# --------------------------------------------------------------------------------------------
# Hand-computed aggregates on tiny matrices
# --------------------------------------------------------------------------------------------

# 4 runs x 3 tasks.  Pooled & sorted (12 values):
#   -50, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100   ->  g = floor(12/4) = 3 trimmed from each end
#   middle six: 2, 3, 4, 5, 6, 7  ->  IQM = 27/6 = 4.5
TINY = np.array(
    [
        [1.0, 9.0, 0.0],
        [2.0, 8.0, 4.0],
        [3.0, 7.0, 5.0],
        [100.0, -50.0, 6.0],
    ]
)


def test_iqm_by_hand():
    assert stats.iqm(TINY) == pytest.approx(4.5)
    # odd count, 1-D input (one task): 10 values, g = 2 -> mean of sorted[2:8]
    v = np.array([10.0, -3.0, 7.0, 1.0, 2.0, 1000.0, 5.0, 4.0, 3.0, 6.0])
    assert stats.iqm(v) == pytest.approx(np.mean([2.0, 3.0, 4.0, 5.0, 6.0, 7.0]))
    # fewer than 4 values: nothing is trimmed
    assert stats.iqm([1.0, 2.0, 6.0]) == pytest.approx(3.0)


def test_median_mean_optimality_gap_by_hand():
    # per-task means: (106/4, -26/4, 15/4) = (26.5, -6.5, 3.75)
    assert stats.mean(TINY) == pytest.approx((26.5 - 6.5 + 3.75) / 3)
    assert stats.median(TINY) == pytest.approx(3.75)
    s = np.array([[0.5, 1.5], [1.0, 0.0]])
    # min(s, 1) = [[0.5, 1], [1, 0]] -> mean 0.625 -> gap 0.375
    assert stats.optimality_gap(s) == pytest.approx(0.375)
    # gamma = 0.5: min(s, .5) = [[.5,.5],[.5,0]] -> mean .375 -> gap .125
    assert stats.optimality_gap(s, gamma=0.5) == pytest.approx(0.125)


def test_iqm_equals_scipy_trim_mean_exactly():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for shape in [(1, 1), (3, 1), (5, 2), (10, 7), (13, 5), (100, 3)]:
        x = rng.normal(size=shape)
        assert stats.iqm(x) == scipy_stats.trim_mean(x, 0.25, axis=None)


# --------------------------------------------------------------------------------------------
# Bootstrap properties that do not need rliable
# --------------------------------------------------------------------------------------------


def test_bootstrap_shapes_reproducibility_and_coverage():
    rng = np.random.default_rng(1)
    scores = {"a": rng.uniform(size=(10, 4)), "b": rng.uniform(size=(6, 4)) + 0.5}
    pts, cis = stats.stratified_bootstrap_ci(scores, reps=300, seed=7)
    pts2, cis2 = stats.stratified_bootstrap_ci(scores, reps=300, seed=7)
    _, cis3 = stats.stratified_bootstrap_ci(scores, reps=300, seed=8)
    for k in scores:
        assert pts[k].shape == (4,) and cis[k].shape == (2, 4)
        np.testing.assert_array_equal(cis[k], cis2[k])
        assert not np.array_equal(cis[k], cis3[k])
        assert np.all(cis[k][0] <= cis[k][1])
        # IQM / median / mean / OG point estimates lie inside their percentile CIs here
        assert np.all((cis[k][0] <= pts[k]) & (pts[k] <= cis[k][1]))
        np.testing.assert_allclose(
            pts[k],
            [stats.iqm(scores[k]), stats.median(scores[k]), stats.mean(scores[k]),
             stats.optimality_gap(scores[k])],
        )
    # adding an algorithm does not change another algorithm's CI
    _, only_a = stats.stratified_bootstrap_ci({"a": scores["a"]}, reps=300, seed=7)
    np.testing.assert_array_equal(only_a["a"], cis["a"])


def test_bootstrap_is_stratified_by_task():
    # every run of a task has the same score, tasks differ: a stratified bootstrap (runs
    # resampled within each task) cannot change the mean; pooling runs across tasks would.
    scores = np.tile(np.array([[0.0, 1.0, 5.0]]), (6, 1))
    _, cis = stats.stratified_bootstrap_ci({"x": scores}, {"mean": stats.mean}, reps=200)
    np.testing.assert_allclose(cis["x"][:, 0], [2.0, 2.0])


def test_bootstrap_trailing_dims_resample_whole_curves():
    # [runs, tasks=1, steps]: run r is the constant curve r.  If whole curves are resampled,
    # the bootstrap mean is the same at every step, so the CI is flat along steps.
    curves = np.repeat(np.arange(8.0)[:, None, None], 5, axis=2)
    _, cis = stats.stratified_bootstrap_ci(
        {"c": curves}, lambda s: s.mean(axis=(0, 1)), reps=300, seed=0
    )
    assert cis["c"].shape == (2, 5)
    np.testing.assert_allclose(cis["c"], cis["c"][:, :1] * np.ones((1, 5)))
    assert cis["c"][0, 0] < 3.5 < cis["c"][1, 0]


def test_bootstrap_accepts_sequence_of_fns_and_single_callable():
    x = np.random.default_rng(2).normal(size=(5, 3))
    p1, c1 = stats.stratified_bootstrap_ci({"a": x}, [stats.iqm, stats.mean], reps=100)
    p2, c2 = stats.stratified_bootstrap_ci(
        {"a": x}, lambda s: np.array([stats.iqm(s), stats.mean(s)]), reps=100
    )
    np.testing.assert_array_equal(p1["a"], p2["a"])
    np.testing.assert_array_equal(c1["a"], c2["a"])
    with pytest.raises(ValueError):
        stats.stratified_bootstrap_ci({"a": x}, reps=0)


def test_performance_profile_by_hand():
    s = np.array([[0.0, 0.5], [1.0, 2.0]])
    prof, ci = stats.performance_profile({"a": s}, [-1.0, 0.0, 0.5, 1.5, 3.0])
    np.testing.assert_allclose(prof["a"], [1.0, 0.75, 0.5, 0.25, 0.0])
    assert ci is None
    _, ci = stats.performance_profile({"a": s}, [0.0, 1.0], reps=100)
    assert ci["a"].shape == (2, 2)


# --------------------------------------------------------------------------------------------
# Agreement with rliable (skipped where rliable is not installed/importable)
# --------------------------------------------------------------------------------------------


def _rliable():
    library = pytest.importorskip("rliable.library")
    metrics = pytest.importorskip("rliable.metrics")
    return library, metrics


def _rly_all(metrics):
    return lambda s: np.array(
        [
            metrics.aggregate_iqm(s),
            metrics.aggregate_median(s),
            metrics.aggregate_mean(s),
            metrics.aggregate_optimality_gap(s),
        ]
    )


@pytest.mark.parametrize("shape", [(5, 1), (10, 5), (7, 12), (30, 3)])
def test_point_estimates_equal_rliable_metrics(shape):
    _, metrics = _rliable()
    x = np.random.default_rng(sum(shape)).gamma(2.0, 0.5, size=shape)
    assert stats.iqm(x) == metrics.aggregate_iqm(x)
    assert stats.median(x) == metrics.aggregate_median(x)
    assert stats.mean(x) == metrics.aggregate_mean(x)
    assert stats.optimality_gap(x) == metrics.aggregate_optimality_gap(x)
    assert stats.optimality_gap(x, gamma=0.7) == metrics.aggregate_optimality_gap(x, gamma=0.7)


@pytest.mark.parametrize("seed", [0, 11])
def test_bootstrap_ci_identical_to_rliable_with_same_draws(seed):
    # rliable draws its run indices from NumPy's global RNG (np.random.choice); ours come from
    # RandomState(seed) in the same order, so with the same seed the CIs are identical.
    library, metrics = _rliable()
    x = np.random.default_rng(100 + seed).normal(size=(8, 5))
    np.random.seed(seed)
    r_pts, r_cis = library.get_interval_estimates({"a": x}, _rly_all(metrics), reps=400)
    pts, cis = stats.stratified_bootstrap_ci({"a": x}, reps=400, seed=seed)
    np.testing.assert_array_equal(pts["a"], r_pts["a"])
    np.testing.assert_allclose(cis["a"], r_cis["a"], rtol=0, atol=1e-12)


def test_bootstrap_ci_agrees_with_rliable_under_independent_noise():
    # Independent resampling streams: CIs agree up to Monte-Carlo noise of the bootstrap.
    library, metrics = _rliable()
    rng = np.random.default_rng(3)
    scores = {
        "algo_a": rng.uniform(0.0, 1.2, size=(10, 5)),
        "algo_b": rng.beta(2.0, 5.0, size=(10, 5)),
    }
    np.random.seed(12345)
    r_pts, r_cis = library.get_interval_estimates(
        scores, _rly_all(metrics), reps=3000, confidence_interval_size=0.9
    )
    pts, cis = stats.stratified_bootstrap_ci(scores, reps=3000, confidence=0.9, seed=0)
    for k, x in scores.items():
        np.testing.assert_array_equal(pts[k], r_pts[k])
        score_range = x.max() - x.min()
        # CI endpoints are bootstrap quantiles; with 3000 reps their Monte-Carlo differences
        # were <= 0.5% of the score range over 5 seed pairs, so 1.5% leaves a 3x margin.
        np.testing.assert_allclose(cis[k], r_cis[k], rtol=0, atol=0.015 * score_range)


def test_performance_profile_identical_to_rliable():
    library, _ = _rliable()
    x = np.random.default_rng(4).normal(size=(9, 4))
    taus = np.linspace(-2.5, 2.5, 21)
    np.random.seed(2)
    r_prof, r_ci = library.create_performance_profile({"a": x}, taus, reps=300)
    prof, ci = stats.performance_profile({"a": x}, taus, reps=300, seed=2)
    np.testing.assert_array_equal(prof["a"], r_prof["a"])
    np.testing.assert_allclose(ci["a"], r_ci["a"], rtol=0, atol=1e-12)


# --------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------


def test_normalize_score():
    for env, (lo, hi) in stats.REFERENCE_SCORES.items():
        assert hi != lo
        assert stats.normalize_score(env, lo) == pytest.approx(0.0)
        assert stats.normalize_score(env, hi) == pytest.approx(1.0)
    assert stats.normalize_score("CartPole-v1", 500.0) == pytest.approx(1.0)
    out = stats.normalize_score("MountainCar-v0", [-200.0, -150.0, -100.0])
    np.testing.assert_allclose(out, [0.0, 0.5, 1.0])
    for env in [
        "CartPole-v1",
        "Acrobot-v1",
        "Breakout-MinAtar",
        "Pendulum-v1",
        "MountainCar-v0",
        "inverted_pendulum",
    ]:
        assert env in stats.REFERENCE_SCORES


def test_normalize_score_unknown_env_lists_known():
    with pytest.raises(KeyError) as err:
        stats.normalize_score("Nope-v0", 1.0)
    msg = str(err.value)
    assert "Nope-v0" in msg and "CartPole-v1" in msg and "inverted_pendulum" in msg


# --------------------------------------------------------------------------------------------
# Tidy tables
# --------------------------------------------------------------------------------------------


def _records(n_seeds=3, steps=(0, 100, 200, 300), ks=(0, 1, 4), seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for env, (lo, hi) in [("CartPole-v1", (22.6, 500.0)), ("Acrobot-v1", (-498.4, -60.0))]:
        for algo in ["ppo", "vaco"]:
            for k in ks:
                for s in range(n_seeds):
                    for t in steps:
                        frac = t / max(steps) * (0.9 if algo == "vaco" else 0.7) / (1 + 0.1 * k)
                        ret = lo + (hi - lo) * frac + rng.normal(scale=0.05 * (hi - lo))
                        rows.append(
                            {
                                "env": env,
                                "algo": algo,
                                "K": k,
                                "seed": s,
                                "step": t,
                                "return": ret,
                                "tv/backward": 0.01 * k + rng.uniform(0, 0.01),
                                "tv/forward": 0.02 * k + rng.uniform(0, 0.01),
                                "tv/total": 0.03 * k + rng.uniform(0, 0.02),
                                "vaco/filtered_fraction": rng.uniform(),
                            }
                        )
    return rows


def test_final_scores_picks_last_step_per_run():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(_records()).sample(frac=1.0, random_state=0)  # shuffled rows
    fin = tables.final_scores(df)
    assert isinstance(fin, pd.DataFrame)
    assert len(fin) == 2 * 2 * 3 * 3
    assert (fin["step"] == 300).all()
    expect = df[df["step"] == 300].set_index(["env", "algo", "K", "seed"])["return"]
    got = fin.set_index(["env", "algo", "K", "seed"])["return"]
    pd.testing.assert_series_equal(got.sort_index(), expect.sort_index())
    # pandas-free input: list of row dicts / dict of columns
    cols = tables.final_scores(_records())
    assert isinstance(cols, dict) and len(cols["return"]) == 36
    # without a K column, runs are (env, algo, seed)
    no_k = df.drop(columns="K")
    assert len(tables.final_scores(no_k)) == 2 * 2 * 3


def test_score_dict_from_table():
    rows = _records()
    sd, envs = tables.score_dict_from_table(rows)
    assert envs == ["Acrobot-v1", "CartPole-v1"]
    assert set(sd) == {f"{a} (K={k})" for a in ("ppo", "vaco") for k in (0, 1, 4)}
    assert all(v.shape == (3, 2) for v in sd.values())
    one_k = [r for r in rows if r["K"] == 0]
    sd1, _ = tables.score_dict_from_table(one_k)
    assert set(sd1) == {"ppo", "vaco"}
    with pytest.raises(ValueError, match="unequal"):
        tables.score_dict_from_table(
            [r for r in one_k if not (r["seed"] == 2 and r["env"][0] == "C")])


# --------------------------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------------------------


def _assert_png_pdf(paths):
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    png, pdf = paths
    assert png.stat().st_size > 1000 and pdf.stat().st_size > 1000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert pdf.read_bytes()[:5] == b"%PDF-"


def test_plots_write_png_and_pdf(tmp_path):
    pytest.importorskip("matplotlib")
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(_records())
    reps = 50
    _assert_png_pdf(plots.plot_learning_curves(df, tmp_path, reps=reps))
    _assert_png_pdf(plots.plot_learning_curves(df[df["K"] == 0], tmp_path, reps=reps, stem="lc_k0"))
    _assert_png_pdf(lag_plots.plot_return_vs_lag(df, tmp_path, reps=reps))
    _assert_png_pdf(plots.plot_aggregate_intervals(df, tmp_path, reps=reps))
    sd, _ = tables.score_dict_from_table(df)
    _assert_png_pdf(plots.plot_aggregate_intervals(sd, tmp_path, reps=reps, stem="agg_dict"))
    _assert_png_pdf(lag_plots.plot_tv_vs_lag(df, tmp_path, reps=reps))
    _assert_png_pdf(plots.plot_performance_profile(sd, tmp_path, reps=reps))
    assert len(list(tmp_path.iterdir())) == 14


def test_as_float_turns_empty_cells_into_nan():
    out = plots.as_float(np.array(["1.5", "", "-2"], dtype=object))
    np.testing.assert_array_equal(np.isnan(out), [False, True, False])
    np.testing.assert_array_equal(out[[0, 2]], [1.5, -2.0])
    assert np.isnan(plots.as_float(np.array([3.0, None], dtype=object))[1])


def test_learning_curves_from_csv_rows_with_empty_returns(tmp_path):
    """Rows as read from a tidy CSV (strings), where early steps of long episodes have no
    finished episode yet (empty return), still plot."""
    pytest.importorskip("matplotlib")
    rows = [{"env": "reacher", "algo": "ppo", "seed": str(seed), "step": str(step),
             "return": "" if step == 2048 else str(-100.0 - seed)}
            for seed in range(3) for step in (2048, 4096, 6144)]
    _assert_png_pdf(plots.plot_learning_curves(rows, tmp_path, reps=20))


# --------------------------------------------------------------------------------------------
# The sweep's results table (robustness_table) and what every figure shows
# --------------------------------------------------------------------------------------------

SEEDS = (0, 1, 2)
TABLE_ENVS = ("CartPole-v1", "Toy-v0")  # Toy-v0 has no reference scores: raw returns


def _final(env: str, variant: str, k: int, seed: int) -> float:
    """The final training return of one run of `_sweep_table`, by a formula."""
    base = {"CartPole-v1": 300.0, "Toy-v0": -40.0}[env] + (25.0 if variant == "b" else 0.0)
    return base - (3.0 + seed) * k * (1.0 if variant == "a" else 0.5) + 7.0 * seed


def _sweep_table(ks=(0, 4)) -> dict[str, np.ndarray]:
    """A small sweep's tidy table as NumPy columns: 2 envs × 2 variants (one algo) × K × 3
    seeds, 2 steps per run; the greedy return only at the last step. The run (Toy-v0, b,
    K=max, seed 2) finished no episode in its last chunk: its final return is its step-1000
    value, `_final`."""
    rows = []
    for env in TABLE_ENVS:
        for variant in ("a", "b"):
            for k in ks:
                for seed in SEEDS:
                    last = _final(env, variant, k, seed)
                    lost = (env, variant, k, seed) == ("Toy-v0", "b", max(ks), 2)
                    for step, ret in ((1000, last if lost else last - 50.0),
                                      (2000, np.nan if lost else last)):
                        rows.append((env, "ppo", variant, k, seed, step, ret,
                                     last + 10.0 if step == 2000 else np.nan))
    names = ("env", "algo", "variant", "K", "seed", "step", "return", "eval/greedy_return")
    columns = zip(*rows, strict=True)
    return {name: np.asarray(column) for name, column in zip(names, columns, strict=True)}


def test_robustness_table_cells_by_hand():
    rows = sweep_table.robustness_table(_sweep_table())
    assert [(r["env"], r["variant"]) for r in rows] == [
        (e, v) for e in sorted(TABLE_ENVS) for v in ("a", "b")]
    for row in rows:
        env, variant = row["env"], row["variant"]
        assert row["seeds"] == 3 and sorted(row["return"]) == [0, 4]
        for k in (0, 4):
            finals = [_final(env, variant, k, s) for s in SEEDS]
            mean, low, high, n = row["return"][k]
            assert n == 3 and mean == pytest.approx(np.mean(finals))
            assert min(finals) <= low <= mean <= high <= max(finals)
            assert row["greedy"][k].mean == pytest.approx(np.mean(finals) + 10.0)
        diffs = np.asarray([_final(env, variant, 4, s) - _final(env, variant, 0, s)
                            for s in SEEDS])
        if env == "CartPole-v1":  # normalised: random = 22.6, reference = 500
            diffs = diffs / (500.0 - 22.6)
            assert row["scale"] == "normalised"
        else:
            assert row["scale"] == "return"
        point, low, high, n = row["retention"]
        assert row["retention_K"] == 4 and n == 3
        assert point == pytest.approx(np.mean(diffs))
        assert min(diffs) - 1e-9 <= low <= point <= high <= max(diffs) + 1e-9
    # the formula's retention: variant a loses twice what b loses
    by = {(r["env"], r["variant"]): r["retention"].mean for r in rows}
    assert by["Toy-v0", "a"] == pytest.approx(2 * by["Toy-v0", "b"]) == pytest.approx(-16.0)


def test_robustness_table_without_lag_has_no_retention():
    from rich.console import Console

    from jaxvaco.lab.sweep_table import print_results_table

    table = _sweep_table(ks=(0,))
    rows = sweep_table.robustness_table(table)
    assert len(rows) == 4 and all("retention" not in row for row in rows)
    assert all(sorted(row["return"]) == [0] for row in rows)
    console = Console(file=io.StringIO(), width=200)
    print_results_table(rows, console)
    text = console.file.getvalue()
    assert "K=0" in text and "retention" not in text and "greedy" in text
    # with a K > 0 it has one, and says which scale each env's retention is in
    console = Console(file=io.StringIO(), width=200)
    print_results_table(sweep_table.robustness_table(_sweep_table()), console)
    text = " ".join(console.file.getvalue().split())
    assert "retention" in text and "K=4 − K=0" in text
    assert "normalised score (random = 0, reference = 1) on CartPole-v1" in text
    assert "raw return on Toy-v0" in text


def _figures(monkeypatch) -> dict[str, object]:
    """Record the matplotlib figures the plotting functions save (without writing them)."""
    drawn = {}
    monkeypatch.setattr(plots, "save_figure",
                        lambda fig, out_dir, stem: (drawn.__setitem__(stem, fig), [])[1])
    return drawn


def _line_colours(fig) -> dict[str, set]:
    """Variant -> the colours of its lines, error bars and bars in a figure."""
    from matplotlib.colors import to_hex

    out: dict[str, set] = {}
    for ax in fig.axes:
        artists = [(line.get_label(), line.get_color()) for line in ax.get_lines()
                   if not line.get_label().startswith("_")]
        for container in ax.containers:
            label = container.get_label()
            if type(container).__name__ == "ErrorbarContainer":
                artists.append((label, container.lines[0].get_color()))
            else:  # the aggregate's bars
                artists.extend((label, patch.get_facecolor()) for patch in container.patches)
        for label, colour in artists:
            out.setdefault(tables.split_label(label)[0], set()).add(to_hex(colour))
    return out


def test_every_figure_has_one_colour_per_variant(tmp_path, monkeypatch):
    """`jaxvaco plot`'s figures: a variant has one colour in all of them (the aggregate's K
    are markers, not colours); error bars at one K are dodged; the labels say which return
    and which scale; every figure gives the number of seeds."""
    from jaxvaco.lab.results import plot_results

    drawn = _figures(monkeypatch)
    table = _sweep_table()
    table["tv/backward"] = 0.01 * table["K"].astype(float)
    with pytest.warns(UserWarning, match="Toy-v0"):
        plot_results(tmp_path, tmp_path / "plots", table=table)
    assert set(drawn) == {"learning_curves", "return_vs_lag", "retention_vs_lag",
                          "aggregate_intervals", "tv_vs_lag"}
    colours: dict[str, set] = {}
    for stem, fig in drawn.items():
        found = _line_colours(fig)
        assert set(found) == {"a", "b"}, stem
        for variant, seen in found.items():
            colours.setdefault(variant, set()).update(seen)
        assert "n = 3 seeds per cell" in fig.get_suptitle(), stem
    assert all(len(seen) == 1 for seen in colours.values()), colours
    assert colours["a"] != colours["b"]

    ax = drawn["return_vs_lag"].axes[0]
    assert "final training return (stochastic policy)" in ax.get_ylabel()
    bars = {c.get_label(): c.lines[0] for c in ax.containers}
    x = {v: line.get_transform().transform(np.column_stack(line.get_data()))[:, 0]
         for v, line in bars.items()}
    assert np.all(x["a"] < x["b"])  # the same K, side by side

    aggregate = drawn["aggregate_intervals"]
    assert "raw return (not normalised)" in aggregate.get_supxlabel()
    assert "lower is better" in aggregate.axes[-1].get_title()
    legend = [t.get_text() for t in aggregate.legends[0].get_texts()]
    assert legend == ["K = 0", "K = 4"]
    labels = [ax.get_ylabel() for ax in drawn["retention_vs_lag"].axes]
    assert "normalised score difference" in labels[0] and "return difference" in labels[1]


def test_labels_name_the_return_and_the_normalisation(tmp_path, monkeypatch):
    drawn = _figures(monkeypatch)
    table = _sweep_table()
    table = {k: v[table["env"] == "CartPole-v1"] for k, v in table.items()}
    lag_plots.plot_return_vs_lag(table, tmp_path, metric="eval/greedy_return", reps=20)
    assert "greedy evaluation return" in drawn["return_vs_lag"].axes[0].get_ylabel()
    plots.plot_aggregate_intervals(table, tmp_path, reps=20)
    assert "random = 0, reference = 1" in drawn["aggregate_intervals"].get_supxlabel()
