"""Where the built-in algorithms' tuned values come from [ours]."""

EQUAL_BUDGET_SEARCH = (
    "[ours] The configuration an equal-budget random search chose (experiments/tune.py: 24 "
    "configurations per algorithm on the development environments CartPole-v1, Acrobot-v1 "
    "and Breakout-MinAtar at K in {0, 8}, 4 seeds, ranked by the IQM of the normalised "
    "greedy return; experiments/results/tuning/chosen.json), rounded to three significant "
    "digits.")
"""The provenance of the built-in algorithms' `AlgorithmSpec.tuned` and option defaults."""
