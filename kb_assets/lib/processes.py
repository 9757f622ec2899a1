"""Which process is this, and is that one still running: what ``kb-assets`` leaves behind (runs it
started, scratch folders) names the process that made it, so the next command can tell what a killed
process (SIGKILL runs no handler) abandoned.

A token is ``PID.STARTTIME@HOST``; the start time (from ``/proc``) tells a process from a later one that
got the same pid.

Helper processes (the parsing pool's workers) end with the process that started them
(``die_with_parent``), and the next command kills any that outlived it (``kill_process``, after
``same_process`` has checked it is still the one that was recorded).
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_POLL_S = 1.0  # how often a helper looks whether its parent is still there


def _start_time(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "0"
    return stat.rsplit(")", 1)[1].split()[19]  # field 22: start time in clock ticks since boot


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


def same_process(token: str) -> bool:
    """Whether the token names a process of this host that is still running, with the recorded start time
    (a later process that got the same pid is not it; an unknown start time never matches)."""
    ident, _, host = token.partition("@")
    pid, _, started = ident.partition(".")
    if host != socket.gethostname() or not pid.isdigit() or started in ("", "0"):
        return False
    return _start_time(int(pid)) == started


def kill_process(token: str) -> bool:
    """SIGKILL the process the token names when it is still that process (``same_process``); whether it was."""
    if not same_process(token) or token == process_token():
        return False
    try:
        os.kill(int(token.split(".", 1)[0]), signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def die_with_parent(parent_pid: int) -> None:
    """Make this process end when ``parent_pid`` (its parent) does, even by SIGKILL: on Linux the kernel
    sends it SIGKILL (``PR_SET_PDEATHSIG``; the signal follows the thread that started the process), and
    a daemon thread ends it when it is re-parented (everywhere, and should the signal not come)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent died before the signal was asked for
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="kb-parent-watch", daemon=True).start()


def orphaned_followers(folder: Path) -> list[int]:
    """Processes of this host re-parented to init (their starter died) that follow a file under ``folder``
    with ``tail -F``: what a killed Dagster run's compute-log capture leaves (they outlive it for good)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        name = os.path.basename(command[0].decode(errors="replace")) if command and command[0] else ""
        followed = [Path(arg.decode(errors="replace")) for arg in command[1:] if arg and not arg.startswith(b"-")]
        if name == "tail" and b"-F" in command and parent == 1 and any(p.is_relative_to(folder) for p in followed):
            found.append(int(entry.name))
    return found


def reap(pids: list[int]) -> list[int]:
    """SIGKILL these processes (they may ignore SIGTERM); those that were signalled."""
    reaped = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            reaped.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return reaped
