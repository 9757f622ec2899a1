"""The warm ingest runner's own process (``python -m kb_assets.launch.runner_process``, started by
``runner.start``): it holds the runner's lock, warms up what runs load, and takes the ingests and launched runs
that ``runner.py``'s clients hand it over its Unix socket, until ``KB_RUNNER_IDLE_SECONDS`` pass without one."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import queue
import signal
import socket
import threading
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from kb_assets.launch.runner import REQUEST_TIMEOUT_S, fingerprint, folder, socket_path
from kb_assets.settings import Settings

if TYPE_CHECKING:
    import dagster as dg

log = logging.getLogger("kb_assets.runner")


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
