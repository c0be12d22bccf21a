"""Shared pytest fixtures.

`fast_compile` lowers XLA's optimisation effort while a test module runs. The training
tests are dominated by compiling whole training loops on CPU; with most optimisations
disabled compilation is roughly 40% faster. The programs compute the same thing (only
float rounding may differ), and every comparison in these tests is between programs
compiled under the same setting. It is opt-in per module (an autouse fixture there) and
restored afterwards, so other test modules run with JAX's defaults.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import jax
import pytest

# The persistent compilation cache (on by default, in the user's cache directory) goes to
# a fresh directory of this test session instead; subprocesses inherit it. Identical
# programs compiled by several tests are then loaded from it.
_CACHE = tempfile.mkdtemp(prefix="jaxvaco-test-cache-")
os.environ["JAXVACO_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)


@pytest.fixture(scope="module")
def fast_compile():
    previous = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", True)
    yield
    jax.config.update("jax_disable_most_optimizations", previous)
