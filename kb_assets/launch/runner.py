"""The warm ingest runner: a process that keeps what a run loads (Dagster's definitions, docling, the checks'
great-expectations, the encoder), so that a small update does not load it all again.

``kb-assets ingest`` hands its ingest to the runner of its KB_HOME when one answers for the same settings and
code (``fingerprint``); otherwise it ingests in its own process, then starts a runner (``start``), which
exits after ``KB_RUNNER_IDLE_SECONDS`` without a request (default 600; 0: no runner). A runner takes one
ingest at a time (a command that finds it busy ingests in its own process), streams the progress back,
and answers the report; its runs are runs of the same instance, tagged with its process (a killed runner's
runs are failed by the next command, as a killed ingest's). ``kb-assets services down`` stops it.

It also executes the runs the instance's run launcher hands it (``run_launcher.py``: runs the folder sensor,
the schedule or the UI launched) when it has nothing else to do; runs launched meanwhile go the default way
(a process each, side by side).

The conversation is JSON lines over a Unix socket under ``$DAGSTER_HOME/run`` (``$KB_HOME/dagster/run``):
a request ``{"fingerprint", "paths", "knowledgeBaseId", "retryFailed"}``, then ``{"say": ...}`` and
``{"done": ...}`` (progress), and last ``{"report": ...}`` or ``{"error": {...}}``; or at once
``{"busy": true}`` / ``{"stale": true}``. A launched run: ``{"fingerprint", "runId"}``, answered
``{"accepted": true}`` at once (or ``stale`` / ``busy``), then executed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kb_assets.lib.json_types import JsonObject
from kb_assets.pipeline.progress import DocumentsDone
from kb_assets.settings import Settings
from kb_assets.settings.declare import values_of

if TYPE_CHECKING:
    pass

log = logging.getLogger("kb_assets.runner")
PACKAGE = Path(__file__).resolve().parents[1]
MAX_SOCKET_PATH = 100  # AF_UNIX paths are at most 107 bytes: a deeper KB_HOME gets no runner
START_TIMEOUT_S = 3.0  # how long a command waits for a runner's first answer
REQUEST_TIMEOUT_S = 5.0  # how long the runner waits for a request line once a client connected


class RunnerError(Exception):
    """An ingest that failed in the runner: the failure's type, module and message, as it was raised there."""

    def __init__(self, name: str, module: str, message: str, details: str):
        super().__init__(message)
        self.name, self.module, self.details = name, module, details


def folder(settings: Settings) -> Path:
    """The runner's socket and lock: beside the Dagster instance it runs in (DAGSTER_HOME)."""
    return settings.dagster_home / "run"


def socket_path(settings: Settings) -> Path:
    return folder(settings) / "ingest-runner.sock"


# settings only the sensors and the schedule read (the launch layer imports neither), and DAGSTER_HOME, whose
# effective folder counts (`make dev` sets it, a command may leave it to KB_HOME): `dagster dev` with KB_WATCH
# and a command without it share a runner
NOT_READ_HERE = {("watch",), ("watch_interval_seconds",), ("refresh_cron",), ("dagster_home_dir",)}


def fingerprint(settings: Settings) -> str:
    """What a runner must share with a command (or the run launcher) to work for it: the settings it reads,
    the interpreter and the code (its files' sizes and times, so an upgrade or an edit starts a new runner)."""
    code = sorted((str(p.relative_to(PACKAGE)), p.stat().st_mtime_ns, p.stat().st_size) for p in PACKAGE.rglob("*.py"))
    read = [(path, value) for path, value in values_of(settings) if path not in NOT_READ_HERE]
    python = (sys.prefix, os.path.realpath(sys.executable))  # `python` and `python3.11` of one venv are one
    material = repr((read, settings.dagster_home, settings.versions, python, os.getuid(), code))
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def usable(settings: Settings) -> bool:
    return settings.runner_idle_seconds > 0 and len(str(socket_path(settings))) <= MAX_SOCKET_PATH


# the command's side -----------------------------------------------------------------------------------
def ingest_remotely(
    settings: Settings,
    paths: list[Path | str],
    knowledge_base_id: str,
    retry_failed: bool,
    progress: Callable[[str], None],
    documents: Callable[[DocumentsDone], None] | None,
) -> JsonObject | None:
    """The ingest's report (``IngestReport.as_json``) from the runner; None when no runner takes it (none
    answers, it is busy, or it serves other settings or code: it then exits). ``RunnerError`` for a failure."""
    if not usable(settings) or not socket_path(settings).exists():
        return None
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    request = {
        "fingerprint": fingerprint(settings),
        "paths": [str(p) for p in paths],
        "knowledgeBaseId": knowledge_base_id,
        "retryFailed": retry_failed,
    }
    try:
        client.settimeout(START_TIMEOUT_S)
        client.connect(str(socket_path(settings)))
        client.sendall(json.dumps(request).encode() + b"\n")
        lines = client.makefile("rb")
        first = lines.readline()
    except OSError:  # nothing listens (a runner gone), or it did not answer in time: ingest here
        client.close()
        return None
    try:
        client.settimeout(None)  # an ingest takes as long as it takes
        line = first
        while line:
            message = json.loads(line)
            if message.get("busy") or message.get("stale"):
                return None
            if "say" in message:
                progress(message["say"])
            elif "done" in message and documents is not None:
                documents(DocumentsDone(**message["done"]))
            elif "report" in message:
                return message["report"]
            elif "error" in message:
                raise RunnerError(**message["error"])
            line = lines.readline()
        if first == b"":
            return None  # closed at once: a runner on its way out
        raise RunnerError("RunnerDied", __name__, "the ingest runner stopped before the ingest finished", "")
    finally:
        client.close()


def hand_over(settings: Settings, run_id: str) -> bool:
    """Give a launched run (created, ``STARTING``) to the runner of these settings and code; whether it took
    it (it then executes it). False when none answers, or it serves other settings (it then exits) or stops."""
    if not usable(settings) or not socket_path(settings).exists():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(START_TIMEOUT_S)
            client.connect(str(socket_path(settings)))
            client.sendall(json.dumps({"fingerprint": fingerprint(settings), "runId": run_id}).encode() + b"\n")
            answered = json.loads(client.makefile("rb").readline() or b"{}")
    except (OSError, ValueError):  # nothing listens, or no answer in time: the default launch
        return False
    return bool(answered.get("accepted"))


def start(settings: Settings) -> None:
    """Start a runner for these settings in the background (it finds out itself whether one runs already)."""
    if not usable(settings):
        return
    folder(settings).mkdir(parents=True, exist_ok=True)
    logs = settings.runs_log.parent
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "runner.log", "ab") as out:
        subprocess.Popen(
            [sys.executable, "-m", "kb_assets.launch.runner_process"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # not the command's terminal or process group: it outlives the command
            cwd=os.getcwd(),
        )


def stop(settings: Settings) -> int | None:
    """Stop the runner of this KB_HOME; its pid, or None when none ran."""
    pid = running(settings)
    if pid is None:
        return None
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return None
    deadline = time.monotonic() + 10
    while running(settings) == pid and time.monotonic() < deadline:
        time.sleep(0.1)
    return pid


def running(settings: Settings) -> int | None:
    """The pid of the runner of this KB_HOME (it holds the lock file), or None."""
    lock = folder(settings) / "ingest-runner.lock"
    if not lock.exists():
        return None
    with open(lock) as file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = file.read().strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(file, fcntl.LOCK_UN)
    return None
