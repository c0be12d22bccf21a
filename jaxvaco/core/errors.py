"""The errors a user can act on, apart from the modules that raise them (so that the
configurations of `jaxvaco.core.config` and `jaxvaco.llm.config` share them without importing
each other)."""

from __future__ import annotations


class ConfigError(ValueError):
    """An impossible or inconsistent setting, caught before compiling."""


class RunFileError(ConfigError):
    """A run's or a sweep's file (config.json, metrics.jsonl, a sweep TOML) that cannot be
    read as jaxvaco wrote it; the message names the file, the line or the key."""
