"""A real uvicorn server for an app, on 127.0.0.1 in a thread (what MCP clients and the browser talk to)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def live_server(app, start_timeout_s: float = 60, header_timeout_s: float = 10.0) -> Iterator[str]:
    """The app served as ``kb-assets serve`` serves it (``service/server.py``)."""
    import uvicorn

    from kb_assets.service.server import server_config

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(server_config(app, "127.0.0.1", port, header_timeout_s, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
