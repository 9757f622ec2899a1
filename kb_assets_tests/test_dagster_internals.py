"""Dagster's private API is used behind one door, ``kb_assets/defs/dagster_internals.py``: no other Python
module of the package names ``dagster._``, and every private name the door uses still exists (a Dagster
upgrade that moves one fails here, by name, before a run does)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import dagster as dg

PACKAGE = Path(__file__).resolve().parents[1] / "kb_assets"
DOOR = PACKAGE / "defs" / "dagster_internals.py"


def test_only_the_door_names_dagster_private_modules():
    users = sorted(
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if re.search(r"dagster\._", p.read_text())
    )
    assert users == ["defs/dagster_internals.py"], (
        "Dagster's private API (dagster._...) belongs in kb_assets/defs/dagster_internals.py, with what public "
        f"API it stands for; found in {users}"
    )


def _private_names() -> list[tuple[str, str | None]]:
    """(module, name) of every ``from dagster._... import name`` and every ``"dagster._..."`` module string
    of the door, with the class a ``{"module": ..., "class": ...}`` names."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(DOOR.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dagster._"):
            found += [(node.module or "", alias.name) for alias in node.names]
        elif isinstance(node, ast.Dict):
            pairs = {
                k.value: v.value
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
            }
            if str(pairs.get("module", "")).startswith("dagster._"):
                found.append((str(pairs["module"]), pairs.get("class")))
    return found


def test_every_private_name_the_door_uses_still_exists():
    names = _private_names()
    assert names, "the door names no private module: has it moved?"
    moved = []
    for module, name in names:
        try:
            found = importlib.import_module(module)
        except ImportError:
            moved.append(module)
            continue
        if name is not None and not hasattr(found, name):
            moved.append(f"{module}.{name}")
    if not hasattr(dg.DagsterEvent, "build_asset_materialization_planned_event"):
        moved.append("dagster.DagsterEvent.build_asset_materialization_planned_event")
    # methods the door calls on public objects (latest_data_versions: what Dagster's data-version cache reads)
    if not hasattr(dg.DagsterInstance, "get_latest_storage_id_by_partition"):
        moved.append("dagster.DagsterInstance.get_latest_storage_id_by_partition")
    event_storage = importlib.import_module("dagster._core.storage.event_log.base").EventLogStorage
    if not hasattr(event_storage, "get_latest_tags_by_partition"):
        moved.append("dagster.EventLogStorage.get_latest_tags_by_partition")
    assert moved == [], (
        f"Dagster {dg.__version__} moved private API kb-assets uses: {moved}. Change "
        "kb_assets/defs/dagster_internals.py (each use says what it is for) and rerun the tests."
    )


def test_the_door_still_loads():
    from kb_assets.defs import dagster_internals

    assert dagster_internals.DEFER_ASSET_EVENTS_TAG == "dagster/defer_asset_events"  # definitions_shape.json's tag
