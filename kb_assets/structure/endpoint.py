"""An optional page summarizer behind an OpenAI-compatible chat-completions endpoint.

Configured by ``KB_SUMMARIZER_URL`` (the API base, e.g. ``http://127.0.0.1:8080/v1``, or the full
``.../chat/completions`` URL), ``KB_SUMMARIZER_MODEL`` and optionally ``KB_SUMMARIZER_API_KEY`` and
``KB_SUMMARIZER_TIMEOUT_SECONDS``. Best-effort: the first failure (HTTP error, timeout, unreadable
answer) is recorded in ``failure`` and no further call is made in this run; callers fall back to the
rule-based summary, so a summarizer never blocks a document.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass

PROMPT = ("Summarize this page of the document {title!r} in one sentence of at most 200 characters, "
          "in the page's own language. Answer with the sentence only.")
MAX_PAGE_CHARS = 6000   # what is sent of a page


@dataclass
class EndpointSummarizer:
    url: str
    model: str
    api_key: str = ""
    timeout_seconds: float = 10.0
    failure: str | None = None

    @property
    def summarizer_id(self) -> str:
        return f"llm:{self.model}"

    @property
    def endpoint(self) -> str:
        base = self.url.rstrip("/")
        return base if base.endswith("/chat/completions") else f"{base}/chat/completions"

    def summarize(self, document_title: str, text: str) -> str | None:
        """One page's summary, or None (and ``failure`` set) when the endpoint did not give one."""
        if self.failure is not None:
            return None
        body = json.dumps({
            "model": self.model,
            "messages": [{"role": "system", "content": PROMPT.format(title=document_title)},
                         {"role": "user", "content": text[:MAX_PAGE_CHARS]}],
            "temperature": 0,
            "max_tokens": 160,
        }).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.endpoint, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_seconds) as response:
                answer = json.loads(response.read().decode("utf-8"))
            summary = " ".join(str(answer["choices"][0]["message"]["content"]).split())
        except urllib.error.HTTPError as error:
            self.failure = f"{self.endpoint} answered HTTP {error.code}"
            return None
        except (urllib.error.URLError, TimeoutError, OSError) as error:
            self.failure = f"{self.endpoint} unreachable ({error})"
            return None
        except (ValueError, KeyError, IndexError, TypeError) as error:
            self.failure = f"{self.endpoint} gave no summary ({type(error).__name__}: {error})"
            return None
        if not summary:
            self.failure = f"{self.endpoint} gave an empty summary"
            return None
        return summary


def summarizer_from_settings(url: str, model: str, api_key: str = "",
                             timeout_seconds: float = 10.0) -> EndpointSummarizer | None:
    """The configured summarizer, or None when ``KB_SUMMARIZER_URL``/``KB_SUMMARIZER_MODEL`` are unset."""
    if not url or not model:
        return None
    return EndpointSummarizer(url=url, model=model, api_key=api_key, timeout_seconds=timeout_seconds)
