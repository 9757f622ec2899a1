"""A real local HTTP server answering OpenAI-style chat completions, for the optional model endpoints
(page summarizer, chunk contextualizer)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chat_answer(text: str) -> dict:
    return {"choices": [{"message": {"content": text}}]}


class ChatServer:
    """Answers every POST with ``status`` and ``answer`` (a body, or a function of the request's body),
    after ``delay_seconds``; records each request's path, Authorization header, body and start and end
    times in ``requests``, and the most requests it was answering at once in ``most_at_once``."""

    def __init__(self, status: int, answer: dict | Callable[[dict], dict] | None = None, delay_seconds: float = 0.0):
        outer = self
        self.requests: list[dict] = []
        self.most_at_once = 0
        in_flight = []
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                record = {
                    "path": self.path,
                    "auth": self.headers.get("Authorization"),
                    "body": body,
                    "started": time.monotonic(),
                }
                with lock:
                    outer.requests.append(record)
                    in_flight.append(record)
                    outer.most_at_once = max(outer.most_at_once, len(in_flight))
                time.sleep(delay_seconds)
                with lock:
                    in_flight.remove(record)
                record["ended"] = time.monotonic()
                reply = answer(body) if callable(answer) else answer
                payload = json.dumps(reply or {"error": "boom"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
