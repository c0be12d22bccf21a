"""The host layer: what runs a compiled trainer and has side effects. `runner.run` (runs of
a grid, `grid`), the host loop (`session`), compiled and cached programs (`compiled`,
`programs`, `compilation`), the run folder (`run_folder`, `run_dir`), checkpoints, metric
sinks and progress, asynchronous actors (`asynchronous`), and trained policies (`policy*`,
`video`). It imports `core` only (tests/test_imports.py)."""
