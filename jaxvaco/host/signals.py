"""Stopping a run at a chunk boundary when SIGINT or SIGTERM arrives."""

from __future__ import annotations

import signal
import threading
from typing import Any


class StopSignals:
    """Within `with`: SIGINT/SIGTERM ask the loop to stop at the next chunk boundary.

    `signal` holds the signal received (0: none). A second signal acts as it would
    without this (KeyboardInterrupt, termination). Only installed in the main thread.
    """

    def __enter__(self) -> StopSignals:
        self.signal = 0
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.signal = signum
        self._restore()

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def __exit__(self, *exc) -> None:
        self._restore()
