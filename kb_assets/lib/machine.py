"""What this machine offers a process: its cores, the cache folder of exported models, and offline model
libraries. (Settings read the environment; these are facts of the machine and the one environment write
that must happen before a model library is imported.)"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_CACHE_DIR = Path.home() / ".cache" / "kb-assets"


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def use_offline_model_libraries() -> None:
    """Models load from installed packages or local paths only: Hugging Face libraries never go online."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
        os.environ.setdefault(name, "1")
