"""Builds analyst_questions.jsonl (issue 44): analysts' questions in FinanceBench's domain-relevant templates on
development filings (never a held-out one, never a test2 issuer), each quote checked on its labelled pages
(``pagetext.exact_on_pages``); problems are printed.

    python benchmarks/filings/build_analyst_questions.py [DATA_DIR]
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from heldout import guard  # noqa: E402
from pagetext import exact_on_pages, page_texts  # noqa: E402

D = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/data/financebench")  # DATA_DIR (fetch_filings.py)
QUICK = (
    "Does {c} have a reasonably healthy liquidity profile based on its quick ratio for {y}? If the quick "
    "ratio is not relevant to measure liquidity, please state that and explain why."
)
WC = (
    "Does {c} have positive working capital based on {y} data? If working capital is not a useful or "
    "relevant metric for this company, then please state that and explain why."
)
CFMIX = (
    "Among operations, investing, and financing activities, which brought in the most (or lost the least)"
    " cash flow for {c} in {y}?"
)
REG = "Which debt securities are registered to trade on a national securities exchange under {c}'s name as of {y}?"
INV = (
    "Roughly how many times has {c} sold its inventory in {y}? Calculate inventory turnover ratio for the"
    " {y}; if conventional inventory management is not meaningful for the company then state that and "
    "explain why."
)
DIV = "Has {c} paid dividends to common shareholders in {y}?"
DEBT = "Has {c} increased its debt on balance sheet between {y} and the {p} period?"
RESTR = (
    "What is the quantity of restructuring costs directly outlined in {c}'s income statements for {y}? If"
    " restructuring costs are not explicitly outlined then state 0."
)
CAPINT = "Is {c} a capital-intensive business based on {y} data?"
GM = (
    "Does {c} have an improving gross margin profile as of {y}? If gross margin is not a useful metric "
    "for a company like this, then please state that and explain why."
)
OPM = (
    "What drove operating margin change as of {y} for {c}? If operating margin is not a useful metric for"
    " a company like this, then please state that and explain why."
)
REV = "What drove revenue change as of {y} for {c}?"
PROD = "What are the major products and services that {c} sells as of {y}?"
ACQ = "What are major acquisitions that {c} has done in {y} and {p}?"
BUY = "How much did {c} spend on share repurchases in {y}, and how does that compare to {p}?"
ROWS = [
    # doc, issuer, name, year label, prior label, template, pages, quotes
    (
        "doc-069",
        "Apple",
        "Apple",
        "FY2022",
        "FY2021",
        QUICK,
        [33],
        ["Total current assets", "Total current liabilities"],
    ),
    (
        "doc-069",
        "Apple",
        "Apple",
        "FY2022",
        "FY2021",
        REG,
        [0],
        ["Securities registered pursuant to Section 12(b) of the Act", "0.000% Notes due 2025"],
    ),
    ("doc-069", "Apple", "Apple", "FY2022", "FY2021", GM, [25], ["gross margin percentage"]),
    ("doc-069", "Apple", "Apple", "FY2022", "FY2021", CFMIX, [35], ["investing activities", "financing activities"]),
    (
        "doc-035",
        "Amazon",
        "Amazon",
        "FY2019",
        "FY2018",
        WC,
        [39],
        ["Total current assets", "Total current liabilities"],
    ),
    ("doc-035", "Amazon", "Amazon", "FY2019", "FY2018", CFMIX, [36], ["investing activities", "financing activities"]),
    ("doc-035", "Amazon", "Amazon", "FY2019", "FY2018", INV, [37, 39], ["Inventories", "Cost of sales"]),
    (
        "doc-060",
        "American Water Works",
        "American Water Works",
        "FY2022",
        "FY2021",
        CFMIX,
        [84],
        ["investing activities", "financing activities"],
    ),
    (
        "doc-060",
        "American Water Works",
        "American Water Works",
        "FY2022",
        "FY2021",
        DIV,
        [48],
        ["Holders of the Company's common stock are entitled to receive dividends"],
    ),
    (
        "doc-075",
        "Best Buy",
        "Best Buy",
        "FY2019",
        "FY2018",
        QUICK,
        [51],
        ["Total current assets", "Total current liabilities"],
    ),
    ("doc-075", "Best Buy", "Best Buy", "FY2019", "FY2018", DIV, [23], ["Market Information and Dividends"]),
    ("doc-075", "Best Buy", "Best Buy", "FY2019", "FY2018", RESTR, [52], ["Restructuring charges"]),
    (
        "doc-075",
        "Best Buy",
        "Best Buy",
        "FY2019",
        "FY2018",
        INV,
        [51, 52],
        ["Merchandise inventories", "Cost of goods sold"],
    ),
    (
        "doc-122",
        "Costco",
        "Costco",
        "FY2022",
        "FY2021",
        WC,
        [37],
        ["Total current assets", "Total current liabilities"],
    ),
    ("doc-122", "Costco", "Costco", "FY2022", "FY2021", DIV, [19], ["Market Information and Dividend Policy"]),
    ("doc-122", "Costco", "Costco", "FY2022", "FY2021", CFMIX, [39], ["investing activities", "financing activities"]),
    (
        "doc-142",
        "eBay",
        "eBay",
        "FY2022",
        "FY2021",
        REG,
        [0],
        ["Securities registered pursuant to Section 12(b) of the Act"],
    ),
    ("doc-142", "eBay", "eBay", "FY2022", "FY2021", DIV, [30], ["Dividend Policy"]),
    ("doc-142", "eBay", "eBay", "FY2022", "FY2021", QUICK, [57], ["Total current assets", "Total current liabilities"]),
    ("doc-142", "eBay", "eBay", "FY2022", "FY2021", CFMIX, [61], ["investing activities", "financing activities"]),
    (
        "doc-165",
        "General Mills",
        "General Mills",
        "FY2023",
        "FY2022",
        REG,
        [0],
        ["Securities registered pursuant to Section 12(b) of the Act"],
    ),
    (
        "doc-165",
        "General Mills",
        "General Mills",
        "FY2023",
        "FY2022",
        WC,
        [43],
        ["Total current assets", "Total current liabilities"],
    ),
    (
        "doc-165",
        "General Mills",
        "General Mills",
        "FY2023",
        "FY2022",
        CFMIX,
        [45],
        ["investing activities", "financing activities"],
    ),
    (
        "doc-165",
        "General Mills",
        "General Mills",
        "FY2023",
        "FY2022",
        ACQ,
        [49],
        ["ACQUISITION AND DIVESTITURES", "we acquired TNT Crust"],
    ),
    (
        "doc-204",
        "Kraft Heinz",
        "Kraft Heinz",
        "FY2019",
        "FY2018",
        QUICK,
        [51],
        ["Total current assets", "Total current liabilities"],
    ),
    (
        "doc-204",
        "Kraft Heinz",
        "Kraft Heinz",
        "FY2019",
        "FY2018",
        CFMIX,
        [53],
        ["investing activities", "financing activities"],
    ),
    (
        "doc-204",
        "Kraft Heinz",
        "Kraft Heinz",
        "FY2019",
        "FY2018",
        REG,
        [0],
        ["Securities registered pursuant to Section 12(b) of the Act"],
    ),
    (
        "doc-214",
        "Lockheed Martin",
        "Lockheed Martin",
        "FY2021",
        "FY2020",
        WC,
        [67],
        ["Total current assets", "Total current liabilities"],
    ),
    (
        "doc-214",
        "Lockheed Martin",
        "Lockheed Martin",
        "FY2021",
        "FY2020",
        CFMIX,
        [68],
        ["investing activities", "financing activities"],
    ),
    ("doc-214", "Lockheed Martin", "Lockheed Martin", "FY2021", "FY2020", CAPINT, [68], ["Capital expenditures"]),
    ("doc-234", "MGM Resorts", "MGM Resorts", "FY2021", "FY2020", DEBT, [63], ["Long-term debt"]),
    (
        "doc-234",
        "MGM Resorts",
        "MGM Resorts",
        "FY2021",
        "FY2020",
        CFMIX,
        [66],
        ["investing activities", "financing activities"],
    ),
    (
        "doc-234",
        "MGM Resorts",
        "MGM Resorts",
        "FY2021",
        "FY2020",
        QUICK,
        [63],
        ["Total current assets", "Total current liabilities"],
    ),
    ("doc-247", "Microsoft", "Microsoft", "FY2023", "FY2022", CFMIX, [60], ["CASH FLOWS STATEMENTS"]),
    (
        "doc-247",
        "Microsoft",
        "Microsoft",
        "FY2023",
        "FY2022",
        OPM,
        [43],
        ["Operating income increased $5.1 billion or 6%"],
    ),
    ("doc-247", "Microsoft", "Microsoft", "FY2023", "FY2022", DIV, [37], ["SHARE REPURCHASES AND DIVIDENDS"]),
    (
        "doc-255",
        "Netflix",
        "Netflix",
        "FY2022",
        "FY2021",
        DIV,
        [19],
        ["We have never declared or paid any cash dividends"],
    ),
    (
        "doc-255",
        "Netflix",
        "Netflix",
        "FY2022",
        "FY2021",
        QUICK,
        [42],
        ["Total current assets", "Total current liabilities"],
    ),
    ("doc-255", "Netflix", "Netflix", "FY2022", "FY2021", OPM, [21], ["Operating margin"]),
    ("doc-264", "Nike", "Nike", "FY2022", "FY2021", GM, [35], ["GROSS MARGIN FISCAL 2022 COMPARED TO FISCAL 2021"]),
    ("doc-264", "Nike", "Nike", "FY2022", "FY2021", WC, [59], ["Total current assets", "Total current liabilities"]),
    ("doc-264", "Nike", "Nike", "FY2022", "FY2021", CFMIX, [60], ["investing activities", "financing activities"]),
    (
        "doc-274",
        "Oracle",
        "Oracle",
        "FY2023",
        "FY2022",
        REG,
        [0],
        ["Securities registered pursuant to Section 12(b) of the Act"],
    ),
    ("doc-274", "Oracle", "Oracle", "FY2023", "FY2022", DEBT, [65], ["Notes payable"]),
    ("doc-274", "Oracle", "Oracle", "FY2023", "FY2022", CFMIX, [69], ["investing activities", "financing activities"]),
    (
        "doc-326",
        "Verizon",
        "Verizon",
        "FY2021",
        "FY2020",
        REG,
        [0],
        ["Securities registered pursuant to Section 12(b) of the Act"],
    ),
    (
        "doc-326",
        "Verizon",
        "Verizon",
        "FY2021",
        "FY2020",
        CFMIX,
        [53],
        ["investing activities", "financing activities"],
    ),
    ("doc-326", "Verizon", "Verizon", "FY2021", "FY2020", DIV, [37], ["Dividends"]),
    (
        "doc-070",
        "Apple",
        "Apple",
        "Q3 of FY2023",
        "Q3 of FY2022",
        QUICK,
        [5],
        ["Total current assets", "Total current liabilities"],
    ),
    (
        "doc-236",
        "MGM Resorts",
        "MGM Resorts",
        "Q2 of FY2023",
        "Q2 of FY2022",
        WC,
        [2],
        ["Total current assets", "Total current liabilities"],
    ),
]
out, fails = [], []
for n, (doc, issuer, name, y, p, template, pages, quotes) in enumerate(ROWS, 1):
    texts = page_texts(D / "pdfs" / f"{guard(doc)}.pdf", sorted(set(pages)), D / "text")
    for q in quotes:
        if not exact_on_pages(q, [texts[x] for x in pages]):
            fails.append((n, doc, pages, q))
    for x in pages:
        if not any(exact_on_pages(q, [texts[x]]) for q in quotes):
            fails.append((n, doc, x, "page holds no quote"))
    out.append(
        {
            "id": f"a-{n:03d}",
            "doc": doc,
            "issuer": issuer,
            "question": template.format(c=name, y=y, p=p),
            "answer": "",
            "evidence_text": quotes,
            "pages": pages,
            "type": "analysis",
            "source": "written",
            "question_type": "domain-relevant",
        }
    )
print(len(out), "questions;", len({r["issuer"] for r in out}), "issuers;", fails)
(HERE / "analyst_questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out))
