"""The structure's guard: no import circle in the repository (the modules of `jaxvaco/` and
`experiments/` import one another along a graph without cycles), and jaxvaco's imports go
down its layers, never up. Every import statement counts (module level, inside functions,
under `if __name__ == "__main__":`)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("jaxvaco", "experiments")
PUBLIC = ("jaxvaco", "jaxvaco.core.config", "jaxvaco.core.algos", "jaxvaco.host.runner",
          "jaxvaco.host.policy")
"""The modules of jaxvaco's public API (docs/reference/): these, and every module of the lab
and llm packages."""
INTERNAL_STILL_REACHED = {("experiments.llm_rl", "jaxvaco.core.primitives")}
"""Imports of an internal module by an experiment, left for the rewrite of the LLM scripts
to remove."""
LAYERS = ("core", "host", "lab", "cli")
"""jaxvaco's subpackages are its layers, from the bottom: core (pure and jitted: the config,
the algorithms, envs, networks, estimators, the lag, the stages), host (the host loop,
programs, checkpoints, the run folder, asynchronous actors, policies), lab (the results
schema, statistics, plots, sweeps), cli (the command line; with it the package root, the
facade, and __main__). A module imports only from its own layer and those below. `llm`
stands beside them: it may import core, host and lab, and only cli imports it."""


def layer_of(module: str) -> str:
    """The layer of a module of jaxvaco: its subpackage ("undeclared" for a module outside
    them)."""
    first = module.split(".")[1] if "." in module else ""
    if first in ("", "__main__"):
        return "cli"
    return first if first in (*LAYERS, "llm") else "undeclared"


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs of jaxvaco that go up a layer, or into llm from outside it
    and cli."""
    out = []
    for module, edges in graph.items():
        source = layer_of(module)
        for edge in edges:
            target = layer_of(edge)
            if source == "llm":
                up = target == "cli"
            elif target == "llm":
                up = source != "cli"
            else:
                up = LAYERS.index(target) > LAYERS.index(source)
            if up:
                out.append((module, edge))
    return sorted(out)


def module_names(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """{dotted module name: file} of every .py file under root/<package>."""
    names = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names[".".join(parts)] = path
    return names


def imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
             modules: dict[str, Path]) -> list[str]:
    """The modules of `modules` an import statement in `module` loads: the nearest module
    enclosing 'a.b' for `import a.b`; for `from a.b import c`, 'a.b.c' when it is a module,
    else (c is a name defined in a.b) the nearest module enclosing 'a.b'. Relative imports
    are resolved; parent packages imported on the way are not counted."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = module.split(".")
            parent = parts[: len(parts) - node.level + is_package]
            base = ".".join(parent + ([base] if base else []))
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                 for alias in node.names]
    found = []
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            found.append(name)
    return found


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """{module: the modules of `packages` it imports (`imported`)}."""
    modules = module_names(root, packages)
    graph = {}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(imported(node, module, is_package, modules))
        graph[module] = edges - {module}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of `graph` as [a, b, ..., a], or [] when it has none (depth-first search,
    iterative so that deep graphs do not hit the recursion limit)."""
    state: dict[str, str] = {}  # absent: unseen, "open": on the current path, "done"
    for start in sorted(graph):
        if start in state:
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = "open"
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = "done"
                stack.pop()
            elif state.get(step) == "open":
                return path[path.index(step):] + [step]
            elif step not in state:
                state[step] = "open"
                path.append(step)
                stack.append(iter(sorted(graph.get(step, ()))))
    return []


def test_no_import_cycle_in_jaxvaco_or_experiments():
    graph = import_graph(REPO)
    assert "jaxvaco.host.runner" in graph and "experiments.common" in graph
    assert "jaxvaco.lab.results" in graph["experiments.common"]
    cycle = find_cycle(graph)
    assert cycle == [], "import cycle: " + " -> ".join(cycle)


def test_every_jaxvaco_module_is_in_a_layer():
    graph = import_graph(REPO, ("jaxvaco",))
    assert [m for m in graph if layer_of(m) == "undeclared"] == [], "move it into a layer"


def test_jaxvaco_imports_only_go_down_its_layers():
    graph = import_graph(REPO, ("jaxvaco",))
    assert upward_imports(graph) == []


def test_an_upward_import_is_found():
    """The check can fail: core importing host (as rollout once read the replay file), host
    importing lab or the package root, and core importing llm are each reported."""
    graph = {"jaxvaco.core.rollout": {"jaxvaco.host.asynchronous.schedule"},
             "jaxvaco.host.progress": {"jaxvaco.lab.tables"},
             "jaxvaco.core.config": {"jaxvaco.llm.config"},
             "jaxvaco.host.policy_export": {"jaxvaco"},
             "jaxvaco.llm.runner": {"jaxvaco.lab.results"},
             "jaxvaco.cli.train": {"jaxvaco.llm"}}
    assert upward_imports(graph) == [
        ("jaxvaco.core.config", "jaxvaco.llm.config"),
        ("jaxvaco.core.rollout", "jaxvaco.host.asynchronous.schedule"),
        ("jaxvaco.host.policy_export", "jaxvaco"),
        ("jaxvaco.host.progress", "jaxvaco.lab.tables")]


def test_claims_package_stands_apart_from_the_experiments():
    """Imports go one way: the claims registry and renderers -> the experiments -> jaxvaco;
    only the two command shims import the claims package, and no experiment does."""
    graph = import_graph(REPO)
    shims = {"experiments.check_claims", "experiments.render_readme"}
    into_claims = sorted(module for module, edges in graph.items()
                         if not module.startswith("experiments.claims") and module not in shims
                         and any(e.startswith("experiments.claims") for e in edges))
    assert into_claims == []
    assert "experiments.fair_study" in graph["experiments.claims.data"]
    assert not [e for e in graph["experiments.claims.record"] if e.startswith(PACKAGES)]
    assert not [e for e in graph["experiments.markdown"] if e.startswith(PACKAGES)]


def test_experiments_reach_jaxvaco_through_its_public_api():
    def public(module: str) -> bool:
        return module in PUBLIC or module.startswith(("jaxvaco.lab", "jaxvaco.llm"))

    graph = import_graph(REPO)
    internal = {(module, edge) for module, edges in graph.items()
                if module.startswith("experiments") for edge in edges
                if edge.startswith("jaxvaco") and not public(edge)}
    assert internal - INTERNAL_STILL_REACHED == set(), "re-export it from a public module"


def test_cycles_are_found_through_function_level_and_relative_imports(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from ..c import g\n")
    (package / "c.py").write_text("import os\nif __name__ == '__main__':\n    import pkg.a\n")
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.a"] == {"pkg.sub.b"}
    assert graph["pkg.sub.b"] == {"pkg.c"}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
    (package / "c.py").write_text("import os\n")
    assert find_cycle(import_graph(tmp_path, ("pkg",))) == []
