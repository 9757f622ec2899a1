"""The answer type a question expects, as one more rerank feature (issue 15): a detail question asks for a
command, a path or a number, so a chunk that holds such a token near the question's words may be the one
that states the detail.

    .venv/bin/python benchmarks/answer_types.py WEIGHT [--near CHARS] -- --home .kb-bench --splits dev

A question expects ``code`` (``which command / option / key``, ``命令``, ``哪一行``, ``选项``), a ``path``
(``which directory / file``, ``目录``, ``路径``) or a ``number`` (``how many / long``, ``default``,
``多少``, ``多久``, ``端口``), by its words, English and Chinese; 70 of the 124 dev detail questions expect
at least one. Each candidate chunk of such a question gets ``WEIGHT`` added to its rerank score when it
holds a token of an expected type (an identifier, an option, a call, a path, a number with or without
unit), with ``--near`` only within that many characters of one of the question's words. The pageindex
strategy then ranks pages and chunks by it as by the rerank's own parts. Dev split, default strategy
(parser 3), hit@1 / hit@5 / MRR, answer@1 / answer@5:

| weight, near | English details | Chinese details |
|---|---|---|
| 0 (the product) | 0.92 / 0.99 / 0.95, 0.85 / 0.97 | 0.75 / 0.88 / 0.80, 0.71 / 0.83 |
| 0.05, anywhere in the chunk | 0.91 / 0.99 / 0.95, 0.85 / 0.97 | 0.75 / 0.88 / 0.81, 0.71 / 0.83 |
| 0.05, within 60 characters | 0.91 / 0.99 / 0.95, 0.85 / 0.97 | 0.75 / 0.88 / 0.81, 0.71 / 0.83 |
| 0.1, within 60 characters | 0.90 / 0.99 / 0.93, 0.84 / 0.96 | 0.75 / 0.85 / 0.81, 0.71 / 0.83 |

Manuals are full of commands, paths and numbers: the wrong pages hold them as often as the right one,
so the type tells nothing the question's words did not. Not kept.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from retrieval_quality import run_wrapped, wrapper_args

REPO = Path(__file__).resolve().parents[1]
EXPECTED = {
    "code": (re.compile(r"\b(command|call|function|line|setting|option|flag|key|variable|argument|syntax|entry|"
                        r"directive|keyword|operator|expression|string)\b|how (do|can|should) i (type|run|call|start|"
                        r"invoke|write|set|enable|disable|turn)", re.IGNORECASE),
             re.compile(r"命令|哪一?行|哪条|配置|运行什么|选项|参数|变量|函数|写什么|加什么|怎样才能|怎么写")),
    "path": (re.compile(r"\b(directory|folder|path|file)\b|where .* (stored|kept|saved|written)", re.IGNORECASE),
             re.compile(r"目录|路径|文件|存放|放在")),
    "number": (re.compile(r"\bhow (many|much|long|large|big|often)\b|\bwhat (size|port|number|version)\b|"
                          r"\bwhich (port|version)\b|\b(minimum|maximum|at least|at most|default)\b", re.IGNORECASE),
               re.compile(r"多少|几[个台次秒分]|多久|多大|端口|版本|最少|最多|至少|默认")),
}
TOKENS = {
    "code": re.compile(r"\w[\w.]*(::|\(\)|\(|=|--|/)\w*|(?<!\w)--?[A-Za-z][\w-]+|\b[a-z]+[A-Z]\w+|"
                       r"\b[a-z]+[_.][a-z_.]+\b|\b[A-Z][a-z]+[A-Z]\w+"),
    "path": re.compile(r"(?<![\w:])/([\w.\-]+/)+[\w.\-]*|~/[\w.\-/]+|\b\w+\.(conf|cfg|list|txt|R|sh|ini|xml|json|ipxe)\b"),
    "number": re.compile(r"\d+([.,]\d+)?\s*([KMGT]i?B|seconds?|minutes?|hours?|days?|秒|分钟|小时|天|%)?"),
}


def expected_types(question: str) -> list[str]:
    """The answer types a question asks for, by its English or Chinese words."""
    return [kind for kind, (english, chinese) in EXPECTED.items() if english.search(question) or chinese.search(question)]


def holds_type(kinds: list[str], content: str, word_positions: list[int], near: int) -> bool:
    """Whether the chunk holds a token of one of ``kinds`` (within ``near`` characters of a question word
    when ``near`` is set)."""
    for kind in kinds:
        starts = [match.start() for match in TOKENS[kind].finditer(content)]
        if starts and (not near or any(abs(s - p) <= near for s in starts for p in word_positions)):
            return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("weight", type=float)
    parser.add_argument("--near", type=int, default=0, help="only tokens within CHARS of a question word")
    own, quality_args, _ = wrapper_args(sys.argv)
    args = parser.parse_args(own)
    sys.path.insert(0, str(REPO))
    from kb_assets.retrieval import rerank as second_stage
    from kb_assets.retrieval.strategies import pageindex

    asked = {"question": ""}
    words_of, rerank = pageindex.question_words, pageindex.rerank

    def question_words(query, translations=None):
        asked["question"] = query
        return words_of(query, translations)

    def with_answer_type(rows, words, coverage_weight, proximity_weight):
        rerank(rows, words, coverage_weight, proximity_weight)
        kinds = expected_types(asked["question"])
        for row in rows if kinds else []:
            content = " ".join(row["content"].split())
            positions = [p for word in words for p in second_stage._positions(word, content.casefold())] \
                if args.near else []
            if holds_type(kinds, content, positions, args.near):
                row["scores"]["rerank"] = round(row["scores"]["rerank"] + args.weight, 6)

    pageindex.question_words, pageindex.rerank = question_words, with_answer_type
    run_wrapped(quality_args)


if __name__ == "__main__":
    main()
