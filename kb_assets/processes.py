"""Which process is this, and is that one still running: what ``kb-assets`` leaves behind (runs it
started, scratch folders) names the process that made it, so the next command can tell what a killed
process (SIGKILL runs no handler) abandoned.

A token is ``PID.STARTTIME@HOST``; the start time (from ``/proc``) tells a process from a later one that
got the same pid.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def _start_time(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "0"
    return stat.rsplit(")", 1)[1].split()[19]   # field 22: start time in clock ticks since boot


def process_token(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{pid}.{_start_time(pid)}@{socket.gethostname()}"


def process_alive(token: str) -> bool | None:
    """True/False for a token of this host; None when it names another host (or is malformed)."""
    ident, _, host = token.partition("@")
    pid, _, started = ident.partition(".")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return _start_time(int(pid)) == started or started == "0"
