"""Start-up cost: the persistent compilation cache and how long compiling took.

**The cache.** A rerun of the same configuration (same JAX, same backend, same programs)
loads its compiled programs from disk instead of compiling them again. It is JAX's own
persistent compilation cache (`jax_compilation_cache_dir`), so the key, the invalidation
across JAX / jaxlib versions, backends and compiler options are JAX's; jaxvaco only
switches it on and picks the directory. `resolve_cache_dir` decides where, in this order:

1. an explicit value (`--compilation-cache DIR`, or `off`);
2. ``$JAXVACO_CACHE_DIR`` (``off`` or empty disables it);
3. a directory already given to JAX (``$JAX_COMPILATION_CACHE_DIR`` or
   ``jax.config.update("jax_compilation_cache_dir", ...)`` before the first run);
4. ``$XDG_CACHE_HOME/jaxvaco/jax``, else ``~/.cache/jaxvaco/jax``.

Every program is cached, however short its compilation (JAX's default skips those under
one second, which are most of a run's programs). The directory is not size-limited: remove
it at any time to reclaim the space.

**Compile time.** `CompileClock` listens to JAX's monitoring events (tracing, lowering to
MLIR, XLA compilation or loading from the cache) and reports the wall time they took,
overlaps counted once, with the number of programs compiled and loaded from the cache.

**Compiler options [ours].** `compiler_options` gives the programs of a Brax run XLA's
elemental emitters instead of its newer fusion emitters on the CPU
(`xla_cpu_use_fusion_emitters`): XLA compiles Brax's physics in about half the time, and a
cold Brax run compiles about 22% less, at the same throughput (docs/results/throughput.md).
The numbers are the same up to float rounding (as tests/test_fingerprint.py allows). On
gymnax envs the option made compiling slower, so they keep XLA's defaults.
The programs a run calls once or rarely (`RARELY_RUN`: init, evaluation) also compile with
LLVM's lighter optimisation (`RARELY_RUN_OPTIONS`) on every family: on Brax their XLA time
is about a third less, at the same speed and bit-identical outputs (tests/test_compilation.py);
the chunk, which runs all the time and whose numbers that level changes, keeps XLA's level.
``JAXVACO_XLA_DEFAULTS=1`` keeps XLA's defaults everywhere.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import time
import warnings
from pathlib import Path

import jax
from jax import monitoring

ENV_VAR = "JAXVACO_CACHE_DIR"
OFF = ("off", "")
_COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
_BACKEND_COMPILE = _COMPILE_EVENTS[2]
_PHASES = dict(zip(_COMPILE_EVENTS, ("trace", "lower", "compile"), strict=True))
_CACHE_HIT = "/jax/compilation_cache/cache_hits"

CPU_COMPILER_OPTIONS = {"brax": {"xla_cpu_use_fusion_emitters": False}}
"""XLA options on the CPU, by env family (`EnvSpec.family`)."""
RARELY_RUN = ("init", "evaluate")
"""The programs a run calls once (init) or every few chunks (evaluation)."""
RARELY_RUN_OPTIONS = {"xla_backend_optimization_level": 1}
"""XLA options on the CPU for `RARELY_RUN` programs: LLVM's lighter optimisation (XLA's
default level is 3)."""
DEFAULTS_ENV_VAR = "JAXVACO_XLA_DEFAULTS"

_jax_dir_before_us: list[str | None] = []  # the dir JAX had before jaxvaco first set one


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/jaxvaco/jax``, else ``~/.cache/jaxvaco/jax``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jaxvaco" / "jax"


def _user_jax_dir() -> str | None:
    """The cache directory JAX was given by the user (env or config), if any."""
    if not _jax_dir_before_us:
        _jax_dir_before_us.append(jax.config.jax_compilation_cache_dir or None)
    return _jax_dir_before_us[0]


@functools.cache
def compiler_options(family: str, program: str = "chunk") -> dict[str, bool | int]:
    """XLA options for one program (`RARELY_RUN` or the chunk) of a run on an env of this
    family: `CPU_COMPILER_OPTIONS[family]`, with `RARELY_RUN_OPTIONS` for a rarely run
    program, when the default backend is the CPU and its XLA knows them; none on
    accelerators, with ``$JAXVACO_XLA_DEFAULTS`` set, or when this XLA refuses them (a tiny
    probe compile says so)."""
    options = {**CPU_COMPILER_OPTIONS.get(family, {}),
               **(RARELY_RUN_OPTIONS if program in RARELY_RUN else {})}
    if not options or jax.default_backend() != "cpu" or \
            os.environ.get(DEFAULTS_ENV_VAR, "") not in ("", "0", "off"):
        return {}
    return options if _xla_knows(tuple(sorted(options.items()))) else {}


@functools.cache
def _xla_knows(options: tuple[tuple[str, bool | int], ...]) -> bool:
    """Whether this XLA compiles with these options: one probe compile per distinct set."""
    try:
        jax.jit(lambda x: x + 1, compiler_options=dict(options)).lower(1.0).compile()
    except Exception:  # noqa: BLE001 - an XLA that no longer has the option: its defaults
        return False
    return True


def resolve_cache_dir(option: str = "auto") -> Path | None:
    """Where the compilation cache goes for this option value; None when disabled."""
    if option != "auto":
        return None if option.strip().lower() in OFF else Path(option).expanduser()
    if ENV_VAR in os.environ:
        value = os.environ[ENV_VAR].strip()
        return None if value.lower() in OFF else Path(value).expanduser()
    user = _user_jax_dir()
    return Path(user) if user else default_cache_dir()


def describe_default() -> str:
    """Where `auto` puts the cache in this environment, for --help."""
    where = resolve_cache_dir("auto")
    return "off" if where is None else str(where)


_said_unusable: set[str] = set()


def _check_writable(directory: Path) -> None:
    """OSError unless a file can be created (and removed) in `directory`."""
    probe = directory / f".jaxvaco-write-test-{os.getpid()}"
    probe.write_bytes(b"")
    probe.unlink()


def _say_unusable(path: str, error: OSError) -> None:
    """One warning line per unusable cache location and process."""
    if path in _said_unusable:
        return
    _said_unusable.add(path)
    reason = error.strerror or str(error)
    warnings.warn(f"the compilation cache {path} cannot be used ({reason}); compiling without "
                  "it (choose another with --compilation-cache DIR, or `off`).", stacklevel=3)


def configure_cache(option: str = "auto") -> Path | None:
    """Point JAX's persistent compilation cache at `resolve_cache_dir(option)` (or switch
    it off); returns the directory. Idempotent; a change mid-process takes effect for the
    next compilation."""
    from jax.experimental.compilation_cache import compilation_cache

    _user_jax_dir()
    where = resolve_cache_dir(option)
    path = None if where is None else str(where.absolute())
    if path is not None:
        try:
            Path(path).mkdir(parents=True, exist_ok=True)
            _check_writable(Path(path))
        except OSError as error:  # an unusable location must not stop training
            _say_unusable(path, error)
            path = None
    wanted = (path is not None, path)
    current = (bool(jax.config.jax_enable_compilation_cache), jax.config.jax_compilation_cache_dir)
    if path is not None:
        if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        if "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES" not in os.environ:
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    if wanted != current:
        jax.config.update("jax_enable_compilation_cache", path is not None)
        jax.config.update("jax_compilation_cache_dir", path)
        compilation_cache.reset_cache()
    return None if path is None else Path(path)


@dataclasses.dataclass
class CompileStats:
    seconds: float = 0.0  # wall time tracing, lowering and compiling (or loading)
    programs: int = 0  # XLA programs compiled or loaded from the cache
    cache_hits: int = 0  # of which loaded from the persistent cache
    by_program: dict[str, float] = dataclasses.field(default_factory=dict)  # XLA seconds
    phases: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    """{program: {"trace"|"lower"|"compile": seconds}}, nested traces (a jit inside a
    program) under their own name."""


class CompileClock:
    """Compile time spent in this process, from JAX's monitoring events.

    `start()` (idempotent) begins listening; `stats(since)` sums what happened after the
    wall-clock time `since` (a `time.time()` value). The spans of tracing, lowering and
    compiling nest (a jit traced inside another) and may overlap across threads; their
    union is counted once.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._spans: list[tuple[float, float]] = []
        self._compiles: list[tuple[float, float, str]] = []
        self._phases: list[tuple[float, float, str, str]] = []  # start, end, name, phase
        self._hits: list[float] = []
        self._started = False

    def start(self) -> CompileClock:
        with self._lock:
            if not self._started:
                self._started = True
                monitoring.register_event_time_span_listener(self._span)
                monitoring.register_event_listener(self._event)
        return self

    def _span(self, event: str, start: float, end: float, **kwargs) -> None:
        if event not in _COMPILE_EVENTS:
            return
        with self._lock:
            self._spans.append((start, end))
            self._phases.append((start, end, program_name(kwargs.get("fun_name")),
                                 _PHASES[event]))
            if event == _BACKEND_COMPILE:
                self._compiles.append((start, end, str(kwargs.get("fun_name", "?"))))

    def _event(self, event: str, **kwargs) -> None:
        if event == _CACHE_HIT:
            with self._lock:
                self._hits.append(time.time())

    def overlap(self, intervals: list[tuple[float, float]]) -> float:
        """Seconds of compiling inside the given (disjoint) wall-clock intervals."""
        with self._lock:
            spans = sorted(self._spans)
        return sum(_union([(max(a, lo), min(b, hi)) for a, b in spans if b > lo and a < hi])
                   for lo, hi in intervals)

    def stats(self, since: float = 0.0) -> CompileStats:
        with self._lock:
            spans = sorted((max(a, since), b) for a, b in self._spans if b > since)
            compiles = [c for c in self._compiles if c[1] > since]
            hits = sum(1 for t in self._hits if t > since)
            phase_spans = [p for p in self._phases if p[1] > since]
        total = _union(spans)
        by_program: dict[str, float] = {}
        for start, end, name in compiles:
            by_program[name] = by_program.get(name, 0.0) + end - start
        phases: dict[str, dict[str, float]] = {}
        for start, end, name, phase in phase_spans:
            figures = phases.setdefault(name, {"trace": 0.0, "lower": 0.0, "compile": 0.0})
            figures[phase] += end - max(start, since)
        return CompileStats(total, len(compiles), hits, by_program, phases)


def program_name(fun_name: object) -> str:
    """A program's name as JAX's events spell it ("jit(chunk)", "jit_chunk", "chunk")
    reduced to "chunk"."""
    name = str(fun_name or "?")
    for prefix, suffix in (("jit(", ")"), ("jit_", "")):
        if name.startswith(prefix) and name.endswith(suffix):
            return name[len(prefix):len(name) - len(suffix)]
    return name


def _union(spans: list[tuple[float, float]]) -> float:
    """Total length of the union of intervals."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


COMPILE_CLOCK = CompileClock()
"""The process's one clock (JAX's listeners are process-wide)."""


class Stopwatch:
    """Wall-clock intervals of the host loop's phases, by name (`time.time()` values)."""

    def __init__(self):
        self.intervals: dict[str, list[tuple[float, float]]] = {}

    def add(self, name: str, since: float) -> float:
        """Record the interval from `since` to now under `name`; return now."""
        now = time.time()
        self.intervals.setdefault(name, []).append((since, now))
        return now

    def report(self, clock: CompileClock) -> dict[str, dict[str, float]]:
        """Per phase: its seconds and how many of them were spent compiling."""
        return {name: {"seconds": sum(b - a for a, b in spans),
                       "compiling": clock.overlap(spans)}
                for name, spans in self.intervals.items()}
