"""The warm ingest runner: a process that keeps what a run loads (Dagster's definitions, docling, the checks'
great-expectations, the encoder), so that a small update does not load it all again.

``kb-assets ingest`` hands its ingest to the runner of its KB_HOME when one answers for the same settings and
code (``fingerprint``); otherwise it ingests in its own process, then starts a runner (``start``), which
exits after ``KB_RUNNER_IDLE_SECONDS`` without a request (default 600; 0: no runner). A runner takes one
ingest at a time (a command that finds it busy ingests in its own process), streams the progress back,
and answers the report; its runs are runs of the same instance, tagged with its process (a killed runner's
runs are failed by the next command, as a killed ingest's). ``kb-assets services down`` stops it.

The conversation is JSON lines over a Unix socket under ``$DAGSTER_HOME/run`` (``$KB_HOME/dagster/run``):
a request ``{"fingerprint", "paths", "knowledgeBaseId", "retryFailed"}``, then ``{"say": ...}`` and
``{"done": ...}`` (progress), and last ``{"report": ...}`` or ``{"error": {...}}``; or at once
``{"busy": true}`` / ``{"stale": true}``.
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
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from kb_assets.lib.json_types import JsonObject
from kb_assets.pipeline.progress import DocumentsDone
from kb_assets.settings import Settings
from kb_assets.settings.declare import values_of

log = logging.getLogger("kb_assets.runner")
PACKAGE = Path(__file__).resolve().parents[1]
MAX_SOCKET_PATH = 100  # AF_UNIX paths are at most 107 bytes: a deeper KB_HOME gets no runner
START_TIMEOUT_S = 3.0  # how long a command waits for a runner's first answer


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


def fingerprint(settings: Settings) -> str:
    """What a runner must share with a command to ingest for it: the settings, the interpreter and the code
    (its files' sizes and times, so an upgrade or an edit starts a new runner)."""
    code = sorted((str(p.relative_to(PACKAGE)), p.stat().st_mtime_ns, p.stat().st_size) for p in PACKAGE.rglob("*.py"))
    material = repr((values_of(settings), settings.versions, sys.executable, os.getuid(), code))
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


def start(settings: Settings) -> None:
    """Start a runner for these settings in the background (it finds out itself whether one runs already)."""
    if not usable(settings):
        return
    folder(settings).mkdir(parents=True, exist_ok=True)
    logs = settings.runs_log.parent
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "runner.log", "ab") as out:
        subprocess.Popen(
            [sys.executable, "-m", "kb_assets.launch.runner"],
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


# the runner's side ------------------------------------------------------------------------------------
def serve(settings: Settings) -> None:
    """Hold the lock, warm up, and take ingests until ``runner_idle_seconds`` pass without one."""
    from kb_assets.launch.ingest import ingest

    folder(settings).mkdir(parents=True, exist_ok=True)
    lock = open(folder(settings) / "ingest-runner.lock", "a+")  # noqa: SIM115 (held for the process's life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return  # a runner serves this KB_HOME already
    lock.truncate(0)
    lock.write(str(os.getpid()))
    lock.flush()
    mine = fingerprint(settings)
    warm_up(settings)
    path = socket_path(settings)
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    busy, stopping = threading.Lock(), threading.Event()
    last = [time.monotonic()]

    def on_term(*_) -> None:  # stop taking ingests; one under way finishes first
        stopping.set()
        if not busy.locked():
            path.unlink(missing_ok=True)
            os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    log.warning("ingest runner %s ready for %s", os.getpid(), settings.home)
    server.settimeout(1.0)
    try:
        while not stopping.is_set() and (time.monotonic() - last[0] < settings.runner_idle_seconds or busy.locked()):
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            if not busy.acquire(blocking=False):
                answer(client, {"busy": True})
                client.close()
                continue

            def handle(client: socket.socket = client) -> None:
                try:
                    serve_one(client, settings, mine, ingest, stopping)
                finally:
                    client.close()
                    last[0] = time.monotonic()
                    busy.release()

            threading.Thread(target=handle, name="kb-runner-ingest", daemon=True).start()
        while busy.locked():  # stopping: let the ingest under way finish
            time.sleep(0.2)
    finally:
        path.unlink(missing_ok=True)
        log.warning("ingest runner %s exits", os.getpid())


def serve_one(client: socket.socket, settings: Settings, mine: str, ingest, stopping: threading.Event) -> None:
    request = json.loads(client.makefile("rb").readline() or b"{}")
    if request.get("fingerprint") != mine:  # a command with other settings or newer code: it ingests itself
        answer(client, {"stale": True})
        stopping.set()  # and starts a runner for its settings, which this one makes way for
        return
    try:
        report = ingest(
            [p if p.startswith(("s3://", "s3a://")) else Path(p) for p in request["paths"]],
            request["knowledgeBaseId"],
            settings,
            progress=lambda message: answer(client, {"say": message}),
            retry_failed=bool(request.get("retryFailed")),
            documents=lambda state: answer(client, {"done": asdict(state)}),
        )
        answer(client, {"report": report.as_json()})
    except Exception as error:  # the command explains it as its own
        kind = type(error)
        failure = {"name": kind.__name__, "module": kind.__module__, "message": str(error)}
        answer(client, {"error": {**failure, "details": traceback.format_exc()}})


def answer(client: socket.socket, message: dict) -> None:
    try:
        client.sendall(json.dumps(message, default=str).encode() + b"\n")
    except OSError:  # the command went away (Ctrl-C): the ingest goes on
        pass


def warm_up(settings: Settings) -> None:
    """Load what a run needs, and take each first-time path once (a document read, its chunks counted and
    encoded, rows validated), so that the first ingest it takes is as quick as the next."""
    import tempfile

    import great_expectations.expectations as gxe
    import polars as pl

    from kb_assets.defs.quality import validate
    from kb_assets.launch.instance import dagster_instance, definitions
    from kb_assets.lib.lexical import terms
    from kb_assets.parsing import parse_document
    from kb_assets.stores import Stores

    definitions(settings).resolve_job_def("ingest_documents")
    dagster_instance(settings)
    with tempfile.TemporaryDirectory() as scratch:
        note = Path(scratch) / "warm-up.md"
        note.write_text("# Warm up\n\nA paragraph the runner reads once.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
        parse_document(note, options=Stores.shared(settings).parse_options())
    model = Stores.shared(settings).model()
    model.count_tokens(["a paragraph the runner reads once"])
    model.encode(["a paragraph the runner reads once"])
    validate(pl.DataFrame({"document_id": ["warm-up"]}), [gxe.ExpectColumnValuesToNotBeNull(column="document_id")])
    terms("a paragraph the runner reads once 一段文字")  # the BM25 terms' segmenter (jieba's dictionary)
    stores = Stores.shared(settings)
    stores.lake.read("chunks", "warm-up")  # polars and pyarrow, the lake's manifest
    stores.milvus.list_collections()


def main() -> None:
    from kb_assets.lib.logs import quiet_libraries

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_libraries(False)
    serve(Settings.from_env())


if __name__ == "__main__":
    main()
