"""Worker processes that parse: docling's conversion of a PDF's page batches spread over processes,
so that every core parses (docling-parse and our Python around it run on one core per process).

One pool per process, started on first use with the ``spawn`` method (the process that asks has
gRPC and onnxruntime threads: forking it is unsafe), each worker building docling's converter once;
kept for the next documents and runs, shut down at exit. A broken pool (a worker killed) is dropped:
the caller converts in process and the next call starts a new pool.

Workers die with the process that started them, even when it is killed (``processes.die_with_parent``),
and record themselves in its scratch folder, so that the next ``kb-assets`` command kills any that
outlived it (``lib.scratch.clean_scratch``).
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from kb_assets.lib.processes import die_with_parent, process_token
from kb_assets.lib.scratch import workers_dir

_LOCK = threading.Lock()
_POOL: ProcessPoolExecutor | None = None
_WORKERS = 0


def _start_worker(parent_pid: int, records: str | None) -> None:
    """A worker's initializer: end with the parent, record this worker, build docling's converter."""
    die_with_parent(parent_pid)
    if records:  # what clean_scratch reads
        record = Path(records) / process_token()
        try:
            record.parent.mkdir(exist_ok=True)  # not parents: a removed scratch folder stays removed
            record.touch()
            atexit.register(record.unlink, missing_ok=True)
        except OSError:
            pass
    from kb_assets.parsing.converter import get_converter

    get_converter()


def parse_pool(workers: int) -> ProcessPoolExecutor | None:
    """The process's pool of ``workers`` parsing processes (None for fewer than 2)."""
    global _POOL, _WORKERS
    if workers < 2:
        return None
    with _LOCK:
        if _POOL is None or _WORKERS != workers:
            if _POOL is not None:
                _POOL.shutdown(wait=False, cancel_futures=True)
            records = workers_dir()
            _POOL = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(os.getpid(), str(records) if records else None),
            )
            _WORKERS = workers
        return _POOL


def drop_pool() -> None:
    """Shut the pool down (after a worker died, and at exit)."""
    global _POOL
    with _LOCK:
        if _POOL is not None:
            _POOL.shutdown(wait=False, cancel_futures=True)
            _POOL = None


atexit.register(drop_pool)
