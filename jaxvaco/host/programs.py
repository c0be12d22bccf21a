"""Traced programs kept on disk, so that a rerun skips tracing and lowering.

JAX's persistent compilation cache (`jaxvaco.host.compilation`) saves XLA's work, but its key
is computed from the lowered program: every run still traces each jitted function in
Python and lowers it to MLIR before it can look the executable up (about 1.6 s of a
7.6 s warm CartPole run). `ProgramCache` keeps the lowered program itself, serialised
with `jax.export`, under a key made of everything that can change what tracing produces:

- jaxvaco's own source (a digest of every ``.py`` file of the package),
- the versions of jax, jaxlib and the libraries traced into the programs (flax, optax,
  gymnax, brax, distrax), the backend and its devices, and JAX's configuration values,
- the run's `TrainConfig` (less run_name, results_dir and progress, which only the host
  loop reads), the program's name and the shapes and dtypes of its arguments,
- where the trainer's functions come from (module, name and a digest of their source
  file), so that a trainer built by other code (a test's poisoned chunk, a user's own
  stage) never shares programs with jaxvaco's.

A rerun with the same key deserialises the program and calls it; XLA then finds the
executable in the persistent cache. The exported program is the one the jit path
lowers (one function, flattened arguments), so the numbers are the same: tested
bit for bit against `jax.jit` in tests/test_compilation.py.

Each entry starts with the SHA-256 of the rest of it. Anything unexpected falls back to
the plain jit path, so the cache can make a run start faster, never fail: a program
`jax.export` cannot serialise; an entry whose digest does not match (a flipped byte, a
truncated write) or that cannot be deserialised or called, which is also removed, with
one warning line; an unwritable directory (said once; a half-written temporary file is
removed); `flatbuffers` missing. It lives beside JAX's cache (in its
``jaxvaco-programs`` folder), is switched off with it, and may be deleted at any time.
Single-device programs only: sharded ones keep the jit path.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import inspect
import os
import pickle
import tempfile
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import jax

FOLDER = "jaxvaco-programs"
LIBRARIES = ("jax", "jaxlib", "flax", "optax", "gymnax", "brax", "distrax", "chex")
HOST_ONLY_FIELDS = ("run_name", "results_dir", "progress")
"""TrainConfig fields no program reads: runs that differ only in them share programs."""


@functools.cache
def source_digest() -> str:
    """SHA-256 over the path and content of every .py file of the jaxvaco package."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def environment_key() -> str:
    """What, besides the config, decides the traced programs: code, libraries, devices,
    and JAX's configuration (less its cache settings, which do not change a program)."""
    devices = [(d.platform, d.device_kind) for d in jax.devices()]
    settings = sorted((k, repr(v)) for k, v in jax.config.values.items() if "cache" not in k)
    parts = [source_digest(), *map(_version, LIBRARIES), repr(devices), repr(settings)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def config_key(config: Any) -> str:
    """The program-relevant part of a TrainConfig, as text."""
    return repr(dataclasses.replace(config, **{f: "" for f in HOST_ONLY_FIELDS}))


def function_origin(function: Callable) -> str:
    """Module, qualified name and source-file digest of a function (inside partials)."""
    while isinstance(function, functools.partial):
        function = function.func
    name = f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', '?')}"
    try:
        source = Path(inspect.getsourcefile(function) or "").read_bytes()
    except (OSError, TypeError):
        source = b""
    return f"{name}:{hashlib.sha256(source).hexdigest()}"


def _type(leaf: Any) -> Any:
    """An argument's type: a ShapeDtypeStruct stands for itself, a value has its aval."""
    return leaf if isinstance(leaf, jax.ShapeDtypeStruct) else jax.typeof(leaf)


def signature(leaves: list[Any]) -> str:
    """Shapes, dtypes and weak types of the flattened arguments."""
    types = map(_type, leaves)
    return ";".join(f"{t.dtype}{list(t.shape)}{'~' if t.weak_type else ''}" for t in types)


def struct(aval: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)


def named(name: str, function: Any) -> Any:
    """`function` under `name`, so that JAX's compile events (and the compile clock's
    table by program) say which program they are for."""
    def program(*args: Any) -> Any:
        return function(*args)

    program.__name__ = program.__qualname__ = name
    return program


class ProgramCache:
    """Exported programs in `directory`, for one run's configuration (see the module)."""

    def __init__(self, directory: Path, config: Any, functions: tuple[Callable, ...]):
        """`functions`: the trainer's own (init, chunk, evaluate), for `function_origin`."""
        self.directory = directory / FOLDER
        self.context = "|".join([environment_key(), config_key(config),
                                 *map(function_origin, functions)])

    def jit(self, name: str, function: Callable, compiler_options: dict | None = None
            ) -> Program:
        """Like `jax.jit(function, compiler_options=...)`, but the lowered program is loaded
        from (or saved to) the cache on the first call for each argument signature."""
        return Program(self, name, function, compiler_options or {})

    def _load(self, key: str) -> tuple[Any, Any] | None:
        """The entry's (exported program, output tree); None when absent or damaged (a
        damaged entry is removed, so that this run writes it again)."""
        path = self.directory / key
        try:
            entry = path.read_bytes()
        except OSError:
            return None
        digest, payload = entry[:DIGEST_BYTES], entry[DIGEST_BYTES:]
        if hashlib.sha256(payload).digest() != digest:
            self.discard(key, "its digest does not match (damaged or truncated)")
            return None
        try:
            serialized, out_tree = pickle.loads(payload)
            return jax.export.deserialize(serialized), out_tree
        except Exception as error:  # noqa: BLE001 - intact bytes another version cannot read
            self.discard(key, f"it cannot be read ({type(error).__name__})")
            return None

    def discard(self, key: str, why: str) -> None:
        """Remove an entry that cannot be used, saying so in one warning line."""
        warnings.warn(f"program cache entry {self.directory / key} was removed: {why}; "
                      "compiling the program instead (the numbers are the same).",
                      stacklevel=3)
        try:
            (self.directory / key).unlink()
        except OSError:
            pass

    def _export(self, key: str, name: str, function: Callable, in_tree: Any,
                leaves: list[Any]) -> tuple[Any, Any] | None:
        out_trees = []

        def flat(*flat_args):
            out_leaves, out_tree = jax.tree.flatten(function(*jax.tree.unflatten(in_tree,
                                                                                 flat_args)))
            out_trees.append(out_tree)
            return out_leaves

        try:
            types = [struct(_type(x)) for x in leaves]
            exported = jax.export.export(jax.jit(named(name, flat)))(*types)
            serialized = exported.serialize()
        except Exception:  # noqa: BLE001 - the jit path traces again and raises what is wrong
            return None
        payload = pickle.dumps((serialized, out_trees[-1]))
        self._save(key, hashlib.sha256(payload).digest() + payload)
        # Call the deserialised program, as later runs will: the same module for XLA, so
        # they find this run's executable in the persistent cache.
        return jax.export.deserialize(serialized), out_trees[-1]

    def _save(self, key: str, entry: bytes) -> None:
        """Write atomically; an unwritable cache only costs the next run its head start
        (said once per directory), and a half-written temporary file is removed."""
        tmp = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.directory, delete=False) as tmp:
                tmp.write(entry)
            os.replace(tmp.name, self.directory / key)
        except OSError as error:
            if tmp is not None:
                Path(tmp.name).unlink(missing_ok=True)
            unusable_cache(self.directory, error)


DIGEST_BYTES = 32
"""An entry is the SHA-256 of its payload (32 bytes), then the payload."""
_said: set[str] = set()


def unusable_cache(directory: Path, error: OSError) -> None:
    """One warning line per cache directory that cannot be written."""
    if str(directory) in _said:
        return
    _said.add(str(directory))
    warnings.warn(f"the program cache {directory} cannot be written ({error.strerror or error}); "
                  "this run compiles as usual and the next one will not start sooner.",
                  stacklevel=3)


class Program:
    """One cached function (`ProgramCache.jit`), called like `jax.jit(function)`.

    `compile_ahead(*args)` (arrays or ShapeDtypeStructs) loads or traces the program for
    those argument types now and hands XLA's compilation to a background thread, so that
    the programs of a run compile side by side, and beside tracing and training, instead
    of one after another; a later call with those types waits for it. Either way the
    executable is that of `jax.jit(exported.call)`, so the numbers are the same."""

    def __init__(self, cache: ProgramCache, name: str, function: Callable,
                 compiler_options: dict):
        self.cache, self.name, self.function = cache, name, function
        self.compiler_options = compiler_options
        self.jitted = jax.jit(function, compiler_options=compiler_options)
        self.found: dict[str, tuple[Callable, Any, Any] | None] = {}
        self.ahead: dict[str, Future] = {}

    def _lookup(self, args: tuple) -> tuple[str, list[Any], tuple[Callable, Any, Any] | None]:
        """(key, flat arguments, (jitted exported call, output tree, output avals) or None)."""
        leaves, in_tree = jax.tree.flatten(args)
        key = hashlib.sha256(f"{self.cache.context}|{self.name}|{in_tree}|{signature(leaves)}"
                             .encode()).hexdigest()
        if key not in self.found:
            found = (self.cache._load(key) or
                     self.cache._export(key, self.name, self.function, in_tree, leaves))
            self.found[key] = None if found is None else (
                jax.jit(named(self.name, found[0].call), compiler_options=self.compiler_options),
                found[1], found[0].out_avals)
        return key, leaves, self.found[key]

    def __call__(self, *args: Any) -> Any:
        key, leaves, found = self._lookup(args)
        if found is None:
            return self.jitted(*args)
        run, out_tree, _ = found
        traced = any(isinstance(leaf, jax.core.Tracer) for leaf in leaves)
        executable = self.ahead[key].result() if key in self.ahead and not traced else None
        try:
            out = (executable or run)(*leaves)
        except Exception as error:  # noqa: BLE001 - the jit path raises what is really wrong
            self.cache.discard(key, f"its program failed ({type(error).__name__})")
            self.found[key] = None
            self.ahead.pop(key, None)
            return self.jitted(*args)
        return jax.tree.unflatten(out_tree, out)

    def compile_ahead(self, *args: Any) -> Any:
        """Start compiling for these argument types; the output's ShapeDtypeStructs (None
        when the program is not cached: the call then takes the jit path)."""
        key, leaves, found = self._lookup(args)
        if found is None:
            return None
        run, out_tree, out_avals = found
        if key not in self.ahead:
            lowered, future = run.lower(*leaves), Future()

            def work() -> None:
                try:
                    future.set_result(lowered.compile())
                except Exception:  # noqa: BLE001 - the call compiles again and raises there
                    future.set_result(None)

            threading.Thread(target=work, name=f"compile-{self.name}", daemon=True).start()
            self.ahead[key] = future
        return jax.tree.unflatten(out_tree, [struct(a) for a in out_avals])
