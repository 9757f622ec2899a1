"""Writes ``reworded_questions.jsonl`` (issue 53): development questions asked again in an analyst's own words.

An analyst does not type FinanceBench's templates: "KO's main regions as of 2021?", "NKE ETR FY23 vs FY22?",
"Walmart capex FY2020 ($bn)?": tickers, short names, fiscal shorthand (FY19, 2Q23, 1H23, Q1'23, FYE23) and the
abbreviations of the trade (capex, D&A, PP&E, COGS, SG&A, ETR, NI, GM, CFO, FCF, WC, D/E, YoY, divs, buybacks).
Each row below rewords one development question (``questions.jsonl``, ``analyst_questions.jsonl``) on a filing of
the development knowledge base; the filing, pages, evidence and type are the original's, so the two wordings are
scored side by side (``filings.py --split all``: group ``reworded``, and ``original of reworded`` for the same
questions in their first wording). Written once, before any change of issue 53 was tuned on them.

    python benchmarks/filings/build_reworded_questions.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
REWORDED = {
    # statement figures
    "fb-08286": "AMZN FY19 net income attributable to shareholders ($mm)?",
    "fb-04417": "BBY inventories at FY19 year end, $mm?",
    "fb-03531": "NKE total current assets end of FY19?",
    "fb-02024": "VZ expected retiree benefit payments for 2024 (as of FY21)?",
    "w-001": "AAPL capex FY19?",
    "w-006": "Apple divs paid FY2019 (CF stmt)?",
    "w-007": "AAPL NI FY20?",
    "w-012": "Apple tax provision FY22?",
    "w-016": "AAPL R&D FY22 ($mm)",
    "w-017": "AAPL net income fiscal 3Q23?",
    "w-022": "Apple inventory on the B/S at 7/1/23?",
    "w-023": "COST capex FY19?",
    "w-027": "Costco NI attributable FY22?",
    "w-031": "COST cash dividends paid FY2022",
    "w-035": "EBAY buybacks 2020 ($)?",
    "w-040": "eBay LT debt YE2020?",
    "w-045": "EBAY total current liabs 6/30/23",
    "w-049": "EBAY capex 2Q23 per the earnings release",
    "w-052": "GIS capex FY21?",
    "w-056": "General Mills inventories as of FYE23",
    "w-059": "LMT capex 2019",
    "w-063": "Lockheed net earnings FY19?",
    "w-064": "LMT share buybacks 2021?",
    "w-068": "LMT 2Q22 net earnings?",
    "w-073": "Lockheed capex Q1'23?",
    "w-076": "LMT total current liabs end of 1Q23",
    "w-077": "MGM buybacks FY19",
    "w-081": "MGM total revs 2019?",
    "w-082": "MGM goodwill YE21",
    "w-087": "MGM capex 1H23?",
    "w-091": "NFLX content spend 2019 (additions to streaming content assets)",
    "w-095": "NFLX net content assets YE21?",
    "w-099": "Netflix cash & equivalents end of 2021",
    "w-100": "NFLX cash paid for acquisitions 2022",
    "w-104": "NFLX content amortization FY22?",
    "w-105": "NFLX NI 2Q23",
    "w-109": "NKE PP&E additions FY19?",
    "w-114": "Nike buybacks FY2019 ($mm)",
    "w-115": "NKE inventories 5/31/22?",
    "w-119": "NKE current liabs at FYE23",
    "w-124": "Nike demand creation expense FY23",
    "w-125": "ORCL buybacks FY20?",
    "w-129": "ORCL total current liabilities FY2020 year end",
    "w-130": "Oracle capex FY22?",
    "w-134": "ORCL acquisitions net of cash acquired FY23",
    "w-138": "ORCL R&D spend FY23?",
    # ratios and comparisons
    "fb-03471": "GIS working capital ratio FY20 (CA/CL)?",
    "fb-04854": "GIS FCF FY2020 (CFO minus capex), $mm",
    "fb-01487": "JNJ net margin 2Q23 vs 2Q22: up or down?",
    "fb-10499": "KHC inventory turns FY19 (COGS / avg inventory)?",
    "fb-03031": "LMT NWC FY21?",
    "fb-04302": "NKE COGS as % of revenue, 3-yr avg through FY18",
    "fb-01163": "NKE FY23: which of CFO, CFI, CFF was biggest?",
    "w-002": "AAPL op margin FY19?",
    "w-003": "Apple current ratio FYE19?",
    "w-009": "AAPL FCF FY20?",
    "w-013": "AAPL current ratio 9/24/22 - CA enough to cover CL?",
    "w-018": "AAPL operating margin fiscal 3Q23",
    "w-029": "COST op margin FY22?",
    "w-037": "EBAY gross margin 2020",
    "w-046": "eBay op margin 2Q23?",
    "w-053": "GIS dividend payout ratio FY21?",
    "w-060": "LMT operating margin 2019",
    "w-065": "LMT FY21 YoY: net sales vs net earnings growth",
    "w-069": "LMT 2Q22 net sales decline YoY (%)?",
    "w-070": "Lockheed current ratio end of 2Q22",
    "w-074": "LMT net margin 1Q23",
    "w-092": "NFLX op margin 2019?",
    "w-093": "NFLX FCF 2019 - positive or negative?",
    "w-096": "Netflix NI growth 2021 YoY %",
    "w-097": "NFLX D/E YE21 (total debt / equity)",
    "w-101": "NFLX op margin 2022 vs 2021",
    "w-106": "NFLX operating margin 2Q23?",
    "w-110": "NKE net margin FY19",
    "w-116": "Nike GM FY22?",
    "w-120": "NKE NI change FY23 vs FY22 (%)",
    "w-121": "NKE current ratio FY23 vs FY22 - better or worse?",
    "w-127": "ORCL ETR FY20 vs FY19",
    "w-132": "ORCL op margin FY21 -> FY22",
    "w-135": "Oracle FCF FY23?",
    # explanations
    "w-005": "Why was AAPL's ETR lower in FY19 than FY18?",
    "w-010": "iPhone rev decline FY20 - why? (Apple)",
    "w-020": "AAPL services GM% down in fiscal 3Q23 - why?",
    "w-030": "COST gross margin % down in FY22 - drivers?",
    "w-044": "EBAY rev down 6% in 2022, why?",
    "w-055": "GIS ETR up to 22% in FY21 - why?",
    "w-058": "GIS op profit down 1% FY23 despite +6% sales: why?",
    "w-071": "What hit LMT earnings in 2Q22?",
    "w-079": "MGM LV Strip casino rev down in 2019 - why?",
    "w-085": "MGM revs +88% in 2021, drivers?",
    "w-086": "MGM G&A up $385mm in FY21 - why?",
    "w-090": "MGM 2Q23 rev growth drivers",
    "w-094": "NFLX cost of revenues up in 2019 - main reason?",
    "w-102": "Why did NFLX op margin fall in FY22?",
    "w-108": "NFLX ARM down 2Q23 YoY - why?",
    "w-112": "NKE ETR much lower FY19 vs FY18: why?",
    "w-113": "Nike opex (operating overhead) +13% in FY19, what drove it?",
    "w-122": "NKE GM contraction FY23 - why?",
    "w-123": "NKE ETR FY23 vs FY22 - why the jump?",
    "w-128": "ORCL hardware rev decline FY20 why",
    "w-133": "ORCL opex up in FY22, main reason?",
    # analysts' questions
    "a-001": "AAPL quick ratio FY22 - healthy liquidity?",
    "a-002": "AAPL notes listed on an exchange as of FY22?",
    "a-004": "AAPL FY22 CFO vs CFI vs CFF - which was largest?",
    "a-005": "AMZN WC positive FY19?",
    "a-007": "AMZN inventory turns FY19?",
    "a-009": "AWK paying common divs in FY22?",
    "a-010": "BBY quick ratio FY19?",
    "a-012": "BBY restructuring charges in the P&L FY19?",
    "a-015": "Does COST pay a dividend (FY22)?",
    "a-017": "EBAY exchange-listed debt securities FY22?",
    "a-019": "EBAY quick ratio FY22",
    "a-021": "GIS listed notes as of FY23?",
    "a-024": "GIS M&A in FY22-FY23?",
    "a-025": "KHC liquidity - quick ratio FY19?",
    "a-027": "KHC securities registered under 12(b) FY19?",
    "a-030": "LMT capital intensity FY21 (capex vs PP&E)?",
    "a-031": "MGM total debt up or down FY21 vs FY20?",
    "a-035": "MSFT op margin drivers FY23?",
    "a-036": "MSFT divs to common holders FY23?",
    "a-038": "NFLX quick ratio FY22?",
    "a-040": "NKE gross margin trend FY22 improving?",
    "a-044": "ORCL total debt change FY23 vs FY22?",
    "a-046": "VZ debt securities listed on an exchange, FY21?",
    "a-049": "AAPL quick ratio fiscal 3Q23",
    "a-050": "MGM working capital 2Q23 - positive?",
}


def main() -> None:
    originals = {}
    for name in ("questions.jsonl", "analyst_questions.jsonl"):
        for line in (HERE / name).read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                originals[row["id"]] = row
    types = json.loads((HERE / "financebench_types.json").read_text())
    out = []
    for number, (of, question) in enumerate(REWORDED.items(), 1):
        row = originals[of]
        kind = row.get("question_type") or types.get(row.get("financebench_id"), f"written {row['type']}")
        out.append(
            {
                "id": f"r-{number:03d}",
                "of": of,
                "doc": row["doc"],
                "issuer": row["issuer"],
                "question": question,
                "evidence_text": row["evidence_text"],
                "pages": row["pages"],
                "type": row["type"],
                "source": "reworded",
                "question_type": kind,
            }
        )
    (HERE / "reworded_questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out))
    print(f"{len(out)} reworded questions")


if __name__ == "__main__":
    main()
