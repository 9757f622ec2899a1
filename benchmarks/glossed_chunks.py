"""Chinese chunks encoded from their dictionary glosses (issue 15), measured before building it: MiniLM
does not read Chinese, so a Chinese chunk's vector is noise; encoded from its words' English glosses
(``crosslingual.gloss_words``, as a Chinese query's dense text already is) it would be read.

    .venv/bin/python benchmarks/glossed_chunks.py --kb edu-zh [--glosses 1] -- --home .kb-bench --splits dev

Rewrites the vectors of the knowledge base's chunks that hold Chinese in the published collection of
``--home`` (the text's Chinese runs replaced by their glosses, Latin text kept), runs
``retrieval_quality.py`` with the arguments after ``--``, and writes the lake's vectors back, also when
it fails. Figures in README "Searching".
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from retrieval_quality import run_wrapped, wrapper_args

REPO = Path(__file__).resolve().parents[1]
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")


def glossed(text: str, per_word: int) -> str:
    """The text with each Chinese run replaced by its content words' English glosses."""
    from kb_assets.retrieval.crosslingual import gloss_words
    from kb_assets.retrieval.lexical_query import is_content_word
    from kb_assets.segmentation import search_words, words

    def run_glosses(run: str) -> str:
        out: list[str] = []
        for word in filter(is_content_word, words(run)):
            found = gloss_words(word, per_word)
            if not found and len(word) > 2:
                found = [w for part in search_words(word) if part != word and is_content_word(part)
                         for w in gloss_words(part, per_word)]
            out += found
        return f" {' '.join(out)} "

    return _CJK_RUN.sub(lambda match: run_glosses(match.group(0)), text)


def rewrite(stores, knowledge_base: str, per_word: int | None) -> None:
    """Upsert the knowledge base's entities: glossed vectors for chunks with Chinese (``per_word``
    glosses a word), or the lake's own vectors (``None``)."""
    import polars as pl

    from kb_assets.stores.vectors import chunk_entities, flush, published_collection

    collection = published_collection(stores.milvus, stores.settings.alias)
    model = stores.model()
    for doc in stores.catalog.list_documents([knowledge_base]):
        if not doc.published_version:
            continue
        chunks, vectors = stores.lake.read("chunks", doc.document_id), stores.lake.read("embeddings", doc.document_id)
        if per_word is not None:
            inputs = dict(zip(chunks["chunk_id"].to_list(), chunks["embedding_input"].to_list()))
            chinese = [c for c, text in inputs.items() if _CJK_RUN.search(text)]
            started = time.perf_counter()
            new = dict(zip(chinese, model.encode([glossed(inputs[c], per_word) for c in chinese]).tolist()))
            print(f"{doc.source_path}: {len(chinese)} of {len(inputs)} chunks glossed and encoded in "
                  f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
            vectors = vectors.with_columns(pl.Series("vector", [new.get(c, list(v)) for c, v in
                                                                zip(vectors["chunk_id"], vectors["vector"].to_list())]))
        stores.milvus.upsert(collection, chunk_entities(chunks, vectors))
    flush(stores.milvus, collection)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb", default="edu-zh", help="the knowledge base whose Chinese chunks are glossed")
    parser.add_argument("--glosses", type=int, default=1, help="English glosses a Chinese word")
    own, quality_args, home = wrapper_args(sys.argv)
    args = parser.parse_args(own)           # after "--": retrieval_quality.py's arguments
    os.environ["KB_HOME"] = str(home.resolve())
    sys.path.insert(0, str(REPO))
    from kb_assets.retrieval.crosslingual import load
    from kb_assets.settings import Settings
    from kb_assets.stores import Stores

    load()
    stores = Stores(Settings.from_env())
    rewrite(stores, args.kb, args.glosses)
    try:
        run_wrapped(quality_args)
    finally:
        rewrite(stores, args.kb, None)


if __name__ == "__main__":
    main()
