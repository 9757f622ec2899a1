"""Instructions in questions: what a question tells its answerer to do ("Round your answer to two decimal
places.", "Answer using the details shown in the balance sheet.", "Please show your work.") is not what
to look for. ``retrieval_query`` drops such sentences and unit asides ("(in USD millions)") from the text
search reads, and keeps the source they name ("balance sheet", "cash flow statement", "income statement",
"the notes", "MD&A") as words of the query: the named source is the strongest cue of where the answer is.
A question that is all instruction is kept as it is. Analysts' shorthand ("capex", "ETR", "D&A", "NI", "B/S") is
spelled out after it ("NKE ETR (effective tax rate) FY23", ``structure/vocabulary.py``), so every stage that reads
the query (the dense query, BM25, the page locating, the analyses' routing, the passages) reads the words filings
print (issue 53).
"""

from __future__ import annotations

import re
from dataclasses import replace

from kb_assets.retrieval.request import SearchRequest
from kb_assets.structure.vocabulary import spelled_out

# a sentence that starts so is an instruction to the answerer
INSTRUCTION = re.compile(
    r"^\s*(?:please\b|kindly\b|round(?:ing)?\b|answer\b|respond\b|give\b|provide\b|show\b|use\b|using\b|utiliz|"
    r"calculate\b|compute\b|express\b|report your\b|state\b|base your\b|assume\b|address\b|if\b[^.?!]*\bnot\b"
    r"|do not\b|don't\b|make sure\b|keep\b|present\b|reply\b|focus\b|consider only\b|rely\b|relying\b)",
    re.I,
)
# the sources a question names, as it names them
SOURCE = re.compile(
    r"\b(?:cash\s+flows?\s+statements?|statements?\s+of\s+cash\s+flows?|balance\s+sheets?|income\s+statements?"
    r"|statements?\s+of\s+(?:income|operations|earnings|financial\s+position|comprehensive\s+income)"
    r"|P&L|profit\s+and\s+loss|(?:shareholders'?|stockholders'?)\s+equity\s+statements?|MD&A"
    r"|management'?s\s+discussion(?:\s+and\s+analysis)?|notes\s+to\s+the\s+financial\s+statements)\b",
    re.I,
)
UNITS = re.compile(r"\(\s*in\s+(?:USD|US\$|\$|EUR|dollars?)?\s*(?:thousands|millions|billions)?\s*\)", re.I)
SENTENCE = re.compile(r"(?<=[.?!])\s+(?=[A-Z(])")


def focused(request: SearchRequest) -> SearchRequest:
    """The request with ``retrieval_query`` of its query."""
    query = retrieval_query(request.query)
    return request if query == request.query else replace(request, query=query)


def retrieval_query(question: str) -> str:
    """The question without its instructions to the answerer, plus the sources those instructions name, its
    shorthand spelled out."""
    return spelled_out(without_instructions(question))


def without_instructions(question: str) -> str:
    """The question without its instructions to the answerer, plus the sources those instructions name."""
    text = UNITS.sub(" ", question)
    kept, named = [], []
    for sentence in SENTENCE.split(text.strip()):
        head, colon, rest = sentence.partition(":")
        if INSTRUCTION.match(sentence) and colon and "?" in rest:  # "Please answer the following question: what ..."
            kept.append(rest.strip())
        elif INSTRUCTION.match(sentence):
            named += [" ".join(m.group(0).split()) for m in SOURCE.finditer(sentence)]
        else:
            kept.append(sentence)
    if not kept:
        return question
    query = " ".join(kept)
    extra = [source for source in dict.fromkeys(named) if source.lower() not in query.lower()]
    return " ".join(" ".join([query, *extra]).split())
