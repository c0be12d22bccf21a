"""The lab layer: results, statistics, plots and sweeps, by concern; import the module you
need. It imports `core` and `host` only (tests/test_imports.py).

* `jaxvaco.lab.results` -- the one results schema: tidy rows from run folders, CSV I/O.
* `jaxvaco.lab.sweep_spec`, `jaxvaco.lab.sweep` -- a sweep's TOML spec and its cells
  (env × algorithm or variant × K), run restartably into one results.csv.

* `jaxvaco.lab.stats` -- rliable-style aggregates (IQM, median, mean, optimality gap),
  stratified bootstrap CIs, performance profiles, score normalisation (`REFERENCE_SCORES`);
  NumPy only.
* `jaxvaco.lab.tables` -- tidy results tables as columns: the final row of each run,
  score matrices per algorithm (`score_dict_from_table`), estimates as text.
* `jaxvaco.lab.robustness` -- lag robustness [ours]: retention and difference in
  differences, paired by seed, with stratified-bootstrap CIs; NumPy only.
* `jaxvaco.lab.sweep_table` -- a sweep's results table (`robustness_table`: final
  return per env, variant and K, and retention).
* `jaxvaco.lab.plots` -- learning curves, aggregate intervals, performance profiles;
  `jaxvaco.lab.lag_plots` -- final return, retention and TV metrics against the lag K.
  Both import matplotlib lazily and save PNG + PDF.
"""
