"""The compact jieba dictionary segments exactly as jieba's own (fast tier: no services)."""

import json
import re
import sys
from itertools import islice
from pathlib import Path

import jieba

from kb_assets.lib import segmentation
from kb_assets_tests.corpora import EXAMPLE_CORPUS

REPO = Path(__file__).resolve().parents[1]
_CJK = re.compile(r"[\u3400-\u9fff]")


def chinese_texts() -> list[str]:
    """Real Chinese text: the sample corpus's Chinese document (line by line) and the Chinese questions
    of the benchmark sets, with mixed-script and punctuation cases."""
    lines = (EXAMPLE_CORPUS / "数据平台简介.md").read_text(encoding="utf-8").splitlines()
    questions = []
    for name in ("detail_questions.jsonl", "paraphrased_questions.jsonl"):
        for line in (REPO / "benchmarks" / name).read_text(encoding="utf-8").splitlines():
            questions.append(json.loads(line)["query"])
    texts = [t for t in lines + questions if _CJK.search(t)]
    return texts + [
        "使用 backports 安装较新的软件",
        "R CMD INSTALL 的 --no-test-load 选项是什么？",
        "数据备份保留35天。",
    ]


def test_compact_dictionary_segments_as_jieba_does():
    texts = chinese_texts()
    assert len(texts) > 50
    reference = jieba.Tokenizer()
    reference.initialize()
    compact = segmentation.tokenizer()
    assert len(compact.FREQ) == len(reference.FREQ) and compact.total == reference.total
    for text in texts:
        assert segmentation.words(text) == list(reference.cut(text)), text
        assert segmentation.search_words(text) == list(reference.cut_for_search(text)), text


def test_compact_frequencies_answer_like_a_dict_in_a_fraction_of_its_memory():
    reference = jieba.Tokenizer()
    reference.initialize()
    table = segmentation.CompactFrequencies(reference.FREQ)
    for word in ("数据", "数", "备份", "平台简介", "backports", "", "不存在的词语组合"):
        assert (word in table) == (word in reference.FREQ)
        assert table.get(word, -1) == reference.FREQ.get(word, -1)
    assert table["数据"] == reference.FREQ["数据"] and list(islice(table, 50)) == sorted(reference.FREQ)[:50]
    dict_bytes = sys.getsizeof(reference.FREQ) + sum(sys.getsizeof(k) for k in reference.FREQ)
    assert table.nbytes * 4 < dict_bytes, (table.nbytes, dict_bytes)
