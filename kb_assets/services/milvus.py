"""The embedded Milvus engine that the code starts itself, with all its state under ``home``: Milvus
Lite 2.5.1's C++ core under its supervisor (``milvus_engine``).

Layout under ``home``::

    milvus.lock     flock held while starting or stopping
    milvus/         the data folder: ``milvus.db`` (SQLite: schemas, indexes, every row) and the
                    engine's lock ``.milvus.db.lock`` (held by the supervisor: one engine a data file)
    milvus.json     {"pid": ..., "port": ...} of the running supervisor (pid null once stopped; the
                    port is reused at the next start when still free)
    milvus.log      the supervisor's and the engine's output

A ``milvus/`` folder in Milvus Lite 3.x's layout (what kb-assets ran before) is moved aside to
``milvus-lite-3.2.2/`` at the first start, untouched; the published collection is rebuilt from the lake
(``stores.restore``), and the old folder can be deleted once that is done.

A collection is loaded by its first search after a start (every row read back into memory: ~4 s at
40,000 chunks, ~30 s at 200,000); ``load_collection`` does the same ahead of time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TypedDict

from pymilvus import MilvusClient

from kb_assets.lib.json_types import JsonObject
from kb_assets.services.local import free_port, locked, log_tail, port_free
from kb_assets.services.milvus_engine import ENGINE_VERSION, engine_binary

log = logging.getLogger(__name__)
START_TIMEOUT_S = 60
LEGACY_DIR = "milvus-lite-3.2.2"  # where Milvus Lite 3.x's data folder is moved
SUPERVISOR = "milvus_engine.py"  # run by its path: the supervisor imports nothing of kb_assets
STOP_TIMEOUT_S = 10
PF_EXITING = 0x4  # the kernel's task flag of a process in exit (/proc/PID/stat, field 9)
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
    """Start (or reuse) the embedded engine for ``home/"milvus"``; return ``http://127.0.0.1:PORT``.
    Idempotent and safe across processes."""
    home = Path(home).absolute()
    engine_binary()  # missing: say how to install it before anything is started or moved
    with locked(home / "milvus.lock"):
        state = _running(home)
        if state is not None and state["legacy"]:  # Milvus Lite 3.x's server of before: stopped, then moved
            _terminate(state["pid"])
            state = None
        if state is not None:
            uri = _uri(state["port"])
            try:
                _wait_ready(uri, state["pid"], home / "milvus.log")
                if not _dying(state["pid"]):
                    return uri
                # a supervisor killed a moment ago: its engine answers until it sees its lifeline go
                _terminate(state["pid"])
            except MilvusExited:
                pass  # it was dying (a kill -9 takes a while to finish): start a new one below
        _move_legacy_data(home)
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


def milvus_status(home: Path) -> JsonObject:
    """Describe the server for ``home`` without starting or locking anything."""
    home = Path(home).absolute()
    state = _running(home)
    return {
        "running": state is not None,
        "uri": _uri(state["port"]) if state else None,
        "port": state["port"] if state else None,
        "pid": state["pid"] if state else None,
        "engine": f"milvus-lite {ENGINE_VERSION}",
        "dataDir": str(home / "milvus"),
        "log": str(home / "milvus.log"),
    }


def legacy_data(home: Path) -> Path:
    """Where Milvus Lite 3.x's data folder of ``home`` is kept once the engine replaced it."""
    return Path(home).absolute() / LEGACY_DIR


def _move_legacy_data(home: Path) -> None:
    """Milvus Lite 3.x's data folder (``collections/``, ``LOCK``, ``aliases.json``) is not the engine's: move
    it aside, untouched, so the engine starts on an empty folder (the collection is rebuilt from the lake)."""
    data = home / "milvus"
    if (data / "milvus.db").exists() or not any((data / name).exists() for name in ("collections", "LOCK")):
        return
    target = legacy_data(home)
    if target.exists():
        target = target.with_name(f"{LEGACY_DIR}.{int(time.time())}")
    data.rename(target)
    log.warning(
        "%s held Milvus Lite 3.x data: moved to %s; the published collection is rebuilt from the lake "
        "(nothing is re-embedded); delete that folder once search answers again",
        data,
        target,
    )


# ---------------------------------------------------------------- process


def _spawn(home: Path, port: int) -> int:
    """Start the engine's supervisor detached (own session: the engine is in its process group),
    logging to ``home/milvus.log``; return the supervisor's pid."""
    data = home / "milvus"
    data.mkdir(parents=True, exist_ok=True)
    db = data / "milvus.db"
    cmd = [sys.executable, str(Path(__file__).with_name(SUPERVISOR)), "serve", "--db", str(db), "--port", str(port)]
    with open(home / "milvus.log", "ab") as log:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=home, start_new_session=True
        )
    return proc.pid


class Running(TypedDict):
    pid: int
    port: int
    legacy: bool  # Milvus Lite 3.x's server, which kb-assets ran before the engine


def _running(home: Path) -> Running | None:
    """The ``{"pid", "port", "legacy"}`` from ``milvus.json`` when that server process is alive, else None
    (``legacy``: Milvus Lite 3.x's server, which kb-assets ran before the engine)."""
    try:
        state = json.loads((home / "milvus.json").read_text())
        pid, port = int(state["pid"]), int(state["port"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    command = _command(pid, str(home / "milvus"))
    return None if command is None else {"pid": pid, "port": port, "legacy": SUPERVISOR not in command}


def _command(pid: int, needle: str) -> str | None:
    """The command line of ``pid`` when it runs and (where /proc exists) is the engine's supervisor (or
    Milvus Lite 3.x's server) and holds ``needle``; else None."""
    if _gone(pid):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except FileNotFoundError:
        return None if Path("/proc/self").exists() else SUPERVISOR  # no /proc: trust kill
    known = SUPERVISOR in cmdline or "milvus_lite" in cmdline or "milvus-lite" in cmdline
    return cmdline if known and needle in cmdline else None


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie counts: its sockets are closed)."""
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    fields = _proc_status(pid)
    if fields is None:
        return Path("/proc/self").exists()  # vanished meanwhile (without /proc, trust kill)
    # a zombie main thread whose other threads still run has not closed its sockets yet
    return fields.get("State", "").startswith("Z") and fields.get("Threads", "1") in ("0", "1")


def _dying(pid: int) -> bool:
    """True when ``pid`` is killed or exiting (a SIGKILL pending, the kernel's exiting flag, a zombie) or
    gone; on a system without /proc, only when gone."""
    fields, flags = _proc_status(pid), _proc_flags(pid)
    if fields is None or flags is None:
        return _gone(pid)
    pending = int(fields.get("SigPnd", "0"), 16) | int(fields.get("ShdPnd", "0"), 16)
    killed = bool(pending & (1 << (signal.SIGKILL - 1)))
    return killed or bool(flags & PF_EXITING) or fields.get("State", "").startswith("Z")


def _proc_status(pid: int) -> dict[str, str] | None:
    """``/proc/PID/status`` as its fields (values stripped); None when there is no such file."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return None
    return {key: value.strip() for key, value in (line.split(":", 1) for line in status.splitlines() if ":" in line)}


def _proc_flags(pid: int) -> int | None:
    """The kernel's task flags of ``pid`` (``/proc/PID/stat``, field 9); None when there is no such file."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[6])
    except FileNotFoundError:
        return None


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
    raise RuntimeError(f"the Milvus engine (pid {pid}) survived SIGKILL")


def _wait_ready(uri: str, pid: int, log: Path, timeout_s: float = START_TIMEOUT_S) -> None:
    """Poll until a client can list collections; fail early, with the log tail, if the process dies."""
    deadline = time.monotonic() + timeout_s
    while True:
        error = _probe(uri)
        if error is None:
            return
        if _gone(pid):
            raise MilvusExited(f"the Milvus engine (pid {pid}) exited before serving {uri}" + log_tail(log))
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the Milvus engine (pid {pid}) does not answer on {uri} after {timeout_s:.0f} s: {error}"
                + log_tail(log)
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


def _choose_port(state_file: Path, wait_s: float = 3.0) -> int:
    """The port remembered in ``state_file`` when free (an engine whose supervisor was killed exits
    within ~1.5 s and frees it: waited for up to ``wait_s``), else a random free one below the
    ephemeral range."""
    try:
        port = int(json.loads(state_file.read_text())["port"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return free_port()
    deadline = time.monotonic() + wait_s
    while not port_free(port):
        if time.monotonic() > deadline:
            return free_port()
        time.sleep(0.1)
    return port
