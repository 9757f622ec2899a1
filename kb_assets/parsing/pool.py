"""Worker processes that parse: docling's conversion of a PDF's page batches spread over processes,
so that every core parses (docling-parse and our Python around it run on one core per process).

One pool per process, started on first use with the ``spawn`` method (the process that asks has
gRPC and onnxruntime threads: forking it is unsafe), each worker building docling's converter once;
kept for the next documents and runs, shut down at exit. A broken pool (a worker killed) is dropped:
the caller converts in process and the next call starts a new pool.
"""

from __future__ import annotations

import atexit
import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor

_LOCK = threading.Lock()
_POOL: ProcessPoolExecutor | None = None
_WORKERS = 0


def _warm_up() -> None:
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
            _POOL = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_warm_up)
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
