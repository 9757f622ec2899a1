"""An optional page summarizer behind an OpenAI-compatible chat-completions endpoint.

Configured by ``KB_SUMMARIZER_URL`` (the API base or the full ``.../chat/completions`` URL),
``KB_SUMMARIZER_MODEL`` and optionally ``KB_SUMMARIZER_API_KEY`` and ``KB_SUMMARIZER_TIMEOUT_SECONDS``.
Best-effort (``kb_assets.lib.chat_endpoint``): after the first failure no further call is made in this run;
callers fall back to the rule-based summary, so a summarizer never blocks a document.
"""

from __future__ import annotations

from dataclasses import dataclass

from kb_assets.lib.chat_endpoint import ChatEndpoint

PROMPT = (
    "Summarize this page of the document {title!r} in one sentence of at most 200 characters, "
    "in the page's own language. Answer with the sentence only."
)
MAX_PAGE_CHARS = 6000  # what is sent of a page


@dataclass
class EndpointSummarizer(ChatEndpoint):
    @property
    def summarizer_id(self) -> str:
        return f"llm:{self.model}"

    def summarize(self, document_title: str, text: str) -> str | None:
        """One page's summary, or None (and ``failure`` set) when the endpoint did not give one."""
        return self.complete(PROMPT.format(title=document_title), text[:MAX_PAGE_CHARS], max_tokens=160)


def summarizer_from_settings(
    url: str, model: str, api_key: str = "", timeout_seconds: float = 10.0
) -> EndpointSummarizer | None:
    """The configured summarizer, or None when ``KB_SUMMARIZER_URL``/``KB_SUMMARIZER_MODEL`` are unset."""
    if not url or not model:
        return None
    return EndpointSummarizer(url=url, model=model, api_key=api_key, timeout_seconds=timeout_seconds)
