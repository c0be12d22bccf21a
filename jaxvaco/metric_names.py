"""Metric names that both the host loop's progress bar and the results tables read, kept
apart so that neither depends on the other."""

FRACTIONS = {"ppo": "ppo/clipped_fraction", "spo": "spo/outside_fraction",
             "vaco": "vaco/filtered_fraction"}
"""Per algorithm, the share of samples its objective acts on: PPO's clip removes their
gradient, SPO's ratio lies outside the ε band (penalised), VACO's TV filter drops them.
PPO-KL and IMPALA have none."""
