"""Analysis of jaxvaco results, by concern; import the module you need:

* `jaxvaco.analysis.stats` -- rliable-style aggregates (IQM, median, mean, optimality gap),
  stratified bootstrap CIs, performance profiles, score normalisation (`REFERENCE_SCORES`);
  NumPy only.
* `jaxvaco.analysis.tables` -- tidy results tables as columns: the final row of each run,
  score matrices per algorithm (`score_dict_from_table`), estimates as text.
* `jaxvaco.analysis.robustness` -- lag robustness [ours]: retention and difference in
  differences, paired by seed, with stratified-bootstrap CIs; NumPy only.
* `jaxvaco.analysis.sweep_table` -- a sweep's results table (`robustness_table`: final
  return per env, variant and K, and retention).
* `jaxvaco.analysis.plots` -- learning curves, aggregate intervals, performance profiles;
  `jaxvaco.analysis.lag_plots` -- final return, retention and TV metrics against the lag K.
  Both import matplotlib lazily and save PNG + PDF.
"""
