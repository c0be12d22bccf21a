"""The core layer: pure, jitted, no files. The configuration (`config`, `option_groups`,
`validation`, `memory`), the algorithms (`algos`: one `AlgorithmSpec` each), the
hyperparameters (`hparams`), environments (`envs`), networks, estimators, the lag model, and
the trainer's stages composed into `train.make_train`. Nothing here imports `host`, `lab`,
`cli` or `llm` (tests/test_imports.py)."""
