#!/usr/bin/env python3
"""Build truth.jsonl: issuer, period covered and kind of every neutral filing.

    python benchmarks/filings/build_truth.py DATA_DIR

Reads DATA_DIR/filings.csv (from fetch_filings.py; it holds the original names, which
never enter git) and the first pages of each PDF. For 10-K and 10-Q filings the period end
is read from the cover ("for the fiscal year / quarterly period ended ..."). Earnings
releases and 8-Ks were checked by hand against their text; their dates are in MANUAL
below, keyed by neutral name, as are the few filings whose PDF is absent from the
repository snapshot or has no usable text layer (verified = "name": taken from
FinanceBench's file name and the issuer's fiscal calendar, not from the document).

Fiscal years follow the issuer's own label (Foot Locker and Ulta Beauty label a year
ending in late January/early February by the previous calendar year; Best Buy, Walmart
and Salesforce by the year it ends in; 52/53-week years ending in the first days of
January belong to the previous year). FinanceBench's file names do not always agree with
the document (several are a year or a quarter off); truth follows the document.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
from heldout import guard  # noqa: E402
from pagetext import norm, page_texts  # noqa: E402

ISSUERS = {
    "3M": "3M",
    "ACTIVISIONBLIZZARD": "Activision Blizzard",
    "ACTIVSIONBLIZZARD": "Activision Blizzard",
    "ADOBE": "Adobe",
    "AES": "AES",
    "AMAZON": "Amazon",
    "AMCOR": "Amcor",
    "AMD": "AMD",
    "AMERICANWATERWORKS": "American Water Works",
    "APPLE": "Apple",
    "BESTBUY": "Best Buy",
    "BLOCK": "Block",
    "BOEING": "Boeing",
    "BOSTONPROPERTIES": "Boston Properties",
    "COCACOLA": "Coca-Cola",
    "CORNING": "Corning",
    "COSTCO": "Costco",
    "CVSHEALTH": "CVS Health",
    "EBAY": "eBay",
    "FEDEX": "FedEx",
    "FOOTLOCKER": "Foot Locker",
    "GENERALMILLS": "General Mills",
    "INTEL": "Intel",
    "JOHNSON_JOHNSON": "Johnson & Johnson",
    "JPMORGAN": "JPMorgan Chase",
    "KRAFTHEINZ": "Kraft Heinz",
    "LOCKHEEDMARTIN": "Lockheed Martin",
    "MCDONALDS": "McDonald's",
    "MGMRESORTS": "MGM Resorts",
    "MICROSOFT": "Microsoft",
    "NETFLIX": "Netflix",
    "NIKE": "Nike",
    "ORACLE": "Oracle",
    "PAYPAL": "PayPal",
    "PEPSICO": "PepsiCo",
    "PFIZER": "Pfizer",
    "PG_E": "PG&E",
    "SALESFORCE": "Salesforce",
    "ULTABEAUTY": "Ulta Beauty",
    "VERIZON": "Verizon",
    "WALMART": "Walmart",
}

# Fiscal calendar: (cutoff month, cutoff day, label shift). A date on or before the
# cutoff in year Y falls in the fiscal year ending in Y ("E"); later dates in E = Y + 1.
# The issuer's label for that year is E + shift.
CALENDAR = {
    "Adobe": (12, 7, 0),
    "Amcor": (7, 7, 0),
    "Microsoft": (7, 7, 0),
    "Apple": (10, 7, 0),
    "Costco": (9, 7, 0),
    "General Mills": (6, 7, 0),
    "Nike": (6, 7, 0),
    "Oracle": (6, 7, 0),
    "FedEx": (6, 7, 0),
    "Best Buy": (2, 7, 0),
    "Walmart": (2, 7, 0),
    "Salesforce": (2, 7, 0),
    "Foot Locker": (2, 7, -1),
    "Ulta Beauty": (2, 7, -1),
}
DECEMBER = (1, 7, -1)  # calendar-year issuers, incl. 52/53-week years ending by Jan 7

KINDS = {"10K": "10-K", "annualreport": "10-K", "10Q": "10-Q", "8K": "8-K", "EARNINGS": "earnings release"}

# Checked by hand (see module docstring). kind/verified/note override the defaults.
MANUAL = {
    # earnings releases: end of the quarter reported (from the release's tables)
    "doc-079": {"period_end": "2023-01-28"},
    "doc-082": {"period_end": "2023-07-29"},
    "doc-123": {"period_end": "2022-11-20"},
    "doc-124": {"period_end": "2023-05-07"},
    "doc-144": {"period_end": "2023-03-31"},
    "doc-147": {"period_end": "2023-06-30"},
    "doc-174": {"period_end": "2022-12-31"},
    "doc-176": {"period_end": "2023-04-01"},
    "doc-187": {"period_end": "2023-04-02"},
    "doc-188": {"period_end": "2023-07-02"},
    "doc-223": {"period_end": "2023-03-31"},
    "doc-224": {"period_end": "2023-06-30"},
    "doc-284": {"period_end": "2022-12-31"},
    "doc-285": {"period_end": "2023-06-17"},
    "doc-295": {"period_end": "2023-07-02"},
    "doc-306": {"period_end": "2023-06-30"},
    "doc-307": {"period_end": "2023-03-31"},
    "doc-313": {"period_end": "2023-04-30"},
    "doc-314": {"period_end": "2023-07-31"},
    "doc-318": {"period_end": "2023-04-29"},
    "doc-319": {"period_end": "2023-07-29"},
    # named as 10-Qs in FinanceBench, but they are the quarterly earnings releases
    "doc-217": {"period_end": "2023-03-26", "kind": "earnings release"},
    "doc-218": {"period_end": "2023-06-25", "kind": "earnings release"},
    # named as earnings in FinanceBench, but they are 8-Ks (Item 8.01, bond offerings)
    "doc-305": {"kind": "8-K"},
    "doc-308": {"kind": "8-K"},
    # 8-Ks whose cover gives report date and, in brackets, the earlier event date
    "doc-151": {"period_end": "2022-05-18"},
    "doc-152": {"period_end": "2022-08-16"},
    "doc-153": {"period_end": "2023-02-15"},
    # 8-Ks whose cover puts the date before the "Date of Report" label
    "doc-309": {"period_end": "2021-07-21"},
    "doc-310": {"period_end": "2023-01-04"},
    # annual reports to shareholders that contain the Form 10-K
    "doc-052": {"note": "annual report to shareholders containing the Form 10-K"},
    "doc-149": {"note": "annual report to shareholders containing the Form 10-K"},
    "doc-166": {"note": "annual report to shareholders containing the Form 10-K"},
    "doc-336": {"note": "annual report to shareholders containing the Form 10-K"},
    # no usable text layer: from the name
    "doc-221": {
        "period_end": "2022-12-31",
        "verified": "name",
        "note": "text layer unreadable (font encoding); from the name",
    },
    "doc-178": {
        "period_end": "2023-02-10",
        "verified": "name",
        "note": "PDF does not open with pdfium; date from the name",
    },
    "doc-179": {
        "period_end": "2023-08-16",
        "verified": "name",
        "note": "PDF does not open with pdfium; date from the name",
    },
    # PDF absent from the repository snapshot used here: from name and issuer calendar
    "doc-007": {"period_end": "2023-06-30"},
    "doc-019": {"period_end": "2018-11-30"},
    "doc-026": {"period_end": "2017-12-31"},
    "doc-027": {"period_end": "2018-12-31"},
    "doc-028": {"period_end": "2019-12-31"},
    "doc-031": {"period_end": "2022-12-31"},
    "doc-040": {"period_end": "2020-06-30"},
    "doc-051": {"period_end": "2022-12-31"},
    "doc-089": {"period_end": "2022-12-31"},
    "doc-105": {"period_end": "2021-12-31"},
    "doc-106": {"period_end": "2022-12-31"},
    "doc-156": {
        "period_end": "2023-01-28",
        "note": "annual report to shareholders; period inferred (FinanceBench lists it under both 2022 and 2023)",
    },
    "doc-167": {"period_end": "2015-12-26"},
    "doc-168": {"period_end": "2016-12-31"},
    "doc-169": {"period_end": "2017-12-30"},
    "doc-170": {"period_end": "2018-12-29"},
    "doc-171": {"period_end": "2019-12-28"},
    "doc-173": {"period_end": "2021-12-25"},
    "doc-175": {"period_end": "2022-12-31"},
    "doc-193": {"period_end": "2021-12-31"},
    "doc-197": {"period_end": "2022-12-31"},
    "doc-275": {"period_end": "2022-12-31"},
    "doc-315": {"period_end": "2023-01-28", "note": "FinanceBench names Ulta's fiscal 2022 10-K (filed 2023) '2023'"},
    "doc-331": {"period_end": "2019-01-31"},
}

MONTHS = ("January February March April May June July August September October November December").split()
DATE = (
    r"(January|February|March|April|May|June|July|August|September|October|November|December)\s+(\d{1,2})\s*,\s*(\d{4})"
)


def parse_date(m) -> dt.date:
    return dt.date(int(m.group(3)), MONTHS.index(m.group(1).capitalize()) + 1, int(m.group(2)))


def fiscal(issuer: str, d: dt.date) -> tuple[int, int]:
    """(fiscal year label, fiscal quarter whose period ends on d)."""
    cm, cd, shift = CALENDAR.get(issuer, DECEMBER)
    end_year = d.year if (d.month, d.day) <= (cm, cd) else d.year + 1
    fy_end = dt.date(end_year, cm, cd) - dt.timedelta(days=7)
    quarter = 4 - round((fy_end - d).days / 91.3)
    return end_year + shift, max(1, min(4, quarter))


def split_name(name: str) -> tuple[str, str]:
    for key in sorted(ISSUERS, key=len, reverse=True):
        if name.upper().startswith(key + "_"):
            rest = name[len(key) + 1 :]
            for token, kind in KINDS.items():
                if token.lower() in rest.lower():
                    return ISSUERS[key], kind
            break
    raise ValueError(f"cannot parse {name}")


def cover_date(text: str, kind: str):
    t = norm(text)
    if kind == "10-K":
        pat = r"fiscal year ended\s*:?\s*" + DATE
    elif kind == "10-Q":
        pat = r"quarterly period ended\s*:?\s*(?:Commission file\s*)?" + DATE
    elif kind == "8-K":
        pat = r"(?:earliest event reported\)?\s*:?\s*|Date of Report:?\s*)" + DATE
    else:
        return None
    m = re.search(pat, t, re.I)
    if m is None and kind == "10-K":
        m = re.search(r"year ended\s*" + DATE, t, re.I)
    if m is None:
        return None
    g = m.groups()[-3:]
    return dt.date(int(g[2]), MONTHS.index(g[0].capitalize()) + 1, int(g[1]))


def main() -> int:
    data = Path(sys.argv[1])
    rows = list(csv.DictReader(open(data / "filings.csv")))
    out = []
    for r in rows:
        doc = r["neutral"][:-4]
        name = guard(r["original"][:-4])
        issuer, kind = split_name(name)
        man = MANUAL.get(doc, {})
        kind = man.get("kind", kind)
        verified = "cover" if kind in ("10-K", "10-Q") else "document"
        period_end = None
        if "period_end" in man:
            period_end = dt.date.fromisoformat(man["period_end"])
        elif r["present"] == "1":
            first = list(range(10 if "annualreport" in name else 3))
            texts = page_texts(data / "pdfs" / r["neutral"], first, cache_dir=data / "text")
            period_end = cover_date(" ".join(texts[p] for p in sorted(texts)), kind)
        if period_end is None:
            raise SystemExit(f"{doc}: no period found; add it to MANUAL")
        if r["present"] != "1":
            verified = "name"
        verified = man.get("verified", verified)
        fy, q = fiscal(issuer, period_end)
        if kind == "8-K" and issuer not in CALENDAR:
            fy = period_end.year  # an event date, not a 52/53-week year end
        rec = {
            "doc": doc,
            "issuer": issuer,
            "kind": kind,
            "fiscal_year": fy,
            "fiscal_quarter": q if kind in ("10-Q", "earnings release") else None,
            "period_end": period_end.isoformat(),
        }
        if kind == "10-K":
            rec["fiscal_period"] = f"FY{fy}"
        elif kind == "8-K":
            rec["fiscal_period"] = f"event {period_end.isoformat()} (FY{fy})"
        else:
            rec["fiscal_period"] = f"Q{q} FY{fy}"
            if kind == "earnings release" and q == 4:
                rec["fiscal_period"] += " (and full year)"
        rec["present"] = r["present"] == "1"
        rec["verified"] = verified
        if "note" in man:
            rec["note"] = man["note"]
        out.append(rec)
    with open(HERE / "truth.jsonl", "w") as f:
        for rec in out:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"wrote {len(out)} records to {HERE / 'truth.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
