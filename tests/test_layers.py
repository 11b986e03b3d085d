"""The import graph of ``explorer`` and ``widgets`` has no cycle, type-checking imports and
imports inside functions included (the layers themselves are import-linter's contract in
pyproject.toml, which ``make lint`` and ``make test`` check)."""

from __future__ import annotations

import grimp


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_import_graph_has_no_cycle() -> None:
    graph = grimp.build_graph("explorer", "widgets")
    assert cycles(graph) == []


def test_a_cycle_is_found() -> None:
    graph = grimp.ImportGraph()
    for a, b in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")]:
        graph.add_import(importer=a, imported=b)
    assert cycles(graph) == [["p.a", "p.b", "p.c"]]


def _private_reaches(graph: grimp.ImportGraph, importers: str) -> list[tuple[str, str]]:
    """Imports by modules under ``importers`` of a private module (a name part starting with
    ``_``) of ``explorer`` that is not in their own package."""
    found = []
    for importer in sorted(graph.find_descendants(importers) | {importers}):
        own = importer.split(".")[:2]  # e.g. explorer.storage: its own privates are its own
        for imported in graph.find_modules_directly_imported_by(importer):
            parts = imported.split(".")
            if parts[0] != "explorer" or not any(p.startswith("_") for p in parts[1:]):
                continue
            if parts[:2] == own or imported.startswith("explorer._tvm"):
                continue  # inside its own package; the one TVM shim is everyone's
            if importers == "explorer" and len(parts) == 2:
                continue  # explorer's leaf modules (explorer._process, ...) serve the core
            found.append((importer, imported))
    return found


def test_the_widgets_use_the_core_librarys_public_modules_only() -> None:
    graph = grimp.build_graph("explorer", "widgets")
    assert _private_reaches(graph, "widgets") == []


def test_no_package_of_the_core_reaches_into_another_ones_private_modules() -> None:
    graph = grimp.build_graph("explorer", "widgets")
    assert _private_reaches(graph, "explorer") == []


def test_a_private_reach_is_found() -> None:
    graph = grimp.ImportGraph()
    for module in ["explorer", "widgets", "explorer.storage", "explorer.search"]:
        graph.add_module(module)
    for a, b in [
        ("widgets.panel", "explorer.text"),  # public: fine
        ("widgets.panel", "explorer._text"),  # a private leaf
        ("explorer.search._x", "explorer.storage._y"),  # another package's private module
        ("explorer.storage._a", "explorer.storage._y"),  # its own: fine
        ("explorer.search._x", "explorer._process"),  # a leaf of the core: fine
    ]:
        graph.add_import(importer=a, imported=b)
    assert _private_reaches(graph, "widgets") == [("widgets.panel", "explorer._text")]
    assert _private_reaches(graph, "explorer") == [("explorer.search._x", "explorer.storage._y")]
