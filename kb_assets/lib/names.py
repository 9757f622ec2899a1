"""The one pattern of knowledge-base names, checked wherever a name enters: the HTTP API, KB_API_KEYS,
KB_WATCH and the CLI's ``--kb``. A name starts with a letter or digit and holds at most 64 ASCII
letters, digits, ``_``, ``.`` and ``-``: no separators of the settings (``,;=``), no ``*``, no path.
Imports nothing from kb_assets, so every layer may use it."""

from __future__ import annotations

import re

KNOWLEDGE_BASE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_KNOWLEDGE_BASE_ID = re.compile(KNOWLEDGE_BASE_ID_PATTERN)


def validate_knowledge_base_id(name: str) -> str:
    """``name`` when it is a valid knowledge-base name; else ValueError saying what a name may hold."""
    if not isinstance(name, str) or not _KNOWLEDGE_BASE_ID.fullmatch(name):
        shown = repr(name) if len(str(name)) <= 80 else repr(str(name)[:80]) + "..."
        raise ValueError(
            f"knowledge base name {shown} is not valid: 1-64 ASCII letters, digits, '_', '.' or '-', "
            f"starting with a letter or digit"
        )
    return name
