"""Milvus Lite computes BM25 statistics per segment: the same text scores differently by where it lies.

    .venv/bin/python benchmarks/bm25_segments.py [--dir /tmp/bm25-segments]

On a throwaway Milvus Lite database (the ``milvus-lite`` the project installs, the project's BM25
analyzer), three facts, printed as BM25 scores of the query ``cherry word7``:

1. 50 texts, flushed (one sealed segment); a copy of one of them under another id, flushed (a second
   segment of one entity): the copy scores differently from the original, though the texts are equal.
2. 30 more texts that hold ``cherry`` (a third segment): the original's score does not move. Corpus-wide
   BM25 would lower the weight of ``cherry`` (more documents hold it); here each segment keeps its own
   document count, document frequencies and average length.
3. Release and load (or a restart): nothing changes; ``compact`` returns job 0 and merges nothing.

Measured here (milvus-lite 3.2.2): original -3.94, its copy -0.58; step 2 leaves -3.94.

What it did to kb-assets before search scored BM25 from statistics of its own (``kb_assets/lexical.py``):
each published document is flushed (``steps.publish_document``: durable before Postgres records it), so a
document's chunks sit in segments of their own, and a document that changes lands in new ones; and
segments are per partition: the partition key (``knowledge_base_id``) hashes each knowledge base into one
of 16 (on the dev corpus each lies in its own, so a copy of the collection made in one pass, 9 insert
batches and one flush, scores every chunk exactly as before: ``tjener`` -2.94 in both). Milvus's lexical
scores were therefore not comparable across segments, and they depended on the order things were
ingested: the dev corpus brought to the same content by an incremental re-ingest (every document
re-parsed, 73 lines changed) moved 11 questions' first right page against a fresh ingest, e.g. Chinese
detail questions dev hit@1 / hit@5 0.75 / 0.88 -> 0.73 / 0.88. Search now takes only the candidates from
Milvus's BM25 and scores them per knowledge base (``retrieval/lexical_scores.py``);
``test_lexical_statistics`` checks that the same text scores the same wherever Milvus stored it.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default="/tmp/bm25-segments")
    args = parser.parse_args()
    from pymilvus import DataType, Function, FunctionType, MilvusClient

    from kb_assets.stores.vectors import BM25_ANALYZER

    folder = Path(args.dir)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    client = MilvusClient(str(folder / "milvus.db"))
    name = "bm25_segments"
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field("content", DataType.VARCHAR, max_length=2000, enable_analyzer=True,
                     analyzer_params=BM25_ANALYZER)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["content"],
                                 output_field_names=["sparse"]))
    index = client.prepare_index_params()
    index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    client.create_collection(name, schema=schema, index_params=index)

    def scores(ids: list[str]) -> dict[str, float]:
        hits = client.search(name, ["cherry word7"], anns_field="sparse", limit=100, output_fields=["id"],
                             search_params={"metric_type": "BM25"})[0]
        found = {hit["id"]: round(hit["distance"], 4) for hit in hits}
        return {i: found.get(i) for i in ids}

    texts = [{"id": f"d{i}", "content": f"apple banana {'cherry ' * (i % 3)}word{i}"} for i in range(50)]
    client.insert(name, texts)
    client.flush(name)
    client.load_collection(name)
    client.insert(name, [{"id": "copy7", "content": texts[7]["content"]}])
    client.flush(name)
    print(f"1. the same text in two segments: {scores(['d7', 'copy7'])}")
    client.insert(name, [{"id": f"more{i}", "content": f"cherry cherry cherry filler{i}"} for i in range(30)])
    client.flush(name)
    print(f"2. after 30 more texts holding 'cherry' (another segment): {scores(['d7', 'copy7'])}")
    job = client.compact(name)
    client.release_collection(name)
    client.load_collection(name)
    print(f"3. compact (job {job}), release and load: {scores(['d7', 'copy7'])}")
    client.close()


if __name__ == "__main__":
    main()
