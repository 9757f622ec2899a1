"""Values that pass between the steps, the stores, the command line and the service have names and types:
no function returns a bare ``dict`` (or ``list[dict]``, ``dict[str, Any]``). A true free-form mapping (a
JSON body passed through, a Milvus entity, a database row read by column) is one of the few named aliases
below, each declared once with what it holds."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kb_assets"
BARE = {"dict", "Dict", "dict[str, Any]", "dict[str, object]"}
# owned by the search-speed issue while it rewrites them; typed once it lands
NOT_YET = ("retrieval/", "stores/catalog/search_reads.py", "stores/vectors.py", "stores/vector_search.py")
# the free-form mappings, by where they are declared
ALIASES = {
    "lib/json_types.py": {"JsonObject"},  # a JSON body passed through: API answers, --json output, run metadata
    "stores/entities.py": {"Entity"},  # a Milvus entity, as pymilvus takes and gives it
    "lib/rows.py": {"PageRow", "NodeRow"},  # pages / pageindex_nodes rows by column
    "defs/document_steps.py": {"Metadata"},  # Dagster metadata: names to values Dagster renders
    "settings/parts.py": {"StorageOptions"},  # fsspec/s3fs keyword options, passed through
}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(PACKAGE)), ast.parse(path.read_text()))
        for path in sorted(PACKAGE.rglob("*.py"))
        if not str(path.relative_to(PACKAGE)).startswith(NOT_YET)
    ]


def _bare(annotation: ast.expr) -> bool:
    text = ast.unparse(annotation).strip("'\"").replace(" ", "")
    parts = {p for p in text.replace("|None", "").replace("None|", "").split("|")}
    inner = {p[len("list[") : -1] if p.startswith("list[") and p.endswith("]") else p for p in parts}
    return bool(inner & {b.replace(" ", "") for b in BARE})


def test_no_function_returns_a_bare_dict():
    found = [
        f"{name}:{node.lineno} {node.name} -> {ast.unparse(node.returns)}"
        for name, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None and _bare(node.returns)
    ]
    assert found == [], "return a named value (a frozen dataclass, a TypedDict) or a named alias: " + "; ".join(found)


def test_free_form_mappings_are_the_named_few():
    declared: dict[str, set[str]] = {}
    for name, tree in _modules():
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            if isinstance(target, ast.Name) and _bare(node.value):  # type: ignore[union-attr]
                declared.setdefault(name, set()).add(target.id)
    assert declared == ALIASES
