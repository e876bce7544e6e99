"""The package's modules import each other without a circle (every import counts, those
inside functions too): a module's place in the layering says what it may use."""
import ast
import os
from typing import Dict, List, Set

import fwkernels

PACKAGE = os.path.dirname(fwkernels.__file__)


def module_names() -> Dict[str, str]:
    """Dotted module name -> file, for every module of the package."""
    out = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                out[".".join(parts)] = path
    return out


def imports(path: str, module: str, known: Set[str]) -> Set[str]:
    """The package's modules that ``module`` imports (``from a import b``: a.b if a module)."""
    found = set()
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                      for alias in node.names}
    return {name for name in found if name in known and name != module}


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Every strongly connected group of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    out: List[List[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_no_import_circles_in_the_package():
    modules = module_names()
    graph = {m: imports(path, m, set(modules)) for m, path in modules.items()}
    assert len(graph) > 30 and "fwkernels.frameworks.torch.backend" in graph
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
