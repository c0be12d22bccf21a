"""Thread-safe pieces of the asynchronous runner, independent of what is trained.

Every wait here has a timeout and checks a stop event, so no thread blocks forever: a
worker that fails stops the others (`Supervisor`), and the learner that waits for a
trajectory notices it within `poll_s`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, NamedTuple


class AsyncWorkerError(RuntimeError):
    """A worker thread of an asynchronous run failed; the message names it (one line)."""


def one_line(name: str, error: BaseException) -> str:
    """'<name> failed: <Type>: <first line of the message>'."""
    text = str(error).strip().splitlines()
    return f"{name} failed: {type(error).__name__}" + (f": {text[0]}" if text else "")


class ParameterStore:
    """The newest published value and its version (the learner iteration that made it)."""

    def __init__(self, value: Any, version: int):
        self._lock = threading.Lock()
        self._value, self._version = value, version

    def publish(self, value: Any, version: int) -> None:
        with self._lock:
            self._value, self._version = value, version

    def latest(self) -> tuple[Any, int]:
        with self._lock:
            return self._value, self._version


class Item(NamedTuple):
    """A trajectory as an actor pushes it."""

    trajectory: Any  # the Rollout, log β(a|s) recorded in it
    version: int  # the parameters θ_version it was collected with
    behaviour: Any  # θ_version itself (the behaviour critic reads it)
    actor: int


class TrajectoryQueue:
    """A bounded FIFO of `Item`s whose put and get give up when `stop` is set."""

    def __init__(self, size: int, stop: threading.Event, poll_s: float = 0.05):
        self._queue: queue.Queue = queue.Queue(maxsize=size)
        self._stop, self._poll = stop, poll_s

    def put(self, item: Item) -> bool:
        """Wait for room; False (item not queued) once `stop` is set."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=self._poll)
                return True
            except queue.Full:
                continue
        return False

    def get(self, timeout_s: float, check: Callable[[], None]) -> Item:
        """The oldest item; calls `check()` (which raises on a failed worker) while waiting,
        and raises TimeoutError after `timeout_s` without one."""
        waited = 0.0
        while True:
            check()
            try:
                return self._queue.get(timeout=self._poll)
            except queue.Empty:
                waited += self._poll
                if waited >= timeout_s:
                    raise TimeoutError(f"no trajectory arrived in {timeout_s:g} s") from None


class Supervisor:
    """Runs named worker threads; the first failure is kept and stops all of them."""

    def __init__(self):
        self.stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._error: str | None = None
        self._lock = threading.Lock()

    def start(self, name: str, work: Callable[[threading.Event], None]) -> None:
        """Run `work(stop)` in a daemon thread called `name`."""
        def guarded():
            try:
                work(self.stop)
            except BaseException as error:  # noqa: BLE001 - reported through check()
                self.fail(one_line(name, error))

        thread = threading.Thread(target=guarded, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def fail(self, message: str) -> None:
        with self._lock:
            self._error = self._error or message
        self.stop.set()

    def check(self) -> None:
        """Raise AsyncWorkerError if a worker failed."""
        if self._error is not None:
            raise AsyncWorkerError(self._error)

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop every worker and wait for it (each wait bounded by `timeout_s`)."""
        self.stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads = []
