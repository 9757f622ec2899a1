"""The text a query sends to BM25: its content words, without punctuation and question words (issue 15).

The BM25 analyzer (jieba + lowercase, ``stores/vectors.py``) keeps every token: punctuation
(``？``, ``-``, ``(``), Chinese function words (``的``, ``是``, ``在``) and question words (``怎样``,
``什么``, ``哪个``, ``多少``). In a collection where nearly every chunk holds them their IDF is small but
not zero, and a user's question is mostly made of them: a long chunk of common words then outranks the
short one that states the detail. ``bm25_query`` segments the query as the analyzer does, drops those
tokens and joins the rest with spaces (the analyzer splits them again the same way). A query with no
content word left is sent as it is. A question that names a line item by shorthand or by one of its names also
sends the words its US-GAAP elements print ("capex": payments, acquire, property, plant, equipment;
``structure/vocabulary.py``, issue 53).
"""

from __future__ import annotations

import re

from kb_assets.lib.segmentation import search_words
from kb_assets.structure.vocabulary import printed_words

_PUNCT = re.compile(r"^[\W_]+$", re.UNICODE)
# Chinese function words and question words: what a question adds around its content words
ZH_STOPWORDS = frozenset(
    """
的 了 着 过 是 在 有 和 与 及 或 或者 而 就 都 也 还 又 才 只 再 很 太 更 最 把 被 让 给 对 从 到 向 往 于 以 为 为了
因为 所以 如果 要是 但 但是 而且 并 并且 吗 呢 吧 啊 呀 么 嘛 哪 哪个 哪些 哪里 哪儿 什么 怎样 怎么 怎么样 如何 多少 几
多久 多大 为什么 是否 是不是 能否 能不能 可否 可以 能 能够 会 应 应该 应当 该 要 需要 需 得 想 想要 打算 用 使用 通过
这 那 这个 那个 这些 那些 这里 那里 这样 那样 其 它 它们 他 她 他们 我 我们 你 你们 您 自己 时 时候 之后 之前 以后
以前 后 前 里 上 下 中 内 外 之 等 等等 一个 一种 一下 一些 些 个 种 次 请问 请 吗？ 呢？
""".split()
)
EN_STOPWORDS = frozenset(
    """
a an the is are was were be been being do does did doing have has had i me my we our you your it its
they them their he she his her this that these those what which who whom whose when where why how
to of in on at by for with from as into onto about than then so if or and but not no can could would
should shall will may might must there here get gets got make makes made want wants need needs one
""".split()
)


def _jieba_tokens(text: str) -> list[str]:
    return [t.strip() for t in search_words(text) if t.strip()]


def is_content_word(token: str) -> bool:
    """Not punctuation, not a question or function word (Chinese or English)."""
    low = token.casefold()
    return not (_PUNCT.match(token) or low in ZH_STOPWORDS or low in EN_STOPWORDS)


def content_words(query: str) -> list[str]:
    """The query's tokens (jieba's search-mode words) less punctuation, question and function words."""
    return [token for token in _jieba_tokens(query) if is_content_word(token)]


_TOKEN = re.compile(r"[A-Za-z0-9_.\-:/=@%<>$]+(?:\(\))?")
_INNER_MARK = re.compile(r"\w[._\-:/=@%<>$]+\w|[a-z][A-Z]|[A-Za-z]\d|\d[A-Za-z]|\(\)$|^[-.]{1,2}\w")


def code_tokens(query: str) -> list[str]:
    """The query's identifiers and code tokens kept whole (``write.table``, ``--no-same-owner``, ``get()``,
    ``fileEncoding``, ``UTF-8``), which jieba and the analyzers split: distinct, case-folded, in query order."""
    out: list[str] = []
    for token in _TOKEN.findall(query):
        token = token if token.endswith("()") else token.rstrip(".,:;?!")
        if len(token) >= 3 and _INNER_MARK.search(token) and token.casefold() not in out:
            out.append(token.casefold())
    return out


def bm25_query(query: str, extra: list[str] | None = None) -> str:
    """The query's content words for BM25 (see the module docstring), then ``extra`` words (e.g. the
    English words of a Chinese query, ``crosslingual.py``) and the words its line items print."""
    kept = content_words(query)
    kept += [word for word in [*(extra or []), *printed_words(query)] if word not in kept]
    return " ".join(kept) if kept else query
