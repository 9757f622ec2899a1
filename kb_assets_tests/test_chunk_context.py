"""The optional chunk contextualizer: a situating sentence from an OpenAI-compatible endpoint goes into
text chunks' embedding inputs (never into their content), cached by request and saved as they come, asked
several at once, shortened to fit the model's window, and best-effort (a failure leaves the chunks as they
are). Against a real local HTTP server and the embedding model's own tokenizer; the pipeline side is in
test_versions.py."""

from __future__ import annotations

import polars as pl

from kb_assets.chunking.chunker import chunk_document
from kb_assets.chunking.contextual import (
    CHECKPOINT_SENTENCES,
    CONTEXT_KINDS,
    EndpointContextualizer,
    add_chunk_contexts,
    context_requests,
)
from kb_assets.lib.text import sha256_text
from kb_assets_tests.chat_server import ChatServer, chat_answer
from kb_assets_tests.test_chunking import DOC, MAX_TOKENS, count_tokens, page, table, text

SENTENCE = "From the backup chapter of the Operations Manual, on how long snapshots are kept."
PAGES = [
    page(
        0,
        [
            text("heading", "Backups", level=1),
            text(
                "paragraph",
                "Snapshots are taken every night at 02:00 and kept for thirty-five days. "
                "Restored copies stay in the warm tier for seven days before they expire.",
            ),
            table([["Tier", "Retention"], ["hot", "7 days"], ["warm", "35 days"], ["cold", "1 year"]]),
            text("figure", "Figure 1: Snapshot tiers from hot to cold storage"),
        ],
    ),
    page(
        1,
        [
            text(
                "paragraph",
                "Ask the storage team before you change a retention period; the change "
                "applies to snapshots taken after it, never to older ones.",
            )
        ],
    ),
]


def plain_chunks(pages=PAGES) -> pl.DataFrame:
    return chunk_document(pages, DOC, count_tokens, MAX_TOKENS)


def page_texts(pages=PAGES) -> dict[int, str]:
    return {p["page_index"]: p["text"] for p in pages}


def contextualize(
    server: ChatServer,
    chunks: pl.DataFrame,
    cached: dict[str, str] | None = None,
    pages=PAGES,
    max_tokens: int = MAX_TOKENS,
    checkpoint=lambda sentences: None,
):
    contextualizer = EndpointContextualizer(url=server.url, model="tiny", api_key="secret", timeout_seconds=5)
    requests = context_requests(chunks, page_texts(pages))
    return requests, add_chunk_contexts(
        chunks, requests, cached or {}, contextualizer, count_tokens, max_tokens, checkpoint
    )


def test_text_chunks_get_the_sentence_between_prefix_and_content_and_other_chunks_stay_as_they_are():
    plain = plain_chunks()
    with ChatServer(200, chat_answer(f"  {SENTENCE}\n")) as server:
        requests, result = contextualize(server, plain)

    kinds = plain["kind"].to_list()
    assert {"figure", "paragraph", "table"} <= set(kinds)
    assert len(server.requests) == len(requests) == sum(kind in CONTEXT_KINDS for kind in kinds)
    for before, after in zip(plain.iter_rows(named=True), result.chunks.iter_rows(named=True), strict=False):
        if before["kind"] not in CONTEXT_KINDS:
            assert after == before
            continue
        prefix, _, content = before["embedding_input"].partition("\n")
        assert after["embedding_input"] == f"{prefix}\n{SENTENCE}\n{content}"
        assert after["embedding_input_sha"] == sha256_text(after["embedding_input"])
        assert {k: v for k, v in after.items() if not k.startswith("embedding_input")} == {
            k: v for k, v in before.items() if not k.startswith("embedding_input")
        }  # content, id, lineage kept
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer secret"
    user = sent["body"]["messages"][1]["content"]
    assert "Operations Manual" in user and "Backups" in user and PAGES[0]["text"] in user
    assert result.new_cache == {r.sha: SENTENCE for r in requests} and result.warnings == []


def test_cached_sentences_cost_no_call_and_only_a_changed_chunk_is_sent_again():
    with ChatServer(200, chat_answer(SENTENCE)) as server:
        _, first = contextualize(server, plain_chunks())
        calls = len(server.requests)
        _, again = contextualize(server, plain_chunks(), first.new_cache)
        assert len(server.requests) == calls and again.new_cache == {} and again.chunks.equals(first.chunks)

        changed = [
            PAGES[0],
            page(
                1,
                [
                    text(
                        "paragraph",
                        "Ask the storage team before you shorten a retention period; older snapshots keep theirs.",
                    )
                ],
            ),
        ]
        _, edited = contextualize(server, plain_chunks(changed), first.new_cache, changed)
    assert len(server.requests) == calls + 1  # the one chunk on the changed page
    assert server.requests[-1]["body"]["messages"][1]["content"].count("older snapshots keep theirs") == 2
    assert len(edited.new_cache) == 1 and edited.from_cache == calls - 1


def test_a_failing_endpoint_is_called_once_and_leaves_every_chunk_plain():
    plain = plain_chunks()
    with ChatServer(500) as server:
        requests, result = contextualize(server, plain)

    assert len(server.requests) == 1  # the first failure stops further calls
    assert result.chunks.equals(plain)
    assert result.left_plain == len(requests) and result.new_cache == {}
    assert "HTTP 500" in result.warnings[0] and f"{len(requests)} chunks keep their plain input" in result.warnings[0]


def test_a_sentence_too_long_for_the_window_is_shortened_and_the_content_never_is():
    plain = plain_chunks()
    longest = max(count_tokens(plain["embedding_input"].to_list()))
    long_sentence = (
        "This passage belongs to the backup and retention chapter of the operations manual and "
        "describes snapshot schedules, retention tiers and who may change them in production."
    )
    with ChatServer(200, chat_answer(long_sentence)) as server:
        _, roomy = contextualize(server, plain, max_tokens=MAX_TOKENS)
        _, tight = contextualize(server, plain, max_tokens=longest + 12)
        _, full = contextualize(server, plain, max_tokens=longest)

    for result, limit in ((roomy, MAX_TOKENS), (tight, longest + 12), (full, longest)):
        assert max(count_tokens(result.chunks["embedding_input"].to_list())) <= limit
        assert result.chunks["content"].equals(plain["content"])
    texts = [row for row in tight.chunks.iter_rows(named=True) if row["kind"] in CONTEXT_KINDS]
    assert any(
        long_sentence not in row["embedding_input"] and long_sentence.split()[0] in row["embedding_input"]
        for row in texts
    )  # shortened, not dropped
    assert all(row["embedding_input"].endswith(row["content"]) for row in texts)
    assert all(
        long_sentence in row["embedding_input"]
        for row in roomy.chunks.iter_rows(named=True)
        if row["kind"] in CONTEXT_KINDS
    )
    longest_rows = [
        row
        for row in full.chunks.iter_rows(named=True)
        if count_tokens([plain["embedding_input"][row["chunk_index"]]])[0] == longest
    ]
    assert full.too_long >= 1 and all(
        row["embedding_input"] == plain["embedding_input"][row["chunk_index"]] for row in longest_rows
    )  # no room at all: the input stays plain


def test_sentences_are_asked_several_at_once_after_a_first_one_and_saved_as_they_come():
    pages = [
        page(
            i,
            [
                text(
                    "paragraph",
                    f"Replica {i} of the archive is checked every {i + 2} hours by the "
                    f"integrity job, which reports to the storage team on failure.",
                )
            ],
        )
        for i in range(60)
    ]
    plain, saved = plain_chunks(pages), []
    with ChatServer(200, lambda body: chat_answer("About replica checks."), delay_seconds=0.05) as server:
        requests, first = contextualize(server, plain, pages=pages, checkpoint=saved.append)
        resumed_from = dict(saved[0])
        _, resumed = contextualize(server, plain, cached=resumed_from, pages=pages)

    assert len(requests) == 60 and len(first.new_cache) == 60
    assert server.requests[1]["started"] >= server.requests[0]["ended"]  # the first request goes alone
    assert 2 <= server.most_at_once <= 4  # then KB_CHUNK_CONTEXT_CONCURRENCY
    assert [len(batch) for batch in saved] == [CHECKPOINT_SENTENCES, 60 - CHECKPOINT_SENTENCES]  # as they come
    assert len(server.requests) == 60 + 60 - CHECKPOINT_SENTENCES  # a resumed run asks only the rest
    assert resumed.chunks.equals(first.chunks) and resumed.from_cache == CHECKPOINT_SENTENCES
