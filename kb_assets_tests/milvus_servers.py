"""Milvus servers for the tests of the server profile: Milvus Lite 3.2.2 served on a folder (what kb-assets
embedded before the C++ engine; it answers the Milvus server API: aliases, collection properties, partition
keys), reached through ``KB_MILVUS_URI`` as a Milvus standalone or distributed server would be."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from kb_assets.services.local import free_port, log_tail


@contextlib.contextmanager
def lite3_server(data: Path, port: int | None = None) -> Iterator[subprocess.Popen]:
    """``python -m kb_assets.services.milvus_lite_server`` on ``data`` (its ``uri`` attribute set) until the
    block ends (SIGTERM, then SIGKILL)."""
    from kb_assets.services import milvus_client

    port = port or free_port()
    data.mkdir(parents=True, exist_ok=True)
    log = data.parent / f"{data.name}.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kb_assets.services.milvus_lite_server", "--data-dir", str(data)]
            + ["--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    process.uri = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                client = milvus_client(process.uri, timeout=5)  # type: ignore[attr-defined]
                client.list_collections()
                client.close()
                break
            except Exception:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("Milvus Lite 3.2.2 did not start" + log_tail(log)) from None
                time.sleep(0.2)
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
