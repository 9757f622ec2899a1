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
-- The most pages one of a document's kept chunks spans past its first (page_end - page_index; NULL: none kept
-- with pages), so the chunks touching page p are those starting in [p - chunk_span, p]: one range of the index
-- above, not every chunk before p (issue 51). Set with the chunk rows; a catalog made before is counted once.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = 'documents' AND column_name = 'chunk_span')
    THEN
        ALTER TABLE documents ADD COLUMN chunk_span integer;
        UPDATE documents d SET chunk_span = s.span FROM (
            SELECT document_id, max(page_end - page_index) AS span FROM chunk_terms WHERE page_index IS NOT NULL GROUP BY 1
        ) s WHERE d.document_id = s.document_id;
    END IF;
END
$$;
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

-- Locating pages (issue 51: CatalogSearchReads.locate_pages) through an inverted index instead of a filter
-- over every page: ``locate_terms`` holds, for each PageIndex node below the root and each page, the words of
-- its title or summary (``locate_tokens``: lowercased runs of [a-z0-9_.-], and each CJK character and pair of
-- characters, since Chinese has no spaces) and its keywords, with the pages they lead to. A query term matches a
-- title or summary as ILIKE '%term%' did: a Latin term through the vocabulary of tokens that contain it (a
-- substring never crosses a token), a CJK term through its characters and pairs (then checked in place). The
-- triggers below keep it with the rows it is made from, whatever writes them; a catalog made before it is
-- indexed once, when the table is created.
CREATE OR REPLACE FUNCTION locate_tokens(value text) RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT coalesce(array_agg(DISTINCT token), '{}') FROM (
        SELECT m[1] AS token FROM regexp_matches(lower(coalesce(value, '')), '([a-z0-9_.-]+)', 'g') AS m
        UNION ALL
        SELECT substr(r[1], i, 1) FROM regexp_matches(coalesce(value, ''), '([\u3400-\u9fff\uf900-\ufaff]+)', 'g') AS r,
            generate_series(1, length(r[1])) AS i
        UNION ALL
        SELECT substr(r[1], i, 2) FROM regexp_matches(coalesce(value, ''), '([\u3400-\u9fff\uf900-\ufaff]+)', 'g') AS r,
            generate_series(1, length(r[1]) - 1) AS i
    ) tokens
$fn$;
-- the Latin tokens of titles and summaries, each once (a rare race of two writers may add one twice: no unique
-- index, so no writer ever waits on another's new word)
CREATE TABLE IF NOT EXISTS locate_vocabulary (token text NOT NULL);
CREATE INDEX IF NOT EXISTS locate_vocabulary_token ON locate_vocabulary (token);
CREATE TABLE IF NOT EXISTS locate_terms (
    knowledge_base_id  text NOT NULL,
    token              text NOT NULL,
    document_id        text NOT NULL REFERENCES documents (document_id) ON DELETE CASCADE,
    source             smallint NOT NULL,     -- 0 a node's title, 1 a node's keyword, 2 a page's summary, 3 a page's keyword
    node_id            text,                  -- sources 0 and 1
    first_page         integer NOT NULL,      -- a node's start_page, a page's page_index
    last_page          integer NOT NULL       -- a node's end_page, a page's page_index
);
-- the entries the pages and nodes make: what the triggers keep in locate_terms (kb-assets verify compares them)
CREATE OR REPLACE VIEW locate_entries AS
    SELECT d.knowledge_base_id, t.token, n.document_id, 0::smallint AS source, n.node_id, n.start_page AS first_page,
        n.end_page AS last_page
    FROM pageindex_nodes n JOIN documents d USING (document_id), unnest(locate_tokens(n.title)) AS t(token)
    WHERE n.depth > 0
    UNION ALL
    SELECT d.knowledge_base_id, k.token, n.document_id, 1::smallint, n.node_id, n.start_page, n.end_page
    FROM pageindex_nodes n JOIN documents d USING (document_id), unnest(n.keywords) AS k(token)
    WHERE n.depth > 0
    UNION ALL
    SELECT d.knowledge_base_id, t.token, p.document_id, 2::smallint, NULL, p.page_index, p.page_index
    FROM pages p JOIN documents d USING (document_id), unnest(locate_tokens(p.summary)) AS t(token)
    UNION ALL
    SELECT d.knowledge_base_id, k.token, p.document_id, 3::smallint, NULL, p.page_index, p.page_index
    FROM pages p JOIN documents d USING (document_id), unnest(p.keywords) AS k(token);
DO $$
BEGIN  -- a catalog made before the index: indexed once, before the index's own indexes are made
    IF NOT EXISTS (SELECT 1 FROM locate_terms LIMIT 1) AND NOT EXISTS (
        SELECT 1 FROM pg_indexes WHERE indexname = 'locate_terms_token'
    ) THEN
        INSERT INTO locate_terms SELECT * FROM locate_entries;
        INSERT INTO locate_vocabulary SELECT DISTINCT t.token FROM locate_terms t
            WHERE t.source IN (0, 2) AND t.token ~ '^[a-z0-9_.-]+$'
            AND NOT EXISTS (SELECT 1 FROM locate_vocabulary v WHERE v.token = t.token);
    END IF;
END
$$;
CREATE INDEX IF NOT EXISTS locate_terms_token ON locate_terms (token, knowledge_base_id)
    INCLUDE (document_id, source, node_id, first_page, last_page);
CREATE INDEX IF NOT EXISTS locate_terms_document ON locate_terms (document_id, source, first_page);
CREATE INDEX IF NOT EXISTS pages_toc ON pages (document_id, page_index) WHERE is_toc;
CREATE INDEX IF NOT EXISTS documents_unpublished ON documents (document_id) WHERE status <> 'published';
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        CREATE INDEX IF NOT EXISTS locate_vocabulary_trigrams ON locate_vocabulary USING gin (token gin_trgm_ops);
    END IF;
END
$$;
-- the locating index of pages and nodes as they are written, changed (summary, keywords, title, pages) and
-- deleted; statement triggers with transition tables: one pass a statement, not one a row
CREATE OR REPLACE FUNCTION locate_index_pages() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'UPDATE' THEN  -- only rows whose summary or keywords changed (not an image key, a flag)
        WITH changed AS (
            SELECT a.* FROM added a JOIN gone g USING (document_id, page_index)
            WHERE a.summary IS DISTINCT FROM g.summary OR a.keywords IS DISTINCT FROM g.keywords
        ), dropped AS (
            DELETE FROM locate_terms t USING changed c
            WHERE t.document_id = c.document_id AND t.source IN (2, 3) AND t.first_page = c.page_index
        ), vocabulary AS (
            INSERT INTO locate_vocabulary SELECT DISTINCT t.token FROM changed c, unnest(locate_tokens(c.summary)) AS t(token)
            WHERE t.token ~ '^[a-z0-9_.-]+$' AND NOT EXISTS (SELECT 1 FROM locate_vocabulary v WHERE v.token = t.token)
        )
        INSERT INTO locate_terms
            SELECT d.knowledge_base_id, t.token, c.document_id, 2, NULL, c.page_index, c.page_index
            FROM changed c JOIN documents d USING (document_id), unnest(locate_tokens(c.summary)) AS t(token)
            UNION ALL
            SELECT d.knowledge_base_id, k.token, c.document_id, 3, NULL, c.page_index, c.page_index
            FROM changed c JOIN documents d USING (document_id), unnest(c.keywords) AS k(token);
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO locate_terms
            SELECT d.knowledge_base_id, t.token, a.document_id, 2, NULL, a.page_index, a.page_index
            FROM added a JOIN documents d USING (document_id), unnest(locate_tokens(a.summary)) AS t(token)
            UNION ALL
            SELECT d.knowledge_base_id, k.token, a.document_id, 3, NULL, a.page_index, a.page_index
            FROM added a JOIN documents d USING (document_id), unnest(a.keywords) AS k(token);
        INSERT INTO locate_vocabulary SELECT DISTINCT t.token FROM added a, unnest(locate_tokens(a.summary)) AS t(token)
            WHERE t.token ~ '^[a-z0-9_.-]+$' AND NOT EXISTS (SELECT 1 FROM locate_vocabulary v WHERE v.token = t.token);
    ELSE
        DELETE FROM locate_terms t USING gone g
            WHERE t.document_id = g.document_id AND t.source IN (2, 3) AND t.first_page = g.page_index;
    END IF;
    RETURN NULL;
END
$fn$;
CREATE OR REPLACE FUNCTION locate_index_nodes() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM locate_terms t USING gone g
            WHERE t.document_id = g.document_id AND t.source IN (0, 1) AND t.node_id = g.node_id;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        INSERT INTO locate_terms
            SELECT d.knowledge_base_id, t.token, a.document_id, 0, a.node_id, a.start_page, a.end_page
            FROM added a JOIN documents d USING (document_id), unnest(locate_tokens(a.title)) AS t(token)
            WHERE a.depth > 0
            UNION ALL
            SELECT d.knowledge_base_id, k.token, a.document_id, 1, a.node_id, a.start_page, a.end_page
            FROM added a JOIN documents d USING (document_id), unnest(a.keywords) AS k(token)
            WHERE a.depth > 0;
        INSERT INTO locate_vocabulary SELECT DISTINCT t.token FROM added a, unnest(locate_tokens(a.title)) AS t(token)
            WHERE a.depth > 0 AND t.token ~ '^[a-z0-9_.-]+$'
            AND NOT EXISTS (SELECT 1 FROM locate_vocabulary v WHERE v.token = t.token);
    END IF;
    RETURN NULL;
END
$fn$;
DO $$
BEGIN  -- created once (the functions above are replaced in place)
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'pages_located_inserted') THEN
        CREATE TRIGGER pages_located_inserted AFTER INSERT ON pages REFERENCING NEW TABLE AS added
        FOR EACH STATEMENT EXECUTE FUNCTION locate_index_pages();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'pages_located_updated') THEN
        CREATE TRIGGER pages_located_updated AFTER UPDATE ON pages REFERENCING OLD TABLE AS gone NEW TABLE AS added
        FOR EACH STATEMENT EXECUTE FUNCTION locate_index_pages();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'pages_located_deleted') THEN
        CREATE TRIGGER pages_located_deleted AFTER DELETE ON pages REFERENCING OLD TABLE AS gone
        FOR EACH STATEMENT EXECUTE FUNCTION locate_index_pages();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'nodes_located_inserted') THEN
        CREATE TRIGGER nodes_located_inserted AFTER INSERT ON pageindex_nodes REFERENCING NEW TABLE AS added
        FOR EACH STATEMENT EXECUTE FUNCTION locate_index_nodes();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'nodes_located_updated') THEN
        CREATE TRIGGER nodes_located_updated AFTER UPDATE ON pageindex_nodes
        REFERENCING OLD TABLE AS gone NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION locate_index_nodes();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'nodes_located_deleted') THEN
        CREATE TRIGGER nodes_located_deleted AFTER DELETE ON pageindex_nodes REFERENCING OLD TABLE AS gone
        FOR EACH STATEMENT EXECUTE FUNCTION locate_index_nodes();
    END IF;
END
$$;
