"""Writes ``kb_assets/structure/vocabulary.toml`` (issue 53): the abbreviations and synonyms analysts use, mapped
to the names filings print.

    pip download edgartools==5.62.1 --no-deps -d /tmp/edgar   # read only: the product never imports it
    python benchmarks/filings/build_vocabulary.py /tmp/edgar/edgartools-5.62.1-py3-none-any.whl

The names come from a well-kept source: edgartools 5.62.1 (MIT, github dgunning/edgartools), whose
``edgar/standardization/synonym_groups.py`` groups the US-GAAP taxonomy's elements by the concept analysts
mean (``capex``: ``PaymentsToAcquirePropertyPlantAndEquipment``, ``CapitalExpenditures``,
``PurchaseOfPropertyPlantAndEquipment``, ``PaymentsToAcquireProductiveAssets``; "Capital expenditures"). Each
term below names its group: the file keeps the group's description (its label) and its US-GAAP element names,
whose words (``Payments To Acquire Property Plant And Equipment``) are the words a filing's row prints. A few
terms have no group there (effective tax rate, working capital, year over year): their element is the US-GAAP
taxonomy's own (``EffectiveIncomeTaxRateContinuingOperations``) or none. What is written by hand is the left
side: the shorthand (``asked``, a regular expression) and, where the label is not the analyst's word, the
words an analyst expands it to (``label``).
"""

from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "kb_assets" / "structure" / "vocabulary.toml"

# (asked: a regular expression, case-sensitive unless it starts with (?i); group of edgartools or None;
#  label: what the shorthand stands for, as a filing words it; extra US-GAAP elements; statement)
TERMS: list[tuple[str, str | None, str, tuple[str, ...], str]] = [
    (r"(?i)\bcap\s?-?ex\b|\bcapital spend(?:ing)?\b", "capex", "capital expenditures", (), "cash flows"),
    (r"(?i)\bopex\b|\bop\.? ?ex(?:penses?)?\b", "operating_expenses", "operating expenses", (), "income"),
    (r"(?i)\bd\s?&\s?a\b", "depreciation_and_amortization", "depreciation and amortization", (), "cash flows"),
    (r"(?i)\bpp\s?&\s?e\b|\bppe\b", "property_plant_equipment", "property, plant and equipment", (), "balance sheet"),
    (r"(?i)\bcogs\b|\bcost of goods\b", "cost_of_revenue", "cost of sales", (), "income"),
    (r"(?i)\bsg\s?&\s?a\b|\bsga\b", "sga_expense", "selling, general and administrative expenses", (), "income"),
    (r"(?i)\br\s?&\s?d\b", "research_and_development", "research and development", (), "income"),
    (r"(?i)\bg\s?&\s?a\b", None, "general and administrative expense", ("GeneralAndAdministrativeExpense",), "income"),
    (
        r"\bETRs?\b|(?i:\btax rate\b)",
        None,
        "effective tax rate",
        ("EffectiveIncomeTaxRateContinuingOperations", "IncomeTaxExpenseBenefit"),
        "income",
    ),
    (r"(?i)\bebitda\b", "ebitda", "EBITDA", ("DepreciationDepletionAndAmortization",), "income"),
    (r"\bEBIT\b|(?i:\bop\.? ?(?:income|inc|profit)\b)", "operating_income", "operating income", (), "income"),
    (r"(?i)\bop\.? ?margins?\b|\bOM\b", "operating_income", "operating margin", (), "income"),
    (r"\bEBT\b|(?i:\bpre-?tax income\b)", "income_before_tax", "income before income taxes", (), "income"),
    (r"\bNI\b|(?i:\bnet inc\b)", "net_income", "net income", (), "income"),
    (r"\bGM\b|\bGM%|(?i:\bgross margin\b)", "gross_profit", "gross margin", (), "income"),
    (r"\bEPS\b", "earnings_per_share_diluted", "earnings per share", ("EarningsPerShareBasic",), "income"),
    (r"(?i)\brevs?\b|\btop[- ]line\b", "revenue", "revenue", (), "income"),
    (r"(?i)\bfcf\b", "free_cash_flow", "free cash flow", ("NetCashProvidedByUsedInOperatingActivities",), "cash flows"),
    (
        r"\bOCF\b|\bCFF?O\b(?=.*\b(?:CFI|CFF|FCF|capex|cash|minus|less)\b)|(?i:\bcash from ops\b)",
        "operating_cash_flow",
        "net cash provided by operating activities",
        (),
        "cash flows",
    ),
    (r"\bCFI\b", "investing_cash_flow", "net cash used in investing activities", (), "cash flows"),
    (r"\bCFF\b", "financing_cash_flow", "net cash used in financing activities", (), "cash flows"),
    (r"(?i)\bdivs\b|\bdivvies\b", "dividends_paid", "dividends paid", (), "cash flows"),
    (r"(?i)\bbuy-?backs?\b", "share_repurchases", "repurchases of common stock", (), "cash flows"),
    (r"\bA/R\b|(?i:\breceivables\b)", "accounts_receivable", "accounts receivable", (), "balance sheet"),
    (r"\bA/P\b|(?i:\bpayables\b)", "accounts_payable", "accounts payable", (), "balance sheet"),
    (r"(?i)\binv[ty]\b|\binventory\b", "inventory", "inventories", (), "balance sheet"),
    (r"\bLTD\b|(?i:\bLT debt\b)", "long_term_debt", "long-term debt", (), "balance sheet"),
    (r"(?i)\bST debt\b", "short_term_debt", "short-term borrowings", (), "balance sheet"),
    (r"\bD/E\b|(?i:\bdebt/equity\b)", "long_term_debt", "debt-to-equity", ("StockholdersEquity",), "balance sheet"),
    (r"(?i)\bCA\s?/\s?CL\b", "total_current_assets", "total current assets", ("LiabilitiesCurrent",), "balance sheet"),
    (r"(?i)\bcurr(?:ent)?\.? assets\b", "total_current_assets", "total current assets", (), "balance sheet"),
    (
        r"(?i)\bcurr(?:ent)?\.? liabs?\b|\bliabs\b",
        "total_current_liabilities",
        "total current liabilities",
        (),
        "balance sheet",
    ),
    (r"\bN?WC\b", None, "working capital", ("AssetsCurrent", "LiabilitiesCurrent"), "balance sheet"),
    (
        r"(?i)\bcash (?:&|and) equiv(?:alent)?s?\b",
        "cash_and_equivalents",
        "cash and cash equivalents",
        (),
        "balance sheet",
    ),
    (r"\bROE\b", "return_on_equity", "return on equity", (), "income"),
    (r"\bROA\b", "return_on_assets", "return on assets", (), "income"),
    (r"\bBVPS\b", "book_value_per_share", "book value per share", (), "balance sheet"),
    (r"\bSBC\b|(?i:\bstock comp\b)", None, "stock-based compensation", ("ShareBasedCompensation",), "cash flows"),
    (
        r"\bAOCI\b",
        "accumulated_other_comprehensive_income",
        "accumulated other comprehensive income",
        (),
        "balance sheet",
    ),
    (r"\bAPIC\b", "additional_paid_in_capital", "additional paid-in capital", (), "balance sheet"),
    (r"\bRPO\b", None, "remaining performance obligations", ("RevenueRemainingPerformanceObligation",), "revenue"),
    (r"(?i)\bint(?:erest)?\.? exp\.?\b", "interest_expense", "interest expense", (), "income"),
    (r"(?i)\byoy\b|\by/y\b", None, "year over year", (), ""),
    (r"\bB/S\b|(?i:\bbal\.? sheet\b)", None, "balance sheet", (), "balance sheet"),
    (r"\bI/S\b", None, "income statement", (), "income"),
    (r"\bCFS\b|(?i:\bCF stmt\b|\bcash flow stmt\b)", None, "cash flow statement", (), "cash flows"),
    (r"(?i)\bm\s?&\s?a\b", None, "acquisitions", ("PaymentsToAcquireBusinessesNetOfCashAcquired",), "acquisitions"),
]


def groups(wheel: Path) -> dict[str, tuple[str, list[str]]]:
    """edgartools' synonym groups: name -> (description, US-GAAP element names)."""
    with zipfile.ZipFile(wheel) as z:
        source = z.read("edgar/standardization/synonym_groups.py").decode()
    found = {}
    for match in re.finditer(
        r"SynonymGroup\(\s*name='([^']+)',\s*synonyms=\[(.*?)\],\s*description='([^']*)'", source, re.S
    ):
        names = [n for n in re.findall(r"'([A-Za-z]+)'", match.group(2))]
        found[match.group(1)] = (match.group(3), names)
    return found


def toml_string(value: str) -> str:
    return "'" + value + "'" if "'" not in value else '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main() -> None:
    wheel = Path(sys.argv[1])
    known = groups(wheel)
    lines = [
        "# Analysts' shorthand mapped to the names filings print (issue 53). Written by",
        "# benchmarks/filings/build_vocabulary.py from edgartools 5.62.1 (MIT) synonym groups: do not edit by hand.",
        "# asked: the shorthand (a Python regular expression; case-sensitive unless it starts with (?i));",
        "# label: what it stands for; group / description / us_gaap: edgartools' group, its description and its",
        "# US-GAAP element names (their words are the words a filing's row prints); statement: where it is printed.",
        "",
    ]
    for asked, group, label, extra, statement in TERMS:
        description, elements = known[group] if group else ("", [])
        lines += [
            "[[term]]",
            f"asked = {toml_string(asked)}",
            f"label = {toml_string(label)}",
            f"group = {toml_string(group or '')}",
            f"description = {toml_string(description)}",
            "us_gaap = [" + ", ".join(toml_string(e) for e in dict.fromkeys([*elements, *extra])) + "]",
            f"statement = {toml_string(statement)}",
            "",
        ]
    OUT.write_text("\n".join(lines))
    print(f"{len(TERMS)} terms -> {OUT}")


if __name__ == "__main__":
    main()
