"""Detail questions (issue 15) as plain functions: the reader's passage, BM25 content words, English
words for Chinese queries, the pageindex assembly and answer-in-context scoring."""

import pytest

from kb_assets.retrieval.context import coverage, occurrences, page_passage, passages, question_terms, rarity
from kb_assets.retrieval.crosslingual import english_words
from kb_assets.retrieval.evaluation import answer_in, first_answer_rank
from kb_assets.retrieval.lexical_query import bm25_query, code_tokens
from kb_assets.retrieval.query import dense_query_text
from kb_assets.retrieval.rerank import features, question_words, rerank
from kb_assets.retrieval.strategies.pageindex import assemble

PAGE = (
    "2.2 Help options\n\nR by default provides help pages as plain text displayed in a pager. "
    + "Filler sentence about nothing in particular. " * 12
    + "\n\nThe HTML pages are generated when packages are installed if you configure with "
    "--enable-prebuilt-html. " + "Another filler sentence. " * 20
)


def test_passage_holds_the_chunk_and_the_neighbouring_detail():
    chunk = "The HTML pages are generated when packages are installed if you configure with"
    passage = page_passage(PAGE, chunk, ["html", "configure", "prebuilt"], budget=300)
    assert len(passage) <= 300
    assert chunk in passage
    assert "--enable-prebuilt-html" in passage


def test_passage_never_exceeds_the_budget_and_cuts_no_word():
    for chunk in ("2.2 Help options", "Another filler sentence.", "not on the page at all " * 50):
        passage = page_passage(PAGE, chunk, ["filler"], budget=200)
        assert len(passage) <= 200
    passage = page_passage(PAGE, "Filler sentence about nothing", ["pager"], budget=120)
    assert passage.split()[0] in PAGE.split() and passage.split()[-1] in PAGE.split()


def test_short_page_is_its_own_passage():
    assert page_passage("one short page", "short", [], budget=800) == "one short page"


def test_chunk_found_across_different_line_breaks():
    page = "first line\nsecond   line of the\nchunk text here\n" + "x " * 600
    passage = page_passage(page, "second line of the chunk text here", [], budget=100)
    assert "chunk text here" in passage


def test_identifiers_and_code_tokens_are_kept_whole():
    assert code_tokens("How can write.table escape a quote? Does get() or --no-same-owner help?") == [
        "write.table",
        "get()",
        "--no-same-owner",
    ]
    assert code_tokens("Which fileEncoding handles UTF-8 on ISO9660?") == ["fileencoding", "utf-8", "iso9660"]
    assert code_tokens("How do I make R start quickly?") == []
    assert "write.table" in question_terms("How can write.table escape a quote?")


def test_terms_match_at_word_starts_and_chinese_across_line_breaks():
    text = "C code; cat; reinstall; Installation; 时间\n源"
    found = occurrences(["c", ("install", "installed"), "时间源"], text)
    assert found[("c",)] == [(0, 1)]  # one letter: a whole word only, not the c of ``cat``
    assert len(found[("install", "installed")]) == 1  # ``Installation``, not ``reinstall``
    [(start, end)] = found[("时间源",)]  # a PDF line break inside the Chinese word
    assert text[start:end] == "时间\n源"


def test_a_term_on_every_page_weighs_less_than_one_on_a_single_page():
    terms = ["table", "qmethod"]
    weights = rarity([occurrences(terms, text) for text in ["read.table ...", "write.table qmethod", "table"]])
    assert weights[("qmethod",)] > weights[("table",)] > 0


def test_the_window_favours_the_rare_term_and_a_pages_second_result_shows_new_text():
    page = (
        "table " * 30
        + "filler words here. " * 40
        + "use qmethod double to escape a quote in the table. "
        + "more filler text. " * 40
        + "the second chunk sits at the end of the page."
    )
    terms = ["table", "qmethod", "quote"]
    weights = rarity([occurrences(terms, text) for text in [page, "table one", "table two", "table three"]])
    passage = page_passage(page, "filler words here.", terms, budget=200, weights=weights)
    assert "qmethod double" in passage and len(passage) <= 200
    rows = [
        {"documentId": "d", "pageIndex": 0, "content": "more filler text."},
        {"documentId": "d", "pageIndex": 0, "content": "the second chunk sits at the end of the page."},
    ]
    passages(rows, {("d", 0): page}, terms, 200)
    assert "qmethod" in rows[0]["context"]
    assert "the second chunk sits at the end of the page." in rows[1]["context"]
    assert coverage(occurrences(terms, "nothing here"), 12) == 0
    assert coverage(occurrences(terms, page), len(page), weights, 200) == pytest.approx(1.0)


def test_bm25_query_keeps_content_words_only():
    assert bm25_query("怎样检查一台机器是不是在用外部的时间源？").split() == [
        "检查",
        "一台",
        "机器",
        "不是",
        "外部",
        "时间",
        "源",
    ]
    assert bm25_query("Which configure switch builds the HTML help?") == "configure switch builds HTML help"
    assert bm25_query("什么？") == "什么？"  # nothing left: the query as it is


def test_answer_in_context_normalizes_whitespace_and_case():
    assert answer_in("--enable-prebuilt-html", "configure with\n--Enable-Prebuilt-HTML.")
    assert answer_in("fill = TRUE", "use fill   =\nTRUE here")
    assert not answer_in("106 种语言", "支持 106 种\n语言", "en")
    assert answer_in("106 种语言", "支持 106 种\n语言", "zh")  # Chinese: whitespace removed counts too
    # a Markdown table's cell separators read as spaces; a pipe the answer holds still has to be there
    assert answer_in("Admitted Male 512", "| Admitted Male | 512 353 120 |")
    assert answer_in("ls | sort", "run ls | sort")
    assert not answer_in("ls | sort", "run ls sort")
    assert answer_in("%xyz% |>", "| - + : %xyz% \\|> * / | (unary) |")
    # typographic quotes read as ASCII ones (the PDF's “服务器” is "服务器" in docling-parse's text)
    assert answer_in("是挪威语“服务器”之意", '（主机名"tjener"是挪威语"服务器"之意）', "zh")
    assert answer_in("don’t", "you don't need it") and not answer_in('"a"', "'a'")


def test_answer_rank_reads_the_context_when_there_is_one():
    question = {"answer": "setarch i686 R", "lang": "en"}
    results = [
        {"content": "setarch i686 R", "context": "a passage without it"},
        {"content": "x", "context": "run setarch i686 R to start"},
    ]
    assert first_answer_rank(results, question) == 2


def test_chinese_query_words_get_english_words_from_the_packaged_dictionary():
    words = english_words("怎样检查一台机器是不是在用外部的时间源？")
    assert {"examine", "machine", "external", "time", "source"} <= set(words)
    assert "isn't" not in words and "what" not in words  # question and function words give nothing
    assert english_words("Which configure switch?") == []  # nothing Chinese: nothing to translate


def test_translate_policy_lets_the_model_read_the_dictionary_words_at_a_configured_share():
    english = english_words("数据备份保留多少天")
    text, share, warning = dense_query_text("数据备份保留多少天", ("en",), "translate", english, 0.5)
    assert text == " ".join(english) and "backup" in text and share == 0.5 and "dictionary" in warning
    text, share, _ = dense_query_text("analytics 数据备份", ("en",), "translate", english_words("数据备份"), 0.5)
    assert text.startswith("analytics ") and 0.5 < share < 1
    # no dictionary word: as ``share`` (Latin words only, or BM25 alone)
    assert dense_query_text("数据备份", ("en",), "translate", [], 0.5) == dense_query_text("数据备份", ("en",), "share")
    assert dense_query_text("数据备份", ("en", "zh"), "translate", english, 0.5) == ("数据备份", 1.0, None)
    assert dense_query_text("数据备份", ("en",), "translate", english)[1] == 0.5  # default: half a word each
    assert bm25_query("数据备份", ["data", "backup"]).split()[-2:] == ["data", "backup"]


def _row(page: int, chunk: int, score: float) -> dict:
    return {"documentId": "d", "pageIndex": page, "chunkIndex": chunk, "score": score, "scores": {}}


def test_a_page_gives_its_best_chunk_at_its_rank_and_a_second_separate_one_at_its_own_score():
    by_page = {
        ("d", 1): [_row(1, 4, 0.9), _row(1, 5, 0.85), _row(1, 8, 0.5), _row(1, 0, 0.4)],
        ("d", 2): [_row(2, 1, 0.7)],
        ("d", 3): [_row(3, 2, 0.95)],
    }
    relevance = {("d", 1): 1.1, ("d", 2): 0.7, ("d", 3): 0.95}
    rows = assemble(by_page, relevance, toc={("d", 3)}, chunks_per_page=2)
    # page 1 first (relevance), its neighbour chunk 5 skipped, chunk 8 at its own 0.5; the TOC page last
    assert [(r["pageIndex"], r["chunkIndex"]) for r in rows] == [(1, 4), (2, 1), (1, 8), (3, 2)]
    assert [(r["pageIndex"], r["chunkIndex"]) for r in assemble(by_page, relevance, set(), 1)] == [
        (1, 4),
        (3, 2),
        (2, 1),
    ]


def test_rerank_features_count_question_words_in_any_form_and_phrases_kept_together():
    words = question_words("Where does the native pipe sit in the operator precedence list?")
    assert [w.text for w in words] == ["native", "pipe", "sit", "operator", "precedence", "list"]
    coverage, proximity = features(words, "Operators listed by precedence: the native pipe |> sits here")
    assert coverage == 1.0 and proximity == 0.8  # listed, sits count; 4 of 5 pairs within 40 chars
    assert features(words, "the position of a composite") == (0.0, 0.0)  # no word found inside another word
    chinese = question_words("怎样检查外部的时间源", {"外部": ["external"], "时间": ["time"], "源": ["source"]})
    assert features(chinese, "check whether an external time source is used")[0] == 0.75  # 检查 untranslated
    rows = [{"score": 0.5, "scores": {}, "content": "native pipe operator"}]
    rerank(rows, words, 0.1, 0.05)
    assert rows[0]["scores"]["rerank"] == round(0.5 + 0.1 * 0.5 + 0.05 * rows[0]["scores"]["proximity"], 6)


def test_a_statement_pages_context_holds_its_table_rows_and_column_headers():
    # a balance sheet page as the parser writes it (a dev filing's page): title block, then Markdown rows
    rows_text = "\n".join(
        f"| {label} |  | {a:,} | {b:,} |"
        for label, a, b in [
            ("Cash and cash equivalents", 28408, 23646),
            ("Marketable securities", 34074, 24658),
            ("Accounts receivable, net", 19549, 28184),
            ("Inventories", 7351, 4946),
            ("Vendor non-trade receivables", 19637, 32748),
            ("Other current assets", 13640, 21223),
            ("Total current assets", 122659, 135405),
            ("Property, plant and equipment, net", 43550, 42117),
            ("Other non-current assets", 64768, 54428),
            ("Total non-current assets", 212379, 217350),
            ("Accounts payable", 46699, 64115),
            ("Deferred revenue", 8158, 7912),
            ("Commercial paper", 3993, 9982),
            ("Term debt", 7216, 11128),
        ]
    )
    title = "CONDENSED CONSOLIDATED BALANCE SHEETS (Unaudited)\n\n(In millions)\n\nJuly 1, 2023\n\nSeptember 24, 2022"
    page = f"{title}\n\n{rows_text}\n\nSee accompanying Notes to Condensed Consolidated Financial Statements."
    terms = question_terms("What were the inventories at the end of the quarter?")
    for table_budget, held in ((0, False), (2000, True)):
        rows = [{"documentId": "d", "pageIndex": 0, "content": title}]
        passages(rows, {("d", 0): page}, terms, 300, table_budget=table_budget)
        assert ("| Term debt |" in rows[0]["context"]) is held
        assert "July 1, 2023" in rows[0]["context"] and len(rows[0]["context"]) <= max(300, table_budget)
    # a prose page keeps the ordinary budget
    prose = "Inventories are stated at the lower of cost and net realisable value. " * 20
    rows = [{"documentId": "d", "pageIndex": 1, "content": prose[:80]}]
    passages(rows, {("d", 1): prose}, terms, 300, table_budget=2000)
    assert len(rows[0]["context"]) <= 300


def test_a_table_pages_evidence_keeps_its_head_and_the_rows_asked_within_the_budget():
    # a long statement page: its head (title, units, the periods of its columns), then 80 rows of figures
    head = "ACME Corp\n\nCONSOLIDATED BALANCE SHEETS\n\n(In millions)\n\nDecember 31, 2023\n\nDecember 31, 2022"
    labels = [f"Line item number {n}" for n in range(78)] + ["Inventories", "Total current liabilities"]
    body = "\n".join(f"| {label} |  | {1000 + n:,} | {900 + n:,} |" for n, label in enumerate(labels))
    page = f"{head}\n\n{body}\n\nSee accompanying notes."
    assert len(page) > 3000
    chunk = "| Inventories |  | 1,078 | 978 |\n| Total current liabilities |  | 1,079 | 979 |"
    terms = question_terms("What were ACME's total current liabilities and inventories at December 31, 2023?")
    rows = [{"documentId": "d", "pageIndex": 0, "content": chunk}]
    passages(rows, {("d", 0): page}, terms, 800, table_budget=2000)
    context = rows[0]["context"]
    assert context.startswith(head.split("\n")[0]) and "December 31, 2022" in context  # the head, with its periods
    assert "| Total current liabilities | 1,079 | 979 |" in context  # the row asked for, without its empty cells
    assert "| Inventories | 1,078 | 978 |" in context
    assert len(context) + len(chunk) <= 2000


def test_a_table_page_gives_the_rows_of_the_asked_analysis_line_items_and_the_whole_table_when_it_fits():
    head = "ACME Corp\n\nCONSOLIDATED BALANCE SHEETS\n\n(In millions)\n\nDecember 31, 2023\n\nDecember 31, 2022"
    labels = ["Total current assets"] + [f"Line item number {n}" for n in range(70)] + ["Total current liabilities"]
    body = "\n".join(f"| {label} |  | $ | {1000 + n:,} | {900 + n:,} |" for n, label in enumerate(labels))
    page = f"{head}\n\n{body}"
    terms = question_terms("Does ACME have a reasonably healthy liquidity profile based on its quick ratio?")
    rows = [{"documentId": "d", "pageIndex": 0, "content": "ACME Corp CONSOLIDATED BALANCE SHEETS"}]
    passages(rows, {("d", 0): page}, terms, 800, table_budget=2000)
    context = rows[0]["context"]  # two rows 70 apart, neither naming a word of the question: the ratio's inputs
    assert (
        "| Total current assets | 1,000 | 900 |" in context and "| Total current liabilities | 1,071 | 971 |" in context
    )
    short = f"{head}\n\n" + "\n".join(body.splitlines()[:20])  # a table that fits: all of it, made compact
    rows = [{"documentId": "d", "pageIndex": 1, "content": "ACME Corp"}]
    passages(rows, {("d", 1): short}, terms, 800, table_budget=2000)
    assert all(f"| {label} | {1000 + n:,} | {900 + n:,} |" in rows[0]["context"] for n, label in enumerate(labels[:20]))


def test_a_results_content_and_context_stay_within_the_budget():
    prose = "Backups are kept for 35 days and then deleted by the nightly job. " * 40
    content = prose[:390]
    rows = [{"documentId": "d", "pageIndex": 0, "content": content}]
    passages(rows, {("d", 0): prose}, question_terms("How long are backups kept?"), 800, table_budget=2000)
    assert rows[0]["context"] and len(rows[0]["context"]) <= 800  # prose: a context of 800, the chunk inside it
    assert content in rows[0]["context"] and len(rows[0]["context"]) + len(content) <= 2000
    long = [{"documentId": "d", "pageIndex": 0, "content": prose[:1500]}]
    passages(long, {("d", 0): prose}, ["backups"], 800, table_budget=2000)
    assert 0 < len(long[0]["context"]) <= 500  # what the ceiling leaves
    big = [{"documentId": "d", "pageIndex": 0, "content": "x " * 1500}]
    passages(big, {("d", 0): prose}, ["backups"], 800, table_budget=2000)
    assert big[0]["context"] == "" and len(big[0]["content"]) <= 2000  # a chunk past the ceiling is cut to it


def test_a_table_of_words_is_not_a_statement():
    from kb_assets.retrieval.context import is_table

    assert is_table("| Inventories |  | 7,351 | 4,946 |\n| Capital expenditure | (530.8) | (460.8) |")
    assert not is_table("| Option | Meaning |\n| -q | quiet: print nothing |\n| -v | verbose |")
    assert not is_table("Inventories are stated at cost.")


def test_a_prose_passage_holds_the_sentences_with_the_terms_and_figures_not_one_window():
    filler = "The company continued to invest in its stores and its people across every region it serves. " * 8
    page = (
        "Gross margin decreased in fiscal 2023. "
        + filler
        + "The decrease was driven by higher product costs and markdowns of 200 basis points. "
        + filler
        + "Freight costs, a driver of product costs, fell late in the year."
    )
    terms = question_terms("Why did the gross margin decrease in fiscal 2023: which product costs drove it?")
    rows = [{"documentId": "d", "pageIndex": 0, "content": "Gross margin decreased in fiscal 2023."}]
    passages(rows, {("d", 0): page}, terms, 400, table_budget=2000)
    context = rows[0]["context"]
    assert "Gross margin decreased in fiscal 2023." in context  # the matched chunk's sentence
    assert "higher product costs and markdowns of 200 basis points" in context  # 700 characters further on
    assert " … " in context and len(context) <= 400


def test_a_table_page_of_scattered_rows_asked_stays_within_the_budget():
    labels = [f"Item {n} inventories" if n % 3 == 0 else f"Other line {n}" for n in range(150)]
    page = "BALANCE SHEET\n\n(In millions)\n\n" + "\n".join(
        f"| {label} |  | {n:,} | {n + 1:,} |" for n, label in enumerate(labels)
    )
    for content in ("BALANCE SHEET", "x" * 700):
        rows = [{"documentId": "d", "pageIndex": 0, "content": content}]
        passages(rows, {("d", 0): page}, question_terms("What were the inventories?"), 800, table_budget=2000)
        assert "…" in rows[0]["context"] and len(rows[0]["context"]) + len(content) <= 2000
