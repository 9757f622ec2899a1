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
import queue
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
from typing import TYPE_CHECKING

from kb_assets.lib.json_types import JsonObject
from kb_assets.pipeline.progress import DocumentsDone
from kb_assets.settings import Settings
from kb_assets.settings.declare import values_of

if TYPE_CHECKING:
    import dagster as dg

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
    """Hold the lock, warm up, and take ingests and launched runs until ``runner_idle_seconds`` pass
    without one."""
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance

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
    instance = dagster_instance(settings)  # the launched runs': one for the process
    path = socket_path(settings)
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    busy, stopping = threading.Lock(), threading.Event()
    launched: queue.Queue[str] = queue.Queue()  # run ids the run launcher handed over, executed in order
    last = [time.monotonic()]

    def working() -> bool:
        return busy.locked() or launched.unfinished_tasks > 0

    def on_term(*_) -> None:  # stop taking work; what is under way or was accepted finishes first
        stopping.set()
        if not working():
            path.unlink(missing_ok=True)
            os._exit(0)

    def execute_launched() -> None:
        while True:
            run_id = launched.get()
            with busy:  # after an ingest under way
                try:
                    execute_run(settings, instance, run_id)
                except Exception:  # the run's failure is the run's (execute_run reports it); go on
                    log.exception("launched run %s", run_id)
                finally:
                    last[0] = time.monotonic()
                    launched.task_done()

    signal.signal(signal.SIGTERM, on_term)
    threading.Thread(target=execute_launched, name="kb-runner-runs", daemon=True).start()
    log.warning("ingest runner %s ready for %s", os.getpid(), settings.home)
    server.settimeout(1.0)
    try:
        while not stopping.is_set() and (time.monotonic() - last[0] < settings.runner_idle_seconds or working()):
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            take(client, settings, instance, mine, ingest, stopping, busy, launched, last)
        while working():  # stopping: let the ingest under way and the accepted runs finish
            time.sleep(0.2)
    finally:
        path.unlink(missing_ok=True)
        log.warning("ingest runner %s exits", os.getpid())


def take(
    client: socket.socket,
    settings: Settings,
    instance: dg.DagsterInstance,
    mine: str,
    ingest,
    stopping: threading.Event,
    busy: threading.Lock,
    launched: queue.Queue[str],
    last: list[float],
) -> None:
    """Answer one connection: a launched run is taken when nothing runs here (tagged with this process at
    once, so that the next command fails it if this process is killed before it ran), else the launcher
    launches it the default way; an ingest runs in a thread of its own when nothing else runs, else the
    command ingests itself."""
    try:
        client.settimeout(REQUEST_TIMEOUT_S)
        request = json.loads(client.makefile("rb").readline() or b"{}")
        client.settimeout(None)
    except (OSError, ValueError):
        client.close()
        return
    if request.get("fingerprint") != mine:  # a command with other settings or newer code: it ingests itself
        answer(client, {"stale": True})
        client.close()
        stopping.set()  # and starts a runner for its settings, which this one makes way for
        return
    if "runId" in request:  # taken when idle: runs launched together keep their own processes, side by side
        if stopping.is_set() or busy.locked() or launched.unfinished_tasks:
            answer(client, {"busy": True})
        else:
            claim_run(instance, request["runId"])
            launched.put(request["runId"])
            answer(client, {"accepted": True})
        client.close()
        return
    if launched.unfinished_tasks or not busy.acquire(blocking=False):  # runs first: the command ingests itself
        answer(client, {"busy": True})
        client.close()
        return

    def handle() -> None:
        try:
            serve_one(client, request, settings, ingest)
        finally:
            client.close()
            last[0] = time.monotonic()
            busy.release()

    threading.Thread(target=handle, name="kb-runner-ingest", daemon=True).start()


def serve_one(client: socket.socket, request: dict, settings: Settings, ingest) -> None:
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


def claim_run(instance: dg.DagsterInstance, run_id: str) -> None:
    """Tag a launched run with this process (``kb/process``): if it is killed before the run finished, the
    next command marks the run failed (``instance.fail_abandoned_runs``)."""
    from kb_assets.launch.instance import PROCESS_TAG
    from kb_assets.lib.processes import process_token

    instance.add_run_tags(run_id, {PROCESS_TAG: process_token()})


def execute_run(settings: Settings, instance: dg.DagsterInstance, run_id: str) -> None:
    """Execute a launched run here, on the definitions this process holds loaded (``launch/instance.py``)."""
    from kb_assets.defs.dagster_internals import execute_existing_run
    from kb_assets.launch.instance import definitions

    run = instance.get_run_by_id(run_id)
    if run is None or run.is_finished:  # deleted or canceled meanwhile
        return
    try:
        execute_existing_run(definitions(settings).resolve_job_def(run.job_name), run, instance)
    except Exception as error:  # before the run began (a job this process does not hold): said on the run
        run = instance.get_run_by_id(run_id)
        if run is not None and not run.is_finished:
            instance.report_run_failed(run, f"the warm ingest runner could not execute this run: {error}")
        raise


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

    for job in ("ingest_documents", "__ASSET_JOB"):  # the CLI's and sensors' runs; the UI's Materialize
        definitions(settings).resolve_job_def(job)
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
