"""Asynchronous actors and learner [ours] (`--asynchronous.enabled`).

- `channels`: the thread-safe pieces, independent of the config: a versioned
  `ParameterStore`, a bounded `TrajectoryQueue`, and a `Supervisor` that runs worker
  threads, turns the first failure into a one-line `AsyncWorkerError` and stops them all;
- `trainer`: `AsyncTrainer`, the host loop's trainer (`jaxvaco.host.session.LoopTrainer`):
  actor threads collect with the jitted rollout stage, the learner pops a trajectory per
  iteration and runs the jitted learner stages (`jaxvaco.core.train.learn`);
- `schedule`: the lag each learner iteration saw (the run folder's `lag_schedule.csv`,
  written by `trainer`), read back by `--lag.mode replay`.
"""
