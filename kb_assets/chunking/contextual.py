"""Contextual retrieval, optional: a short sentence that situates a text chunk within its document,
written by an OpenAI-compatible model and put before the chunk's content in its ``embedding_input``.

Configured by ``KB_CHUNK_CONTEXT_URL`` and ``KB_CHUNK_CONTEXT_MODEL`` (optionally ``_API_KEY``,
``_TIMEOUT_SECONDS`` and ``_CONCURRENCY``), the settings style of the page summarizer; off when unset.
The model reads the document title, the chunk's section and page (at most ``MAX_PAGE_CHARS``) and the
chunk, and answers one sentence (the seeds' contextual retrieval). The sentence goes between the
locating prefix and the content of ``embedding_input``, so it shapes the dense vector; ``content`` (what
readers see and BM25 indexes) is unchanged. A sentence that would push the input past the model's window
is shortened, never the content. Sentences are cached by the sha256 of the request (``chunk_contexts``),
saved as they come: an unchanged chunk on an unchanged page never costs a call again, even after a
killed run. Calls go ``KB_CHUNK_CONTEXT_CONCURRENCY`` (4) at a time once a first one has succeeded.
Best-effort (``kb_assets.lib.chat_endpoint``): after the first failure no further call is made in this run,
and the chunks left keep their plain input.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import polars as pl

from kb_assets.chunking.window import CountTokens
from kb_assets.lib.chat_endpoint import ChatEndpoint
from kb_assets.lib.text import sha256_text
from kb_assets.structure.summaries import clip

CONTEXT_KINDS = ("paragraph", "table", "code")  # text chunks; headings, figures and toc pages go as they are
CONTEXT_CHARS = 200  # a sentence is clipped to this
MIN_CONTEXT_CHARS = 40  # shorter than this to fit the window: the chunk keeps its plain input
MAX_PAGE_CHARS = 6000  # what is sent of the chunk's page
CHECKPOINT_SENTENCES = 50  # new sentences are saved at least this often while a document is contextualized
SYSTEM = (
    "You situate a passage within its document to improve search retrieval of the passage. Answer "
    "with one short sentence of at most 200 characters, in the passage's language, and nothing else."
)
USER = (
    "Document: {title}\nSection: {section}\nPage {page}:\n<page>\n{page_text}\n</page>\n"
    "The passage, from that page:\n<passage>\n{content}\n</passage>\n"
    "Give the short context that situates this passage within the document."
)


@dataclass
class EndpointContextualizer(ChatEndpoint):
    concurrency: int = 4  # requests in flight at once (after a first one that succeeded)

    @property
    def contextualizer_id(self) -> str:
        return f"llm:{self.model}"

    def contextualize(self, request: ContextRequest) -> str | None:
        """The sentence for one chunk, or None (and ``failure`` set) when the endpoint gave none."""
        answer = self.complete(SYSTEM, request.user, max_tokens=120)
        return clip(answer, CONTEXT_CHARS) if answer else None


def contextualizer_from_settings(
    url: str, model: str, api_key: str = "", timeout_seconds: float = 30.0, concurrency: int = 4
) -> EndpointContextualizer | None:
    """The configured contextualizer, or None when ``KB_CHUNK_CONTEXT_URL``/``_MODEL`` are unset."""
    if not url or not model:
        return None
    return EndpointContextualizer(
        url=url, model=model, api_key=api_key, timeout_seconds=timeout_seconds, concurrency=concurrency
    )


@dataclass(frozen=True)
class ContextRequest:
    row: int  # of the chunks frame
    user: str  # the request's user message (the system message is ``SYSTEM``)
    sha: str  # the cache key: the sha256 of everything the model is sent


def context_requests(chunks: pl.DataFrame, page_texts: dict[int, str]) -> list[ContextRequest]:
    """A request for each text chunk of a document's chunk rows (``page_texts``: page_index -> text)."""
    out = []
    for row, chunk in enumerate(chunks.iter_rows(named=True)):
        if chunk["kind"] not in CONTEXT_KINDS:
            continue
        page = chunk["page_label"] or str(chunk["page_index"] + 1)
        user = USER.format(
            title=chunk["document_title"],
            section=chunk["section_title"] or "(none)",
            page=page,
            page_text=page_texts.get(chunk["page_index"], "")[:MAX_PAGE_CHARS],
            content=chunk["content"],
        )
        out.append(ContextRequest(row, user, sha256_text(f"{SYSTEM}\n{user}")))
    return out


@dataclass
class ChunkContexts:
    chunks: pl.DataFrame  # the rows, text chunks' inputs with their sentence
    new_cache: dict[str, str] = field(default_factory=dict)  # request sha -> sentence written in this call
    from_cache: int = 0
    too_long: int = 0  # no sentence fitted the window beside the chunk
    left_plain: int = 0  # after a failure of the endpoint
    warnings: list[str] = field(default_factory=list)


def add_chunk_contexts(
    chunks: pl.DataFrame,
    requests: list[ContextRequest],
    cached: dict[str, str],
    contextualizer: EndpointContextualizer,
    count_tokens: CountTokens,
    max_tokens: int,
    checkpoint: Callable[[dict[str, str]], None] = lambda sentences: None,
) -> ChunkContexts:
    """The chunk rows with a situating sentence in each text chunk's ``embedding_input`` (and its sha):
    from ``cached`` (request sha -> sentence) or the endpoint, shortened to fit ``max_tokens``. New
    sentences go to ``checkpoint`` as they come, ``CHECKPOINT_SENTENCES`` at a time and the rest at the
    end, so a run killed half-way through a long document keeps them."""
    result = ChunkContexts(chunks)
    result.new_cache = _ask(contextualizer, [r for r in requests if r.sha not in cached], checkpoint)
    inputs = chunks["embedding_input"].to_list()
    contextual: dict[int, tuple[str, str, str]] = {}  # row -> (prefix, sentence, content)
    for request in requests:
        result.from_cache += request.sha in cached
        sentence = cached.get(request.sha) or result.new_cache.get(request.sha)
        if not sentence:
            result.left_plain += 1
            continue
        prefix, _, content = inputs[request.row].partition("\n")
        contextual[request.row] = (prefix, sentence, content)
    fitted = _fitted(contextual, count_tokens, max_tokens)
    for row, text in fitted.items():
        inputs[row] = text
    result.too_long = len(contextual) - len(fitted)
    result.chunks = chunks.with_columns(
        pl.Series("embedding_input", inputs), pl.Series("embedding_input_sha", [sha256_text(t) for t in inputs])
    )
    if contextualizer.failure:
        result.warnings.append(
            f"chunk contextualizer {contextualizer.contextualizer_id} skipped: "
            f"{contextualizer.failure}; {result.left_plain} chunks keep their plain input"
        )
    return result


def _ask(
    contextualizer: EndpointContextualizer, requests: list[ContextRequest], checkpoint: Callable[[dict[str, str]], None]
) -> dict[str, str]:
    """Request sha -> sentence, for the distinct requests: the first is asked alone (an endpoint that
    fails costs one call), the rest ``contextualizer.concurrency`` at a time until one fails."""
    distinct = list({request.sha: request for request in requests}.values())
    written: dict[str, str] = {}
    unsaved: dict[str, str] = {}

    def ask(request: ContextRequest) -> tuple[str, str | None]:
        return request.sha, contextualizer.contextualize(request) if contextualizer.failure is None else None

    def keep(answers) -> None:
        for sha, sentence in answers:
            if sentence:
                written[sha] = unsaved[sha] = sentence
            if len(unsaved) >= CHECKPOINT_SENTENCES:
                checkpoint(dict(unsaved))
                unsaved.clear()

    keep(map(ask, distinct[:1]))
    if len(distinct) > 1 and contextualizer.failure is None:
        with ThreadPoolExecutor(max(1, contextualizer.concurrency)) as pool:
            keep(pool.map(ask, distinct[1:]))
    if unsaved:
        checkpoint(unsaved)
    return written


def _fitted(contextual: dict[int, tuple[str, str, str]], count_tokens: CountTokens, max_tokens: int) -> dict[int, str]:
    """row -> prefix, sentence and content, the sentence halved until the input fits the window."""
    out: dict[int, str] = {}
    pending = dict(contextual)
    while pending:
        rows = list(pending)
        texts = [f"{prefix}\n{sentence}\n{content}" for prefix, sentence, content in pending.values()]
        shorter = {}
        for row, text, tokens in zip(rows, texts, count_tokens(texts), strict=False):
            prefix, sentence, content = pending[row]
            if tokens <= max_tokens:
                out[row] = text
            elif len(sentence) // 2 >= MIN_CONTEXT_CHARS:
                shorter[row] = (prefix, clip(sentence, len(sentence) // 2), content)
        pending = shorter
    return out
