"""The shape of the package, guarded: the layer contract of ``pyproject.toml`` (import-linter: no import
against the written order of the layers), Dagster imported only by ``defs/``, ``definitions.py`` and
``launch/``, no import circle (imports inside functions and under TYPE_CHECKING counted), no module over
400 lines, at most 6 modules at the package root, and stores' clients built from settings in one place
only (``kb_assets/stores/__init__.py``, which Dagster resources, sensors, the command line and the service
all go through)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kb_assets"
# the only places that may import Dagster (and its plugins)
DAGSTER_HOMES = ("kb_assets.defs", "kb_assets.definitions", "kb_assets.launch")
MAX_LINES = 400
MAX_ROOT_MODULES = 6
# the constructors of clients of the stores: called with settings' fields only in the one constructor
CLIENT_CONSTRUCTORS = {
    "Catalog",
    "ObjectStore",
    "Lake",
    "MilvusClient",
    "open_catalog",
    "open_milvus",
    "load_model",
    "milvus_client",
}
CONSTRUCTOR_MODULE = "kb_assets.stores"
# where a client class is defined, or a client is built from an explicit URI (not from settings)
CLIENT_HOMES = {
    "kb_assets.stores.catalog",
    "kb_assets.stores.objects",
    "kb_assets.stores.lake",
    "kb_assets.stores.models",
    "kb_assets.services.milvus",
    "kb_assets.services",
}


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """Every project module this one imports, wherever the import stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    graph = {name: imported(name, path, known) for name, path in found.items()}
    # importing a.b.c runs a/__init__ and a/b/__init__ too
    for name in graph:
        graph[name] = {t for t in graph[name]} - {p for p in _parents(name)}
    return graph


def _parents(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def dagster_importers() -> list[str]:
    """Modules that import dagster or a dagster_* package anywhere (inside functions too)."""
    found = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n == "dagster" or n.startswith(("dagster.", "dagster_")) for n in names):
                found.append(name)
                break
    return sorted(found)


def test_only_defs_definitions_and_launch_import_dagster():
    outside = [name for name in dagster_importers() if not name.startswith(DAGSTER_HOMES)]
    assert outside == []
    assert "kb_assets.launch.runs" in dagster_importers()  # the finder sees imports (not a test that cannot fail)


def test_the_layer_contract_holds():
    """``lint-imports`` (pyproject.toml's [tool.importlinter]): every import follows the written order of the
    layers, and no module outside defs/, definitions.py and launch/ imports Dagster."""
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=PACKAGE.parent, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:]
    assert "3 kept, 0 broken" in result.stdout


def test_no_import_circle_counting_imports_inside_functions_and_type_only_ones():
    assert circles(import_graph()) == []


def test_no_module_passes_400_lines():
    long = {
        str(path.relative_to(PACKAGE.parent)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_at_most_six_modules_at_the_package_root():
    root = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def client_builders(path: Path) -> list[str]:
    """Calls in a module of the client constructors it imports from the stores or pymilvus."""
    tree = ast.parse(path.read_text())
    imported_names = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.module in CLIENT_HOMES or node.module in (CONSTRUCTOR_MODULE, "pymilvus"))
        for alias in node.names
        if alias.name in CLIENT_CONSTRUCTORS
    }
    return [
        f"{node.func.id} (line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in imported_names
    ]


def test_clients_of_the_stores_are_built_in_one_constructor():
    builders = {
        name: found
        for name, path in modules().items()
        if name != CONSTRUCTOR_MODULE and name not in CLIENT_HOMES and (found := client_builders(path))
    }
    assert builders == {}


def test_the_structure_rules_catch_what_they_guard(tmp_path):
    """The circle finder finds a circle through a function-level import (it is not a test that cannot fail)."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from kb_assets.settings import Settings\n")
    assert imported("kb_assets.x", module, {"kb_assets.settings", "kb_assets.x"}) == {"kb_assets.settings"}
    module.write_text("from kb_assets.stores.catalog import Catalog\n\ndef f(dsn):\n    return Catalog(dsn)\n")
    assert client_builders(module) == ["Catalog (line 4)"]
