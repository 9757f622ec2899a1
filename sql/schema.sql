-- kb-assets source of record. Applied by the code at start-up; every statement is idempotent.

CREATE TABLE IF NOT EXISTS documents (
    document_id        text PRIMARY KEY,
    knowledge_base_id  text NOT NULL,
    source_path        text NOT NULL,          -- relative to its source root
    source_uri         text NOT NULL,          -- full path or URI
    title              text,
    version            text,                   -- sha256 of the bytes
    size_bytes         bigint,
    mime               text,
    source_kind        text,
    object_key         text,                   -- original bytes in the object store
    status             text NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'published', 'failed', 'deleted')),
    error              text,
    page_count         integer,
    chunk_count        integer,
    published_version  text,                   -- version whose chunks are in the published collection
    collection_name    text,
    last_run_id        text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS documents_kb_status ON documents (knowledge_base_id, status);

CREATE TABLE IF NOT EXISTS pages (
    document_id  text NOT NULL REFERENCES documents (document_id) ON DELETE CASCADE,
    version      text NOT NULL,
    page_index   integer NOT NULL,             -- 0-based; people see page_index + 1
    page_label   text,                         -- printed label when the PDF has one
    text         text NOT NULL,
    blocks       jsonb NOT NULL,               -- parsed blocks: kind, text, level, rows
    summary      text,
    keywords     text[],
    parser       text NOT NULL,
    mode         text NOT NULL,
    image_key    text,
    run_id       text,
    PRIMARY KEY (document_id, page_index)
);

CREATE TABLE IF NOT EXISTS pageindex_nodes (
    document_id  text NOT NULL REFERENCES documents (document_id) ON DELETE CASCADE,
    node_id      text NOT NULL,
    parent_id    text,
    ordinal      integer NOT NULL,             -- document order
    title        text NOT NULL,
    depth        integer NOT NULL,             -- 0 = root
    start_page   integer NOT NULL,
    end_page     integer NOT NULL,
    summary      text,
    keywords     text[],
    version      text NOT NULL,
    run_id       text,
    PRIMARY KEY (document_id, node_id)
);

CREATE TABLE IF NOT EXISTS collection_versions (
    name            text PRIMARY KEY,
    alias           text NOT NULL,
    schema_version  integer NOT NULL,
    model           text NOT NULL,
    dimension       integer NOT NULL,
    languages       text[] NOT NULL,
    state           text NOT NULL CHECK (state IN ('building', 'published', 'retired', 'failed')),
    entity_count    bigint,
    created_at      timestamptz NOT NULL DEFAULT now(),
    published_at    timestamptz
);

-- PageIndex structure (pageindex_trees): navigation pages (tables of contents, lists of tables,
-- indexes) are marked so search can demote them; text_sha is the sha256 of the page text that the
-- page's summary was made from.
ALTER TABLE pages ADD COLUMN IF NOT EXISTS is_toc boolean NOT NULL DEFAULT false;
ALTER TABLE pages ADD COLUMN IF NOT EXISTS text_sha text;

-- Page summary bodies by page-text hash and summarizer ("rules-v1", "llm:<model>"): an unchanged
-- page text is never summarized again, in any document.
CREATE TABLE IF NOT EXISTS page_summaries (
    text_sha    text NOT NULL,
    summarizer  text NOT NULL,
    summary     text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (text_sha, summarizer)
);

-- Situating sentences of the optional chunk contextualizer ("llm:<model>"), by the sha256 of the
-- request it was sent (document title, section, page text and chunk): an unchanged chunk on an
-- unchanged page is never sent again.
CREATE TABLE IF NOT EXISTS chunk_contexts (
    request_sha     text NOT NULL,
    contextualizer  text NOT NULL,
    context         text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (request_sha, contextualizer)
);

-- Sources in object storage: the ETag an s3:// object had when its bytes hashed to ``version``. A scan
-- that lists the same ETag for a published document of that version does not download it again.
CREATE TABLE IF NOT EXISTS source_etags (
    document_id  text PRIMARY KEY REFERENCES documents (document_id) ON DELETE CASCADE,
    etag         text NOT NULL,
    version      text NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- Page geometry (issue 14): the page's size in the units of its blocks' boxes (PDF points, or pixels
-- of an image file); NULL for formats without page geometry. Chunks' regions (lake) use the same units.
ALTER TABLE pages ADD COLUMN IF NOT EXISTS width double precision;
ALTER TABLE pages ADD COLUMN IF NOT EXISTS height double precision;

-- Pipeline versions (kb_assets/versions.py): each output records the version of the step that wrote
-- it (rows written before versions were recorded count as version 1); per document, step_versions is
-- the index the planner reads (step -> the version whose output is current), and failed_step names the
-- step and version a failed document failed at ("chunks@2").
ALTER TABLE pages ADD COLUMN IF NOT EXISTS pipeline_version text NOT NULL DEFAULT '1';
ALTER TABLE pageindex_nodes ADD COLUMN IF NOT EXISTS pipeline_version text NOT NULL DEFAULT '1';
ALTER TABLE documents ADD COLUMN IF NOT EXISTS step_versions jsonb NOT NULL DEFAULT '{}';
ALTER TABLE documents ADD COLUMN IF NOT EXISTS failed_step text;

-- Hash-bucket partitions (KB_PARTITIONING=buckets:N): a bucket's run works on the bucket's pending
-- documents and on those it wrote last.
CREATE INDEX IF NOT EXISTS documents_pending ON documents (document_id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS documents_last_run ON documents (last_run_id);

-- BM25 statistics of what serves (kb_assets/lexical.py), replaced in the transaction that publishes a
-- document: the term counts of every chunk of its published version, how many of those chunks hold each
-- term, and (``term_count``) the sum of the chunks' lengths (NULL: no statistics kept, e.g. published
-- before they were). Search scores its candidates' BM25 from these, per knowledge base.
CREATE TABLE IF NOT EXISTS chunk_terms (
    chunk_id      text PRIMARY KEY,
    document_id   text NOT NULL REFERENCES documents (document_id) ON DELETE CASCADE,
    chunk_length  integer NOT NULL,            -- the chunk's length in terms
    terms         text[] NOT NULL,             -- its distinct terms ...
    counts        integer[] NOT NULL           -- ... and the occurrences of each
);
CREATE INDEX IF NOT EXISTS chunk_terms_document ON chunk_terms (document_id);
-- Each chunk's pages (its first and last page_index), so pageindex reads the located pages' candidates
-- here instead of a filtered BM25 search over the collection; NULL for rows kept before (search falls back
-- to Milvus for those documents; ``kb-assets verify --repair`` or the next publish fills them).
ALTER TABLE chunk_terms ADD COLUMN IF NOT EXISTS page_index integer;
ALTER TABLE chunk_terms ADD COLUMN IF NOT EXISTS page_end integer;
CREATE INDEX IF NOT EXISTS chunk_terms_pages ON chunk_terms (document_id, page_index);
-- BM25 document frequencies per knowledge base (stores/catalog/terms.py): how many of the chunks that serve
-- hold each term, changed by each publish and deletion. It replaces document_terms (a row per document and
-- term: ~17 KB a one-page note), counted once from chunk_terms when that table is found.
CREATE TABLE IF NOT EXISTS knowledge_base_terms (
    knowledge_base_id  text NOT NULL,
    term               text NOT NULL,
    chunks             integer NOT NULL,
    PRIMARY KEY (knowledge_base_id, term)
);
DO $$
BEGIN
    IF to_regclass('document_terms') IS NOT NULL THEN
        DELETE FROM knowledge_base_terms;
        INSERT INTO knowledge_base_terms (knowledge_base_id, term, chunks)
            SELECT d.knowledge_base_id, t.term, count(*) FROM chunk_terms c JOIN documents d USING (document_id),
                unnest(c.terms) AS t(term) GROUP BY 1, 2;
        DROP TABLE document_terms;
    END IF;
END $$;
ALTER TABLE documents ADD COLUMN IF NOT EXISTS term_count bigint;

-- Document identity (issue 30): a document is (knowledge base, source root, path under that root). The
-- root is the canonical folder (resolved real path) or s3://bucket/prefix that was ingested; purges touch
-- only the root that was scanned. Rows made before roots were recorded get theirs from source_uri minus
-- source_path, once. partition_key is the document's readable Dagster partition key (kb_assets/identity.py),
-- assigned once and never changed (a relocated root keeps its documents' keys).
ALTER TABLE documents ADD COLUMN IF NOT EXISTS source_root text;
UPDATE documents SET source_root = CASE
        WHEN right(source_uri, length(source_path) + 1) = '/' || source_path
        THEN left(source_uri, length(source_uri) - length(source_path) - 1)
        ELSE source_uri END
    WHERE source_root IS NULL;
ALTER TABLE documents ALTER COLUMN source_root SET NOT NULL;
ALTER TABLE documents DROP CONSTRAINT IF EXISTS documents_knowledge_base_id_source_path_key;
CREATE UNIQUE INDEX IF NOT EXISTS documents_identity ON documents (knowledge_base_id, source_root, source_path);
ALTER TABLE documents ADD COLUMN IF NOT EXISTS partition_key text;
CREATE UNIQUE INDEX IF NOT EXISTS documents_partition_key ON documents (partition_key);
-- What ingests and sensor ticks ask first (documents whose partition key is not yet readable): none after
-- the one-time migration, answered from this index instead of a scan of every document.
CREATE INDEX IF NOT EXISTS documents_without_partition_key ON documents (document_id) WHERE partition_key IS NULL;

-- The run that last wrote a document's entities into the collection (some written or deleted): what lineage
-- credits for milvus_collection (last_run_id is any run that touched the document, one that wrote nothing too).
ALTER TABLE documents ADD COLUMN IF NOT EXISTS published_run_id text;

-- Document metadata (issue 32), read from content at pageindex_trees (kb_assets/structure/metadata.py):
-- {"title", "organisation", "kind", "form", "period": {"label", "fiscal_year", "fiscal_quarter", "end"},
-- "date", "confidence": {field: 0-1}}. Search reads it to filter (period, kind, organisation) and to
-- follow a question that names an organisation or a period.
ALTER TABLE documents ADD COLUMN IF NOT EXISTS metadata jsonb;

-- Locating pages (CatalogSearchReads.locate_pages) reads only the pages and PageIndex nodes that share a
-- word with the query: trigram indexes answer its ILIKE '%term%' on summaries and titles, GIN indexes its
-- keyword overlap. Without them (no pg_trgm: a DSN whose role may not create it) the same query scans.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'pg_trgm not available (%): locating pages scans them', SQLERRM;
END
$$;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        CREATE INDEX IF NOT EXISTS pages_summary_trigrams ON pages USING gin (summary gin_trgm_ops);
        CREATE INDEX IF NOT EXISTS pageindex_nodes_title_trigrams ON pageindex_nodes USING gin (title gin_trgm_ops);
    END IF;
END
$$;
CREATE INDEX IF NOT EXISTS pages_keywords ON pages USING gin (keywords);
CREATE INDEX IF NOT EXISTS pageindex_nodes_keywords ON pageindex_nodes USING gin (keywords);
