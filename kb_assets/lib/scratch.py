"""Scratch space for temporary files of runs (e.g. the parse step's copy of a source), under
``KB_SCRATCH_DIR`` (default ``<system temp>/kb-assets-scratch``): one folder a process, named by its
process token. Temporary files are removed on the
normal exit paths by their owners; a folder whose process is gone (killed) is removed by the next
process that asks for its own folder.

Helper processes that the folder's process started (parse workers) record their own token in its
``workers/`` folder (``workers_dir``); removing a gone process's folder first kills those of them that
are still running and still the recorded process (they normally die with it: ``processes.die_with_parent``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kb_assets.lib.processes import kill_process, process_alive, process_token

WORKERS = "workers"
_OWN: list[Path] = []  # the folders ``scratch_dir`` made for this process


def clean_scratch(root: Path) -> list[str]:
    """Remove the folders of processes of this host that are gone, after killing the workers they
    recorded that still run; returns the folders' names."""
    removed: list[str] = []
    if not root.is_dir():
        return removed
    for folder in root.iterdir():
        if folder.is_dir() and process_alive(folder.name) is False:
            workers = folder / WORKERS
            for record in workers.iterdir() if workers.is_dir() else ():
                kill_process(record.name)
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
    return removed


def scratch_dir(root: Path) -> Path:
    """This process's scratch folder under ``root`` (created; abandoned folders removed first)."""
    clean_scratch(root)
    folder = root / process_token()
    folder.mkdir(parents=True, exist_ok=True)
    if folder not in _OWN:
        _OWN.append(folder)
    return folder


def workers_dir() -> Path | None:
    """Where this process's helper processes record themselves (None: it has no scratch folder yet)."""
    mine = [folder for folder in _OWN if folder.name == process_token()]
    return mine[-1] / WORKERS if mine else None
