"""Sizing: the figures deploy/README.md's sizing table is computed from, measured here, and the table.

    .venv/bin/python benchmarks/sizing.py [--corpus DIR]... [--encode 256]

Ingests the sample corpus, and the R manuals of the dev corpus when ./corpus-cache has them (see
benchmarks/dev_corpus.py), into a fresh KB_HOME on the embedded profile, through Dagster as `kb-assets
ingest` does. Then it measures:

- parse pages/s and encoder chunks/s on one core (the process pinned to one CPU, one torch thread),
  and the encoder on every core of the machine;
- chunks a page, pages a document;
- bytes a chunk in the lake (chunks + embeddings Parquet), a page in the object store (originals,
  page renders, figures), a page in Postgres (every table, indexes included), rows a page;
- bytes an entity in Milvus: its fields as stored (content, titles, ids, the dense vector, the BM25
  sparse vector estimated from jieba terms) and the memory of its indexes on a query node (HNSW
  M=16 with its vector, BM25 postings); the Milvus Lite data folder per entity for comparison;
- CPU seconds a page of the whole ingest in this process (Postgres and the Milvus Lite server are
  other processes and not counted), and the peak RSS of this process (what a run worker holds).

It prints the figures, the load average while it ran, and the table for 10k, 1M and 100M pages.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEV_CORPUS = REPO / "corpus-cache" / "usr" / "share" / "R" / "doc" / "manual"  # benchmarks/dev_corpus.py
DEV_FILES = ("R-data.pdf", "R-admin.pdf", "R-intro.pdf")
HNSW_M = 16  # kb_assets/stores/vectors.py: ensure_collection
SIZES = (10_000, 1_000_000, 100_000_000)
DOCS_PER_ASSET_LIMIT = 100_000  # FIELD-NOTES: per-document partitions work to ~100k documents


def folder_bytes(path: Path, pattern: str = "*") -> int:
    return sum(p.stat().st_size for p in path.rglob(pattern) if p.is_file()) if path.exists() else 0


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1024 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def one_core(callable_, *args):
    """Run on one CPU with one torch thread; returns (result, wall seconds, CPU seconds of the process).
    CPU seconds are what the table uses: on a shared machine wall time also counts the other tenants."""
    import torch

    cpus, threads = os.sched_getaffinity(0), torch.get_num_threads()
    os.sched_setaffinity(0, {min(cpus)})
    torch.set_num_threads(1)
    try:
        started, cpu = time.perf_counter(), time.process_time()
        result = callable_(*args)
        return result, time.perf_counter() - started, time.process_time() - cpu
    finally:
        os.sched_setaffinity(0, cpus)
        torch.set_num_threads(threads)


def measure_parse(files: list[Path]) -> tuple[int, float, float]:
    """Pages parsed on one core, and the wall and CPU seconds it took (docling loaded before timing)."""
    from kb_assets.parsing import DocumentParseError, parse_document

    pages, wall, cpu = 0, 0.0, 0.0
    for path in files:
        try:
            parsed, took, used = one_core(parse_document, path)
        except DocumentParseError:
            continue
        pages, wall, cpu = pages + len(parsed.pages), wall + took, cpu + used
    return pages, wall, cpu


def store_sizes(home: Path, catalog) -> dict[str, int]:
    """Bytes in each store of the embedded profile (and Postgres rows), to difference around an ingest."""
    tables = catalog.table_sizes()
    objects = home / "objects"
    return {
        "lake": folder_bytes(home / "lake"),
        "objects": folder_bytes(objects),
        "originals": folder_bytes(objects / "originals"),
        "renders": folder_bytes(objects / "pages"),
        "figures": folder_bytes(objects / "figures"),
        "milvus_lite": folder_bytes(home / "milvus"),
        "pg_bytes": sum(size for _, size in tables.values()),
        "pg_rows": sum(rows for rows, _ in tables.values()),
        **{f"rows:{t}": rows for t, (rows, _) in tables.items()},
    }


def sparse_terms(texts: list[str]) -> float:
    """Distinct analyzer terms a chunk (jieba, lowercased): the nonzeros of its BM25 sparse vector."""
    import jieba

    return sum(len({t.strip().lower() for t in jieba.lcut(text) if t.strip()}) for text in texts) / max(1, len(texts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--corpus",
        action="append",
        type=Path,
        help="folders or files to measure on (default: examples/corpus and the R manuals of the dev corpus)",
    )
    parser.add_argument("--encode", type=int, default=256, help="chunks to encode for the encoder figures")
    args = parser.parse_args()
    sources = args.corpus or [REPO / "examples" / "corpus"] + [
        DEV_CORPUS / f for f in DEV_FILES if (DEV_CORPUS / f).exists()
    ]
    work = Path(tempfile.mkdtemp(prefix="kb-bench-sizing-"))
    work.chmod(0o755)
    corpus = work / "corpus"
    corpus.mkdir()
    for source in sources:
        (shutil.copytree if source.is_dir() else shutil.copy)(source, corpus / source.name)
    os.environ["KB_HOME"] = str(work / "home")
    os.environ.pop("DAGSTER_HOME", None)
    load_before = os.getloadavg()

    from kb_assets.launch.ingest import ingest
    from kb_assets.services import stop_milvus, stop_postgres
    from kb_assets.settings import Settings
    from kb_assets.stores import Stores
    from kb_assets.stores.entities import count_entities
    from kb_assets.stores.vectors import SCALAR_FIELDS

    settings = Settings.from_env()
    stores = Stores(settings)
    try:
        # a warm-up ingest loads the encoder, docling and the definitions: the measured one is steady state
        (work / "warmup").mkdir()
        (work / "warmup" / "warmup.md").write_text("# Warm-up\n\nLoads the models once.\n")
        ingest([work / "warmup"], "warmup", settings)
        before = store_sizes(settings.home, stores.catalog)
        cpu = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        report = ingest([corpus], "sizing", settings)
        wall = time.perf_counter() - started
        after_usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu_seconds = (after_usage.ru_utime - cpu.ru_utime) + (after_usage.ru_stime - cpu.ru_stime)
        peak_rss = after_usage.ru_maxrss * 1024
        after = store_sizes(settings.home, stores.catalog)
        grown = {key: after[key] - before.get(key, 0) for key in after}

        docs = [d for d in stores.catalog.list_documents(["sizing"]) if d.status == "published"]
        pages = sum(d.page_count or 0 for d in docs)
        chunks = sum(d.chunk_count or 0 for d in docs)
        entities = count_entities(stores.milvus, report.published.collection)

        import polars as pl

        lake_chunks = pl.concat([stores.lake.read("chunks", d.document_id) for d in docs])
        texts = lake_chunks["embedding_input"].to_list()
        model = stores.model()
        dim = model.dimension
        scalar_bytes = sum(
            lake_chunks[name].fill_null("").str.len_bytes().mean() or 0
            for name in SCALAR_FIELDS
            if name in lake_chunks.columns
        )
        content_bytes = lake_chunks["content"].str.len_bytes().mean()
        terms = sparse_terms(lake_chunks["content"].to_list())
        entity_stored = 64 + scalar_bytes + 3 * 4 + content_bytes + 4 * dim + 8 * terms  # pk, scalars, ints, vectors
        entity_memory = 4 * dim + 2 * HNSW_M * 4 + 8 * terms  # HNSW (vector + level-0 links) + BM25 postings

        parse_pages, parse_wall, parse_cpu = measure_parse(sorted(p for p in corpus.rglob("*") if p.is_file()))
        sample = (texts * (args.encode // max(1, len(texts)) + 1))[: args.encode]
        _, encode_wall, encode_cpu = one_core(model.encode, sample)
        started = time.perf_counter()
        model.encode(sample)
        encode_all = time.perf_counter() - started
        load_after = os.getloadavg()
    finally:
        stop_milvus(settings.home)
        stop_postgres(settings.home)
        shutil.rmtree(work, ignore_errors=True)

    per = dict(
        chunks_per_page=chunks / pages,
        pages_per_doc=pages / len(docs),
        parse_pps=parse_pages / parse_cpu,
        encode_cps=len(sample) / encode_cpu,
        lake_per_chunk=grown["lake"] / chunks,
        objects_per_page=grown["objects"] / pages,
        pg_per_page=grown["pg_bytes"] / pages,
        pg_rows_per_page=grown["pg_rows"] / pages,
        cpu_per_page=cpu_seconds / pages,
    )
    print(
        f"corpus: {len(docs)} documents, {pages} pages, {chunks} chunks, {entities} entities "
        f"({len(report.failures)} failed); ingest {wall:.0f} s wall, {cpu_seconds:.0f} s CPU in this process"
    )
    print(f"load average: {load_before[0]:.2f} before, {load_after[0]:.2f} after; {os.cpu_count()} cores")
    print(
        f"parse on one core: {per['parse_pps']:.1f} pages per CPU-second ({parse_pages / parse_wall:.1f} pages/s "
        f"wall: {parse_pages} pages in {parse_wall:.1f} s)"
    )
    print(
        f"encoder ({model.model_id}, {dim}-d) on one core: {per['encode_cps']:.1f} chunks per CPU-second "
        f"({len(sample) / encode_wall:.1f}/s wall); "
        f"on {os.cpu_count()} cores: {len(sample) / encode_all:.1f} chunks/s wall"
    )
    print(f"chunks a page: {per['chunks_per_page']:.2f}; pages a document: {per['pages_per_doc']:.1f}")
    print(f"lake: {human(per['lake_per_chunk'])} a chunk (chunks + embeddings Parquet, one file each a document)")
    print(
        f"object store: {human(per['objects_per_page'])} a page (originals {human(grown['originals'])}, "
        f"page renders {human(grown['renders'])}, figures {human(grown['figures'])})"
    )
    print(
        f"Postgres: {human(per['pg_per_page'])} and {per['pg_rows_per_page']:.2f} rows a page; rows: "
        + ", ".join(f"{k[5:]} {v}" for k, v in grown.items() if k.startswith("rows:") and v)
    )
    print(
        f"Milvus entity: stored ~{human(entity_stored)} (content {content_bytes:.0f} B, scalars {scalar_bytes:.0f} B, "
        f"dense {4 * dim} B, BM25 ~{terms:.0f} terms), index memory ~{human(entity_memory)}; "
        f"Milvus Lite folder grew {human(grown['milvus_lite'] / max(1, entities))} an entity"
    )
    print(
        f"CPU: {per['cpu_per_page']:.2f} s a page for the whole ingest in this process (models loaded before); "
        f"run worker peak RSS {human(peak_rss)}"
    )
    print()
    print(table(per, entity_stored, entity_memory, peak_rss))


def table(per: dict, entity_stored: float, entity_memory: float, peak_rss: int) -> str:
    rows = ["| pages | 10k | 1M | 100M |", "|---|---|---|---|"]

    def row(label, value):
        rows.append(f"| {label} | " + " | ".join(value(p) for p in SIZES) + " |")

    chunks = lambda p: p * per["chunks_per_page"]  # noqa: E731
    row("documents (at the measured pages a document)", lambda p: f"{p / per['pages_per_doc']:,.0f}")
    row("chunks = Milvus entities", lambda p: f"{chunks(p):,.0f}")
    row("Postgres (pages, trees, documents)", lambda p: human(p * per["pg_per_page"]))
    row("lake (chunks + embeddings Parquet)", lambda p: human(chunks(p) * per["lake_per_chunk"]))
    row("object store (originals, page renders, figures)", lambda p: human(p * per["objects_per_page"]))
    row("Milvus object storage (fields + index files)", lambda p: human(chunks(p) * (entity_stored + entity_memory)))
    row("Milvus query-node memory (indexes; raw fields mmapped)", lambda p: human(chunks(p) * entity_memory * 1.3))
    row("CPU-hours: parse", lambda p: f"{p / per['parse_pps'] / 3600:,.1f}")
    row("CPU-hours: encode", lambda p: f"{chunks(p) / per['encode_cps'] / 3600:,.1f}")
    row("CPU-hours: whole ingest (run workers)", lambda p: f"{p * per['cpu_per_page'] / 3600:,.1f}")
    row("hours with 20 run pods of 2 cores", lambda p: f"{p * per['cpu_per_page'] / 3600 / 40:,.1f}")
    row("memory a run worker (peak RSS)", lambda p: human(peak_rss))
    row(
        "partitions",
        lambda p: (
            "per document" if p / per["pages_per_doc"] <= DOCS_PER_ASSET_LIMIT else "hash buckets of document ids"
        ),
    )
    return "\n".join(rows)


if __name__ == "__main__":
    main()
