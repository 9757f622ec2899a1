"""A real local HTTP server answering OpenAI-style chat completions, for the optional model endpoints
(page summarizer, chunk contextualizer)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chat_answer(text: str) -> dict:
    return {"choices": [{"message": {"content": text}}]}


class ChatServer:
    """Answers every POST with ``status`` and ``answer`` (a body, or a function of the request's body);
    records each request's path, Authorization header and body in ``requests``."""

    def __init__(self, status: int, answer: dict | Callable[[dict], dict] | None = None):
        outer = self
        self.requests: list[dict] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
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
