"""The LLM run's progress bar (rich), fed by the host loop after each chunk."""

from __future__ import annotations

import numpy as np
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

from jaxvaco.llm.config import FRACTIONS, LLMConfig


class LLMProgress:
    """A bar over generation steps showing steps/s, mean reward, the latest held-out
    greedy accuracy and the objective's clip or filter fraction (means over the runs)."""

    def __init__(self, config: LLMConfig, enabled: bool = True):
        self.config = config
        self._bar = RichProgress(TextColumn(f"[bold]{config.algo}[/] arithmetic"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                                 TimeElapsedColumn(), disable=not enabled)

    def __enter__(self) -> LLMProgress:
        self._bar.__enter__()
        self._task = self._bar.add_task("train", total=self.config.num_steps,
                                        status="warm start and compiling...")
        return self

    def __exit__(self, *exc):
        return self._bar.__exit__(*exc)

    def update(self, rows: list[dict], info: dict) -> None:
        def mean(name: str) -> float:
            return float(np.mean([row.get(name, np.nan) for row in rows]))

        fraction = FRACTIONS[self.config.algo]
        status = (f"{info['sps']:.2f} steps/s | reward {mean('reward'):.3f} | accuracy "
                  f"{mean('accuracy'):.3f} | {fraction.split('/')[1]} {mean(fraction):.4f}")
        self._bar.update(self._task, completed=info["iteration"], status=status)
