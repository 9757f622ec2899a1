"""Chinese word segmentation: jieba, with its dictionary held compactly.

jieba keeps its dictionary (every word and every prefix of one, 498k entries) as a dict of str -> int:
about 71 MB in every process that segments, the retrieval service's largest single part. Here the same
entries live in one sorted string and two arrays (about 12 MB) and answer the lookups jieba makes
(``in``, ``[]``, ``get``) by bisection; the words come out the same (``test_segmentation``).
"""

from __future__ import annotations

import sys
import threading
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from itertools import accumulate

_lock = threading.Lock()
_tokenizer = None


class CompactFrequencies(Mapping):
    """A read-only str -> int mapping: the keys concatenated in sorted order, their ends and values
    in arrays; a lookup bisects the keys that share its first character."""

    def __init__(self, frequencies: Mapping[str, int]):
        keys = sorted(frequencies)
        self._text = "".join(keys)
        self._ends = array("L", accumulate(len(key) for key in keys))
        self._values = array("q", (frequencies[key] for key in keys))
        # first character -> the range of keys that start with it (bisecting ~50 keys, not 498k)
        self._ranges: dict[str, tuple[int, int]] = {}
        for index, key in enumerate(keys):
            start, _ = self._ranges.get(key[:1], (index, index))
            self._ranges[key[:1]] = (start, index + 1)

    def _key(self, index: int) -> str:
        return self._text[self._ends[index - 1] if index else 0 : self._ends[index]]

    def _index(self, key: str) -> int:
        low, high = self._ranges.get(key[:1], (0, 0))
        index = bisect_left(range(high), key, low, high, key=self._key)
        return index if index < high and self._key(index) == key else -1

    def __getitem__(self, key: str) -> int:
        index = self._index(key)
        if index < 0:
            raise KeyError(key)
        return self._values[index]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._index(key) >= 0

    def get(self, key: str, default=None):
        index = self._index(key)
        return self._values[index] if index >= 0 else default

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[str]:
        return (self._key(index) for index in range(len(self._values)))

    @property
    def nbytes(self) -> int:
        """The memory the mapping holds (its string and arrays)."""
        ranges = sum(sys.getsizeof(first) + sys.getsizeof(span) for first, span in self._ranges.items())
        return ranges + sum(sys.getsizeof(part) for part in (self._text, self._ends, self._values, self._ranges))


def tokenizer():
    """The process's jieba tokenizer (its default dictionary, compact), made on first use."""
    global _tokenizer
    with _lock:
        if _tokenizer is None:
            import jieba

            jieba.setLogLevel(60)
            made = jieba.Tokenizer()
            frequencies, made.total = made.gen_pfdict(made.get_dict_file())
            made.FREQ = CompactFrequencies(frequencies)
            del frequencies
            made.initialized = True
            _tokenizer = made
        return _tokenizer


def words(text: str) -> list[str]:
    """jieba's words of ``text`` (its default mode, HMM for unknown words)."""
    return list(tokenizer().cut(text))


def search_words(text: str) -> list[str]:
    """jieba's search-mode words of ``text``: each word, and before a long one its dictionary parts."""
    return list(tokenizer().cut_for_search(text))
