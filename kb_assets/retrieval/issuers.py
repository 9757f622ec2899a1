"""The issuers of a knowledge base's documents and the names a question may call them by (issue 53; used by
``scope.py``).

Documents that share a commission file number, a ticker or a name are one issuer (``issuers``), whose names,
short and former names, tickers and initials all name every document of it: a 10-K of 2018 lists no ticker on its
cover, its 2022 one does; "Wal-Mart Stores, Inc." became "Walmart Inc." (the names are read at ingest:
``structure/names.py``). ``named_organisations(question, known)`` are the documents of the issuers a question names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kb_assets.structure.vocabulary import is_shorthand

if TYPE_CHECKING:
    from kb_assets.structure.metadata import DocumentMetadata

# words of organisation names that name no one on their own
LEGAL = {"inc", "incorporated", "corporation", "corp", "company", "co", "ltd", "limited", "plc", "llc", "the", "com"}
COMMON = {"general", "american", "united", "international", "national", "first", "new", "group", "holdings", "stores"}


def named_organisations(query: str, known: dict[str, DocumentMetadata]) -> set[str]:
    """The documents of the issuers the question names (``issuers``): by a name, a short or former name, a ticker
    or initials. A capitalised token that is also finance shorthand ("ETR", "GM": ``vocabulary.is_shorthand``)
    counts only when nothing else in the question names an issuer."""
    aliases = issuers(known)
    text = query if re.search(r"[A-Z]", query) else query.title()  # a question typed all in lower case
    words = set(re.findall(r"[a-z0-9&]+", query.lower().replace("\u2019", "'").replace("'s", " ")))
    heads = {w[:3] for w in words}  # a cheap test before a name's pattern ("walmart" for "Wal-Mart")
    tokens = set(re.findall(r"(?<![A-Za-z0-9$])\$?([A-Z][A-Z.&]{1,5}|(?<=\$)[A-Z])(?![A-Za-z0-9])", query))
    tokens = {t.strip(".") for t in tokens}
    mixed = {t.upper() for t in re.findall(r"\b[A-Z][a-z]?[A-Z][A-Za-z]?\b", query)}  # "JnJ"
    strong: set[str] = set()
    weak: set[str] = set()
    for group in aliases.values():
        if any(p.first[:3] in heads and p.pattern.search(text) for p in group.phrases):
            strong |= group.documents
            continue
        symbols = tokens & group.symbols | {t for t in mixed & group.symbols if len(t) >= 3}
        if any(not is_shorthand(t) for t in symbols):
            strong |= group.documents
        elif symbols:
            weak |= group.documents
    return strong or weak


@dataclass
class _Phrase:
    first: str  # its first word, lower case (its first three letters are a cheap test before the pattern)
    pattern: re.Pattern[str]


@dataclass
class _Issuer:
    documents: set[str] = field(default_factory=set)
    symbols: set[str] = field(default_factory=set)  # tickers and initials, matched as printed ("KO", "AMD")
    phrases: list[_Phrase] = field(default_factory=list)  # names, short and former names


_ISSUERS: dict[int, tuple[dict[str, DocumentMetadata], dict[str, _Issuer]]] = {}


def issuers(known: dict[str, DocumentMetadata]) -> dict[str, _Issuer]:
    """The issuers of the documents: documents that share a commission file number, a ticker or a name are one
    issuer, whose names, short and former names, tickers and initials all name every document of it (a 10-K of
    2018 lists no ticker on its cover, its 2022 one does; "Wal-Mart Stores, Inc." became "Walmart Inc.")."""
    cached = _ISSUERS.get(id(known))
    if cached and cached[0] is known:
        return cached[1]
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    keys: dict[str, list[str]] = {}
    organisation: dict[str, str] = {}  # of the documents that name theirs
    for document, metadata in known.items():
        name = metadata.get("organisation")
        if not name:
            continue
        organisation[document] = name
        own = [f"doc:{document}", f"name:{_key(name)}"]
        own += [f"name:{_key(n)}" for n in metadata.get("former_names") or []]
        own += [f"ticker:{t}" for t in metadata.get("tickers") or []]
        own += [f"file:{metadata['file_number']}"] if metadata.get("file_number") else []
        keys[document] = own
        for key in own[1:]:
            parent[root(key)] = root(own[0])
    found: dict[str, _Issuer] = {}
    for document, own in keys.items():
        issuer = found.setdefault(root(own[0]), _Issuer())
        issuer.documents.add(document)
        metadata = known[document]
        names = [organisation[document], *(metadata.get("names") or []), *(metadata.get("former_names") or [])]
        for name in names:
            for phrase in _phrases(name):
                if all(p.pattern.pattern != phrase.pattern.pattern for p in issuer.phrases):
                    issuer.phrases.append(phrase)
            issuer.symbols |= _initials(name)
        issuer.symbols |= set(metadata.get("tickers") or [])
    if len(_ISSUERS) > 16:
        _ISSUERS.clear()
    _ISSUERS[id(known)] = (known, found)
    return found


def _key(name: str) -> str:
    return " ".join(w for w in re.findall(r"[a-z0-9&]+", name.lower().replace("'", "")) if w not in LEGAL)


def _phrases(name: str) -> list[_Phrase]:
    """How a question may name an organisation: its name less legal words ("Coca-Cola", "coca cola",
    "CocaCola"), its first two name words, its one distinctive first word ("Lockheed"), "J&J" for "Johnson &
    Johnson". A one-word form is matched capitalised (as "Best" or "Target" are written when they are the
    company); a form with a digit or "&" ("3M", "PG&E") or one that starts in lower case ("eBay") as it is."""
    words = [
        w for w in re.findall(r"[A-Za-z0-9&]+", name.replace("'", "").replace("\u2019", "")) if w.lower() not in LEGAL
    ]
    if not words:
        return []
    forms = [words]
    if len(words) > 2 and "&" not in words[:2]:
        forms.append(words[:2])
    if len(words) >= 2 and words[0].lower() not in COMMON and len(words[0]) > 2 and "&" not in words[:2]:
        forms.append(words[:1])
    if "&" in words and len(words) == 3:
        forms.append([f"{words[0][0]}&{words[2][0]}"])
    out = []
    for form in forms:
        body = r"[\s.-]*".join(
            r"(?:&|and)" if w == "&" else r"\s*".join(map(re.escape, re.split(r"(?<=&)(?=.)|(?<=.)(?=&)", w)))
            for w in form
        )
        capital = len(form) == 1 and not re.search(r"[\d&]", form[0]) and not form[0][:1].islower()
        head = "(?=[A-Z])" if capital else ""
        pattern = re.compile(rf"(?<![A-Za-z0-9]){head}(?i:{body})(?![A-Za-z0-9])")
        out.append(_Phrase(re.findall(r"[a-z0-9&]+", form[0].lower())[0], pattern))
    return out


def _initials(name: str) -> set[str]:
    """An organisation's initials ("AMD": Advanced Micro Devices), from two name words up."""
    words = [w for w in re.findall(r"[A-Za-z0-9]+", name) if w.lower() not in LEGAL]
    return {"".join(w[0] for w in words).upper()} if len(words) >= 2 else set()
