"""Scratch space for temporary files of runs (e.g. the parse step's copy of a source), under
``KB_SCRATCH_DIR`` (default ``<system temp>/kb-assets-scratch``): one folder a process, named by its process token. Temporary files are removed on the
normal exit paths by their owners; a folder whose process is gone (killed) is removed by the next
process that asks for its own folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kb_assets.processes import process_alive, process_token


def clean_scratch(root: Path) -> list[str]:
    """Remove the folders of processes of this host that are gone; returns their names."""
    removed = []
    if not root.is_dir():
        return removed
    for folder in root.iterdir():
        if folder.is_dir() and process_alive(folder.name) is False:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
    return removed


def scratch_dir(root: Path) -> Path:
    """This process's scratch folder under ``root`` (created; abandoned folders removed first)."""
    clean_scratch(root)
    folder = root / process_token()
    folder.mkdir(parents=True, exist_ok=True)
    return folder
