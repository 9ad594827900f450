"""No import cycles between the repository's top-level packages (DESIGN "Layout").

The graph is read from the source (AST), so function-level imports count as much as
module-level ones; `bench`, `demo` and `config` are included. Tests and migrations are left
out: a test may borrow another app's fixtures.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {"tests", "migrations", "__pycache__"}


def top_level_packages(root: Path) -> set[str]:
    return {
        child.name
        for child in root.iterdir()
        if child.is_dir() and (child / "__init__.py").exists() and not child.name.startswith(".")
    }


def package_edges(root: Path) -> dict[str, dict[str, list[str]]]:
    """Map package -> imported package -> the `module:line` sites that import it."""
    packages = top_level_packages(root)
    edges: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for package in packages:
        for path in (root / package).rglob("*.py"):
            if SKIPPED_DIRS & set(path.relative_to(root).parts[:-1]):
                continue
            tree = ast.parse(path.read_bytes(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    targets = [node.module]
                else:
                    continue
                for target in targets:
                    top = target.split(".")[0]
                    if top in packages and top != package:
                        site = f"{path.relative_to(root)}:{node.lineno}"
                        edges[package][top].append(site)
    return edges


def cycles(edges: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in edges.get(node, {}):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
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

    for node in sorted(set(edges) | {b for a in edges.values() for b in a}):
        if node not in index:
            visit(node)
    return found


def test_the_repository_has_no_package_import_cycles():
    edges = package_edges(ROOT)

    found = cycles(edges)

    detail = [
        f"{a} -> {b}: {edges[a][b][:3]}"
        for group in found
        for a in group
        for b in group
        if b in edges.get(a, {})
    ]
    assert found == [], "\n".join(detail)
    assert {"bench", "demo", "config", "chat", "console", "evals"} <= top_level_packages(ROOT)


def _package(root: Path, name: str, **modules: str) -> None:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text("")
    for module, source in modules.items():
        (root / name / f"{module}.py").write_text(source)


def test_a_function_level_import_closing_a_loop_counts_as_a_cycle(tmp_path):
    _package(tmp_path, "low", models="def f():\n    from high import views\n")
    _package(tmp_path, "high", views="from low.models import f\n")
    _package(tmp_path, "side", tests_ok="import low\n")

    assert cycles(package_edges(tmp_path)) == [["high", "low"]]


def test_imports_from_tests_and_migrations_do_not_count(tmp_path):
    _package(tmp_path, "low", models="x = 1\n")
    _package(tmp_path, "high", views="import low.models\n")
    (tmp_path / "low" / "tests").mkdir()
    (tmp_path / "low" / "tests" / "test_x.py").write_text("import high.views\n")

    assert cycles(package_edges(tmp_path)) == []
