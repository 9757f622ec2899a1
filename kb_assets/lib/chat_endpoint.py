"""One best-effort call to an OpenAI-compatible chat-completions endpoint.

Shared by the optional page summarizer (``structure/endpoint.py``) and the optional chunk
contextualizer (``chunking/contextual.py``). ``url`` is the API base (``http://127.0.0.1:8080/v1``)
or the full ``.../chat/completions`` URL. The first failure (HTTP error, timeout, unreadable or empty
answer) is recorded in ``failure`` and no further call is made by this object, so a slow or broken
endpoint costs one timeout a run, never a document.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass


@dataclass
class ChatEndpoint:
    url: str
    model: str
    api_key: str = ""
    timeout_seconds: float = 10.0
    failure: str | None = None

    @property
    def endpoint(self) -> str:
        base = self.url.rstrip("/")
        return base if base.endswith("/chat/completions") else f"{base}/chat/completions"

    def complete(self, system: str, user: str, max_tokens: int) -> str | None:
        """The answer's text on one line, or None (and ``failure`` set) when there is none."""
        if self.failure is not None:
            return None
        body = json.dumps(
            {
                "model": self.model,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                "temperature": 0,
                "max_tokens": max_tokens,
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.endpoint, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_seconds) as response:
                answer = json.loads(response.read().decode("utf-8"))
            text = " ".join(str(answer["choices"][0]["message"]["content"]).split())
        except urllib.error.HTTPError as error:
            self.failure = f"{self.endpoint} answered HTTP {error.code}"
            return None
        except (urllib.error.URLError, TimeoutError, OSError) as error:
            self.failure = f"{self.endpoint} unreachable ({error})"
            return None
        except (ValueError, KeyError, IndexError, TypeError) as error:
            self.failure = f"{self.endpoint} gave no answer ({type(error).__name__}: {error})"
            return None
        if not text:
            self.failure = f"{self.endpoint} gave an empty answer"
            return None
        return text
