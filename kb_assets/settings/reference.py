"""``docs/configuration.md``, rendered from the settings' declarations (``declare.py``).

``python -m kb_assets.settings.reference > docs/configuration.md`` writes it again after a setting was
added or changed; a test holds the file to the declarations.
"""

from __future__ import annotations

from dataclasses import MISSING
from pathlib import Path
from typing import Any

from kb_assets.settings.declare import Leaf, leaves

HEAD = """# Configuration

Environment variables, read only by `kb_assets/settings/`; unset (or empty) means the default. The README lists
the ones most deployments set; this is all of them, rendered from their declarations in
`kb_assets/settings/__init__.py` and `parts.py` (`python -m kb_assets.settings.reference > docs/configuration.md`).
**runs**: runs read it, so the Dagster resource `stores` carries it (the UI shows it, a launchpad may change it;
a secret by its variable's name only). Settings marked *no variable* are set only there.

| variable | default | meaning | runs |
|---|---|---|---|
"""
TAIL = """
`DAGSTER_POSTGRES_URL` is read by the production instance config (`deploy/single-host/dagster.yaml`), not by
kb-assets: copy that file into `DAGSTER_HOME` for that profile.
"""


def shown(value: Any) -> str:
    """A default as the table shows it."""
    if value is MISSING or value is None or value == "":
        return "none"
    if isinstance(value, bool):
        return "`1`" if value else "`0`"
    return f"`{value}`"


def row(leaf: Leaf) -> str:
    d = leaf.declared
    name = f"`{leaf.variable}`" if leaf.variable else f"*no variable* (`{leaf.name}`)"
    name += "".join(f" (or `{other}`)" for other in d.fallback)
    default = d.shown_default if d.shown_default is not None else shown(leaf.default)
    meaning = (f"{leaf.about}: " if leaf.about else "") + d.description + (" *(secret)*" if d.secret else "")
    return f"| {name} | {default} | {meaning} | {'yes' if leaf.runs else ''} |"


def render(cls: type | None = None) -> str:
    """The configuration page of a settings class (default: kb-assets' ``Settings``)."""
    if cls is None:
        from kb_assets.settings import Settings

        cls = Settings
    return HEAD + "\n".join(row(leaf) for leaf in leaves(cls)) + "\n" + TAIL


DOCUMENT = Path("docs") / "configuration.md"  # relative to the repository root

if __name__ == "__main__":
    print(render(), end="")
