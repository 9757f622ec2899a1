"""What both embedded servers need: a cross-process lock, free loopback ports, a log tail for errors."""

from __future__ import annotations

import contextlib
import fcntl
import random
import socket
from pathlib import Path

PORT_RANGE = (15000, 32767)  # below the Linux ephemeral range, which starts at 32768


@contextlib.contextmanager
def locked(path: Path):
    """An exclusive flock on ``path`` for the duration of the block (shared across processes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def port_free(port: int, reuse_addr: bool = True) -> bool:
    """Bind-probe on 127.0.0.1 without SO_REUSEPORT (milvus-lite's gRPC server sets it, so a second
    server on a taken port would share it silently). SO_REUSEADDR, as the servers set it, lets a
    TIME_WAIT leftover of our own server not block its restart."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if reuse_addr:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A random free port in PORT_RANGE."""
    for _ in range(200):
        port = random.randint(*PORT_RANGE)
        if port_free(port, reuse_addr=False):
            return port
    raise RuntimeError(f"no free TCP port on 127.0.0.1 in {PORT_RANGE}")


def log_tail(log: Path, lines: int = 20) -> str:
    try:
        tail = log.read_text(errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return f"\n(no log at {log})"
    return f"\n--- last lines of {log} ---\n" + "\n".join(tail)
