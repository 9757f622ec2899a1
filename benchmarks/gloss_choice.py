"""Which dictionary glosses translate a Chinese query (issue 15), measured before building a choice: CC-CEDICT
lists a word's everyday senses first (``默认``: "to agree tacitly / tacit approval / default (setting)";
``目录``: "catalog / table of contents / directory"), and the search takes a word's first two glosses.
Cross-language retrieval often chooses translations by the target text instead; here, by how many chunks of
the knowledge base hold a gloss's words (its BM25 statistics kept in Postgres, ``document_terms``).

    .venv/bin/python benchmarks/gloss_choice.py {first,held,most} [--kb edu-zh] -- --home .kb-bench --splits dev

- ``first``: the first two glosses (what the search does);
- ``held``: the first two, in dictionary order, whose words the knowledge base holds (else the first two);
- ``most``: the two whose words the knowledge base holds most (else the first two).

Considers a word's first six usable glosses, then runs ``retrieval_quality.py`` with the arguments after
``--``. Reads the bench home only. Figures in README "Searching".
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from retrieval_quality import run_wrapped, wrapper_args

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = 6          # glosses of a word that may be chosen


def held_terms(catalog, knowledge_base: str) -> dict[str, int]:
    """Latin term -> chunks of the knowledge base that hold it."""
    with catalog.reader() as conn, conn.cursor() as cur:
        cur.execute("SELECT t.term, sum(t.chunks) FROM document_terms t JOIN documents d USING (document_id) "
                    "WHERE d.knowledge_base_id = %s AND d.status <> 'deleted' AND t.term ~ '^[a-z]' GROUP BY t.term",
                    (knowledge_base,))
        return {term: int(chunks) for term, chunks in cur.fetchall()}


def chosen(glosses: list[list[str]], frequencies: dict[str, int], rule: str, per_word: int) -> list[list[str]]:
    """The glosses (each its content words) that translate a word under ``rule``."""
    def held(gloss: list[str]) -> int:
        return max(frequencies.get(word, 0) for word in gloss)

    kept = [gloss for gloss in glosses if held(gloss)]
    if rule == "most":
        kept.sort(key=held, reverse=True)
    return (kept if rule != "first" and kept else glosses)[:per_word]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rule", choices=["first", "held", "most"])
    parser.add_argument("--kb", default="edu-zh", help="the knowledge base whose text chooses the glosses")
    own, quality_args, home = wrapper_args(sys.argv)
    args = parser.parse_args(own)           # after "--": retrieval_quality.py's arguments
    os.environ["KB_HOME"] = str(home.resolve())
    sys.path.insert(0, str(REPO))
    from kb_assets.retrieval import crosslingual
    from kb_assets.settings import Settings
    from kb_assets.stores import Stores

    frequencies = held_terms(Stores(Settings.from_env()).catalog, args.kb)

    def gloss_words(word: str, per_word: int = crosslingual.GLOSSES_PER_WORD) -> list[str]:
        glosses = [words for words in crosslingual.glosses(word)[:CANDIDATES] if words]
        out: list[str] = []
        for gloss in chosen(glosses, frequencies, args.rule, per_word):
            out += [word for word in gloss if word not in out]
        return out

    if args.rule != "first":
        crosslingual.gloss_words = gloss_words
    run_wrapped(quality_args)


if __name__ == "__main__":
    main()
