"""A Milvus Lite gRPC server that the code starts itself, with all its state under ``home``
(milvus-lite's server with its writes serialized: ``milvus_lite_server``).

Layout under ``home``::

    milvus.lock     flock held while starting or stopping
    milvus/         the data dir (Milvus Lite allows one process per data dir)
    milvus.json     {"pid": ..., "port": ...} of the running server (pid null once stopped; the
                    port is reused at the next start when still free)
    milvus.log      the server's stdout and stderr

After a restart collections are not loaded: callers call ``load_collection()`` before searching.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from pymilvus import MilvusClient

from kb_assets.services.local import free_port, locked, log_tail, port_free

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 10
# pymilvus pings every 10 s; gRPC servers (milvus-lite's included) answer pings more often than every
# 5 minutes without calls with GOAWAY "too_many_pings": ping as rarely as the server accepts. pymilvus
# shares one channel per address, made with the options of the first client: every client passes these.
GRPC_OPTIONS = {"grpc.keepalive_time_ms": 360_000, "grpc.keepalive_permit_without_calls": False}


class MilvusExited(RuntimeError):
    """The server process exited before it answered."""


def milvus_client(uri: str, timeout: float | None = 30) -> MilvusClient:
    """A pymilvus client of ``uri`` with ``GRPC_OPTIONS`` (every kb-assets client is made here)."""
    return MilvusClient(uri=uri, timeout=timeout, grpc_options=GRPC_OPTIONS)


# ---------------------------------------------------------------- public API


def ensure_milvus(home: Path) -> str:
    """Start (or reuse) the Milvus Lite server for ``home/"milvus"``; return ``http://127.0.0.1:PORT``.
    Idempotent and safe across processes."""
    home = Path(home).absolute()
    with locked(home / "milvus.lock"):
        state = _running(home)
        if state is not None:
            uri = _uri(state["port"])
            try:
                _wait_ready(uri, state["pid"], home / "milvus.log")
                return uri
            except MilvusExited:
                pass  # it was dying (a kill -9 takes a while to finish): start a new one below
        port = _choose_port(home / "milvus.json")
        pid = _spawn(home, port)
        (home / "milvus.json").write_text(json.dumps({"pid": pid, "port": port}) + "\n")
        uri = _uri(port)
        try:
            _wait_ready(uri, pid, home / "milvus.log")
        except RuntimeError:
            _terminate(pid)  # do not leave a half-started server holding the data dir
            raise
        return uri


def stop_milvus(home: Path) -> bool:
    """Stop the server for ``home`` (SIGTERM, then SIGKILL after a wait); False when it was not running."""
    home = Path(home).absolute()
    with locked(home / "milvus.lock"):
        state = _running(home)
        if state is None:
            return False
        _terminate(state["pid"])
        (home / "milvus.json").write_text(json.dumps({"pid": None, "port": state["port"]}) + "\n")
        return True


def milvus_status(home: Path) -> dict:
    """Describe the server for ``home`` without starting or locking anything."""
    home = Path(home).absolute()
    state = _running(home)
    return {
        "running": state is not None,
        "uri": _uri(state["port"]) if state else None,
        "port": state["port"] if state else None,
        "pid": state["pid"] if state else None,
        "dataDir": str(home / "milvus"),
        "log": str(home / "milvus.log"),
    }


# ---------------------------------------------------------------- process


def _spawn(home: Path, port: int) -> int:
    """Start the server detached (own session), logging to ``home/milvus.log``; return its pid."""
    data = home / "milvus"
    data.mkdir(parents=True, exist_ok=True)
    # milvus-lite's server with its writes serialized, on this interpreter, whatever is on PATH
    cmd = [
        sys.executable,
        "-m",
        "kb_assets.services.milvus_lite_server",
        "--data-dir",
        str(data),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with open(home / "milvus.log", "ab") as log:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=home, start_new_session=True
        )
    return proc.pid


def _running(home: Path) -> dict | None:
    """The ``{"pid", "port"}`` from ``milvus.json`` when that server process is alive, else None."""
    try:
        state = json.loads((home / "milvus.json").read_text())
        pid, port = int(state["pid"]), int(state["port"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    return {"pid": pid, "port": port} if _alive(pid, str(home / "milvus")) else None


def _alive(pid: int, needle: str) -> bool:
    """True when ``pid`` runs and (where /proc exists) is a milvus-lite whose command holds ``needle``."""
    if _gone(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except FileNotFoundError:
        return not Path("/proc/self").exists()
    return ("milvus_lite" in cmdline or "milvus-lite" in cmdline) and needle in cmdline


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie counts: its sockets are closed)."""
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return Path("/proc/self").exists()  # vanished meanwhile (without /proc, trust kill)
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    # a zombie main thread whose other threads still run has not closed its sockets yet
    return fields.get("State", "").split()[:1] == ["Z"] and fields.get("Threads", "1").strip() in ("0", "1")


def _reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is our own child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _terminate(pid: int) -> None:
    """SIGTERM the server's process group, wait up to STOP_TIMEOUT_S, then SIGKILL."""
    for sig, wait_s in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 5)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig) if os.getpgid(pid) == pid else os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if _gone(pid):
                _reap(pid)  # it may have turned zombie after the first waitpid
                return
            time.sleep(0.05)
    raise RuntimeError(f"milvus-lite (pid {pid}) survived SIGKILL")


def _wait_ready(uri: str, pid: int, log: Path, timeout_s: float = START_TIMEOUT_S) -> None:
    """Poll until a client can list collections; fail early, with the log tail, if the process dies."""
    deadline = time.monotonic() + timeout_s
    while True:
        error = _probe(uri)
        if error is None:
            return
        if _gone(pid):
            raise MilvusExited(f"milvus-lite (pid {pid}) exited before serving {uri}" + log_tail(log))
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"milvus-lite (pid {pid}) does not answer on {uri} after {timeout_s:.0f} s: {error}" + log_tail(log)
            )
        time.sleep(0.2)


def _probe(uri: str) -> str | None:
    """None when the server answers ``list_collections``, else the error text. A plain TCP connect
    comes first: pymilvus logs a traceback per failed call on a cached connection to a dead server."""
    try:
        socket.create_connection(("127.0.0.1", int(uri.rsplit(":", 1)[1])), timeout=1).close()
    except OSError as exc:
        return f"TCP connect to {uri}: {exc}"
    try:
        client = milvus_client(uri, timeout=5)
    except Exception as exc:  # pymilvus raises MilvusException (and others) while the server starts
        return str(exc)
    try:
        client.list_collections()
        return None
    except Exception as exc:
        return str(exc)
    finally:
        client.close()


def _uri(port: int) -> str:
    return f"http://127.0.0.1:{port}"


# ---------------------------------------------------------------- helpers


def _choose_port(state_file: Path) -> int:
    """The port remembered in ``state_file`` when still free, else a random free one below the
    ephemeral range."""
    try:
        port = int(json.loads(state_file.read_text())["port"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        port = None
    if port is not None and port_free(port):
        return port
    return free_port()
