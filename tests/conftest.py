"""Shared pytest fixtures.

`fast_compile` lowers XLA's optimisation effort while a test module runs. The training
tests are dominated by compiling whole training loops on CPU; with most optimisations
disabled compilation is roughly 40% faster. The programs compute the same thing (only
float rounding may differ), and every comparison in these tests is between programs
compiled under the same setting. It is opt-in per module (an autouse fixture there) and
restored afterwards, so other test modules run with JAX's defaults.
"""

from __future__ import annotations

import jax
import pytest


@pytest.fixture(scope="module")
def fast_compile():
    previous = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", True)
    yield
    jax.config.update("jax_disable_most_optimizations", previous)
