"""The web page at ``/`` in a real headless Chromium (issues 14 and 34): a search returns cards that show
the passage around the hit with the question's words marked, score parts and search notes only behind a
details toggle, and each result its document's organisation, period and kind (a period filter keeps that
year's report only); a click shows the lineage with the page image loaded and the chunk's regions highlighted
inside it (a text format: its page text instead); a card opens the document view (chunks by page, a
signed link to the original); a key scoped to one knowledge base sees none of another's documents, and a
Chinese query shows Chinese results. Writes the README's screenshots (1280 wide) to docs/. Needs Debian's
chromium and chromium-driver (`make test` installs them when root)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kb_assets_tests.browser import chromium, save_screenshot, wait
from kb_assets_tests.corpora import ensure_fiscal_years, ensure_retrieval_corpus
from kb_assets_tests.live_server import live_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(kb_home, settings, handbook):
    from kb_assets.service.api import create_app

    ensure_retrieval_corpus(kb_home, settings)
    app = create_app(
        replace(settings, api_keys="alpha-key=alpha;all-key=*", url_signing_secret="page-secret"), heal=False
    )
    with live_server(app) as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with chromium(tmp_path_factory.mktemp("chromium")) as driver:
        yield driver


def sign_in(driver, site: str, key: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(site + "/")
    driver.execute_script("sessionStorage.clear()")
    driver.get(site + "/")
    wait(driver, lambda d: d.find_element(By.ID, "key-dialog").get_attribute("open") is not None)
    driver.find_element(By.ID, "key-input").send_keys(key)
    driver.find_element(By.ID, "key-save").click()
    wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#documents-kb option")) > 0)


def search(driver, query: str, kb: str = "") -> list:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, "kb")).select_by_value(kb)
    box = driver.find_element(By.ID, "query")
    box.clear()
    box.send_keys(query)
    driver.execute_script("document.getElementById('results').replaceChildren()")
    driver.find_element(By.ID, "search-button").click()
    wait(driver, lambda d: "results" in d.find_element(By.ID, "status").text)
    return driver.find_elements(By.CSS_SELECTOR, "#results .result")


def test_search_then_lineage_shows_the_page_image_with_the_chunk_highlighted(site, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    sign_in(browser, site, "all-key")
    results = search(browser, "How long are backups kept?", "handbook")
    assert results
    pdf = next(r for r in results if r.find_elements(By.CSS_SELECTOR, "img.thumb"))
    wait(
        browser,
        lambda d: all(
            d.execute_script("return arguments[0].naturalWidth", img) > 0
            for img in d.find_elements(By.CSS_SELECTOR, "img.thumb")
        ),
    )
    assert "§" in pdf.text and "score" in pdf.text
    save_screenshot(browser, "web-search.png")

    pdf.find_element(By.TAG_NAME, "button").click()
    image = wait(browser, lambda d: d.find_element(By.ID, "page-image"))
    wait(browser, lambda d: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", image) > 0)
    regions = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#page-frame .region"))
    frame = image.rect
    assert frame["width"] > 0
    for region in regions:
        box = region.rect
        assert box["width"] > 0 and box["height"] > 0
        assert frame["x"] - 1 <= box["x"] and box["x"] + box["width"] <= frame["x"] + frame["width"] + 1
        assert frame["y"] - 1 <= box["y"] and box["y"] + box["height"] <= frame["y"] + frame["height"] + 1
    facts = browser.find_element(By.ID, "lineage").text
    assert "sha256" in facts.lower() and "chunks" in facts
    assert browser.find_elements(By.CSS_SELECTOR, "#page-text mark")
    save_screenshot(browser, "web-lineage.png")

    before = browser.find_element(By.ID, "page-label").text
    browser.find_element(By.ID, "lineage").send_keys(Keys.ARROW_RIGHT)  # the next page, one key press
    wait(browser, lambda d: d.find_element(By.ID, "page-label").text != before)


def test_a_chinese_query_shows_chinese_results_at_phone_width(site, browser):
    from selenium.webdriver.common.by import By

    sign_in(browser, site, "all-key")
    browser.set_window_size(390, 844)
    try:
        results = search(browser, "数据备份保留多久？", "handbook")
        assert results and "数据备份保留 35 天" in results[0].text
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        results[0].find_element(By.TAG_NAME, "button").click()  # the lineage fits a phone too
        wait(browser, lambda d: d.find_element(By.ID, "lineage").is_displayed())
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        browser.set_window_size(1280, 900)


def test_a_key_scoped_to_one_knowledge_base_sees_no_other_documents(site, browser):
    from selenium.webdriver.common.by import By

    sign_in(browser, site, "alpha-key")
    choices = [o.get_attribute("value") for o in browser.find_elements(By.CSS_SELECTOR, "#kb option")]
    assert choices == ["", "alpha"]
    results = search(browser, "How long are warehouse backups kept?")
    assert results and not any("Analytics warehouse" in r.text or "13 months" in r.text for r in results)
    browser.find_element(By.ID, "tab-documents").click()
    rows = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#documents-table tbody tr"))
    assert rows and not any("warehouse.md" in r.text for r in rows)
    assert (
        browser.execute_script(
            "return fetch('/v1/knowledge-bases/beta/documents', {headers: {Authorization: 'Bearer alpha-key'}})"
            ".then(r => r.status)"
        )
        == 404
    )


# internal names of the ranking that the default view must not show (they are behind <details>)
INTERNALS = ("dense", "lexical", "bm25", "exactboost", "weight", "non-chinese", "rerank")


def visible_text(driver) -> str:
    """What the search view shows of an answer: the status, the notes' summary and the result cards (not
    the form: the knowledge-base list names the session's knowledge bases, one of them "lexical")."""
    from selenium.webdriver.common.by import By

    return " ".join(driver.find_element(By.ID, part).text for part in ("status", "notes", "results")).lower()


def test_cards_show_the_passage_with_the_question_words_marked_and_scores_only_behind_details(site, browser):
    from selenium.webdriver.common.by import By

    sign_in(browser, site, "all-key")
    results = search(browser, "How long are backups kept?", "handbook")
    card = next(r for r in results if "Backups are kept for 35 days" in r.text)  # the answer, not cut off
    marks = [m.text.lower() for m in card.find_elements(By.CSS_SELECTOR, ".passage mark")]
    assert "backups" in marks and "kept" in marks
    assert not any(word in visible_text(browser) for word in INTERNALS)
    card.find_element(By.CSS_SELECTOR, "details.why summary").click()
    assert "dense" in card.find_element(By.CSS_SELECTOR, "details.why").text

    search(browser, "数据备份保留多久？", "handbook")  # a Chinese question: the language policy's note
    assert not any(word in visible_text(browser) for word in INTERNALS)
    notes = browser.find_element(By.ID, "notes")
    assert notes.is_displayed() and "dense" not in notes.text
    notes.find_element(By.TAG_NAME, "summary").click()
    assert "dense score" in notes.text


def test_a_result_opens_its_document_with_every_chunk_by_page_and_a_signed_link_to_the_original(site, browser):
    from selenium.webdriver.common.by import By

    sign_in(browser, site, "all-key")
    results = search(browser, "How long are backups kept?", "handbook")
    card = next(r for r in results if "Backups are kept for 35 days" in r.text)
    card.find_element(By.XPATH, ".//button[contains(., 'All chunks')]").click()
    view = wait(
        browser,
        lambda d: d.find_element(By.ID, "view-document") if d.find_elements(By.CSS_SELECTOR, ".doc-page") else None,
    )
    assert view.is_displayed() and not browser.find_element(By.ID, "view-search").is_displayed()
    pages = browser.find_elements(By.CSS_SELECTOR, ".doc-page")
    assert len(pages) > 1 and all(p.find_elements(By.CSS_SELECTOR, ".chunk-text") for p in pages)
    active = browser.find_element(By.CSS_SELECTOR, ".chunk.active")
    assert "Backups are kept for 35 days" in active.text and active.is_displayed()
    link = browser.find_element(By.ID, "document-file").get_attribute("href")
    assert "/file?" in link and "&s=" in link
    fetched = "return fetch(arguments[0]).then(r => [r.status, r.headers.get('content-type')])"
    assert browser.execute_script(fetched, link) == [200, "application/pdf"]  # no key sent: the URL is its proof
    assert browser.execute_script(fetched, link[:-1] + ("0" if link[-1] != "0" else "1"))[0] == 403
    browser.execute_script("window.scrollTo(0, 0)")
    save_screenshot(browser, "web-document.png")


def test_a_text_format_shows_its_page_text_where_the_image_would_be(site, browser):
    from selenium.webdriver.common.by import By

    sign_in(browser, site, "all-key")
    results = search(browser, "How long are backups kept?", "alpha")  # backups.md: no page image
    results[0].find_element(By.TAG_NAME, "button").click()
    sheet = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#page-figure #page-text"))
    wait(browser, lambda d: sheet.is_displayed() and "35 days" in sheet.text)
    assert not browser.find_element(By.ID, "page-frame").is_displayed()
    assert "35 days" in sheet.find_element(By.TAG_NAME, "mark").text
    assert not browser.find_element(By.ID, "page-text-title").is_displayed()
    rows = browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
    assert [r.text.split()[0] for r in rows] == [
        "parsed_pages",
        "pageindex_trees",
        "chunks",
        "embeddings",
        "milvus_collection",
    ]


@pytest.fixture(scope="module")
def filings_site(kb_home, settings):
    """A service over Initech's annual reports for fiscal 2022 and 2023 (``filings``), and their file names."""
    from kb_assets.service.api import create_app

    years = ensure_fiscal_years(kb_home, settings)
    app = create_app(replace(settings, api_keys="filings-key=filings", url_signing_secret="page-secret"), heal=False)
    with live_server(app) as url:
        yield url, years


def test_a_period_filter_shows_only_that_years_report_with_its_metadata(filings_site, browser):
    from selenium.webdriver.common.by import By

    site, years = filings_site
    sign_in(browser, site, "filings-key")
    everything = search(browser, "What was the net revenue?", "filings")
    assert {"FY2022", "FY2023"} <= {r.find_element(By.CSS_SELECTOR, ".about").text.split(" · ")[1] for r in everything}

    browser.find_element(By.ID, "period").send_keys("FY2022")
    results = search(browser, "What was the net revenue?", "filings")
    assert results
    for card in results:
        assert card.find_element(By.CSS_SELECTOR, ".about").text == "Initech Corporation · FY2022 · annual report"
        assert "December 31, 2022" in card.text and "2023" not in card.text
    results[0].find_element(By.XPATH, ".//button[contains(., 'All chunks')]").click()  # the document view too
    facts = wait(browser, lambda d: d.find_element(By.ID, "document-facts").text)
    assert "Initech Corporation · FY2022 · annual report" in facts
    browser.find_element(By.ID, "tab-search").click()

    browser.find_element(By.ID, "period").clear()
    browser.find_element(By.ID, "period").send_keys("last year")  # no year: the API's reason, on the page
    browser.find_element(By.ID, "search-button").click()
    wait(browser, lambda d: "names no year" in d.find_element(By.ID, "status").text)
    assert "period" in browser.find_element(By.ID, "status").text


def test_a_table_in_a_passage_is_a_table_and_each_card_links_its_original(site, browser):
    from selenium.webdriver.common.by import By

    sign_in(browser, site, "all-key")
    results = search(browser, "Which team owns the search service in the service catalog?", "handbook")
    card = next(r for r in results if r.find_elements(By.CSS_SELECTOR, ".passage table"))
    table = card.find_element(By.CSS_SELECTOR, ".passage table")
    rows = table.find_elements(By.CSS_SELECTOR, "tr")
    assert len(rows) >= 2 and all(len(row.find_elements(By.CSS_SELECTOR, "td, th")) >= 2 for row in rows)
    assert not any(
        line.strip().startswith("|") for line in card.find_element(By.CSS_SELECTOR, ".passage").text.splitlines()
    )
    for result in results:  # every card: the signed original, fetched without a key
        link = result.find_element(By.XPATH, ".//a[contains(., 'Open the original')]").get_attribute("href")
        assert "/file?" in link and "&s=" in link
    fetched = "return fetch(arguments[0]).then(r => r.status)"
    assert browser.execute_script(fetched, link) == 200


def test_the_documents_table_reads_at_400_px_with_the_failure_reason_and_says_how_runs_link(
    site, browser, tmp_path, settings
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from kb_assets.launch.ingest import ingest

    folder = tmp_path / "narrow"
    folder.mkdir()
    (folder / "note.md").write_text("# Narrow\n\nA note that publishes.\n")
    (folder / "cut.pdf").write_bytes(b"%PDF-1.7\n" + b"0" * 3000)  # a PDF cut short: fails with a reason
    ingest([folder], "narrow", settings)
    sign_in(browser, site, "all-key")
    browser.set_window_size(400, 844)
    try:
        browser.find_element(By.ID, "tab-documents").click()
        Select(browser.find_element(By.ID, "documents-kb")).select_by_value("narrow")

        def failure_reason(driver):
            """The cut PDF's failure cell as (shown, text, width), read in one step once its row is drawn."""
            for row in driver.find_elements(By.CSS_SELECTOR, "#documents-table tbody tr"):
                if "cut.pdf" in row.text:
                    cell = row.find_element(By.CSS_SELECTOR, "td.error")
                    return cell.is_displayed(), cell.text, cell.rect["width"]
            return None

        shown, reason, width = wait(browser, failure_reason)
        assert shown and "cut.pdf" in reason and width <= 400
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        assert browser.execute_script(
            "return [...document.querySelectorAll('.table-wrap')].every(w => w.scrollWidth <= w.clientWidth + 1)"
        )
        note = browser.find_element(By.ID, "runs-note")  # no KB_DAGSTER_URL here: the page says what links runs
        assert note.is_displayed() and "KB_DAGSTER_URL" in note.text
    finally:
        browser.set_window_size(1280, 900)


def test_tables_are_tables_in_the_lineage_panel_and_the_document_view_and_a_page_repeats_no_sentence(site, browser):
    from selenium.webdriver.common.by import By

    sign_in(browser, site, "all-key")
    results = search(browser, "How long are backups kept?", "handbook")
    # page 4 twice in the results: the sentence that answers is handed over once (retrieval/overlap.py)
    assert sum("Backups are kept for 35 days." in r.text for r in results) == 1
    card = next(r for r in results if "Backups are kept for 35 days" in r.text)
    card.find_element(By.TAG_NAME, "button").click()
    table = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#page-text table"))
    rows = table.find_elements(By.CSS_SELECTOR, "tr")
    assert len(rows) >= 5 and "Raw event streams" in table.text and "30 days" in table.text
    text = browser.find_element(By.ID, "page-text")
    assert not any(line.strip().startswith("|") for line in text.text.splitlines())
    assert text.find_elements(By.TAG_NAME, "mark")  # the chunk still marked

    browser.find_element(By.XPATH, "//section[@id='lineage']//button[contains(., 'All chunks')]").click()
    chunk = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".chunk-text table"))
    assert "Security Engineering" in chunk.text
    assert not any(
        line.strip().startswith("|")
        for node in browser.find_elements(By.CSS_SELECTOR, ".chunk-text")
        for line in node.text.splitlines()
    )
    browser.find_element(By.ID, "tab-search").click()


# every table of a card or panel lies inside it and inside the window; one wider than its box scrolls in it
TABLES_INSIDE = """
const out = [];
for (const wrap of document.querySelectorAll('.passage-table-wrap')) {
  if (!wrap.offsetParent) continue;  // not shown
  const box = wrap.closest('.result, .page-text, .chunk').getBoundingClientRect(), r = wrap.getBoundingClientRect();
  const scrolls = ['auto', 'scroll'].includes(getComputedStyle(wrap).overflowX);
  if (r.left < box.left - 1 || r.right > box.right + 1 || r.right > window.innerWidth
      || (wrap.scrollWidth > wrap.clientWidth + 1 && !scrolls)) out.push(wrap.innerText.slice(0, 60));
}
return [document.documentElement.scrollWidth <= window.innerWidth, out];
"""


def test_no_table_is_cut_at_400_px_or_in_the_split_view(site, browser):
    from selenium.webdriver.common.by import By

    sign_in(browser, site, "all-key")
    browser.set_window_size(400, 844)
    try:
        results = search(browser, "What does each team pay for storage?", "handbook")
        assert any(r.find_elements(By.CSS_SELECTOR, ".passage table") for r in results)
        assert browser.execute_script(TABLES_INSIDE) == [True, []]
        results = search(browser, "How long are backups kept?", "handbook")
        retention = next(
            w for w in browser.find_elements(By.CSS_SELECTOR, ".passage-table-wrap") if "Raw event streams" in w.text
        )  # a three-column table fits a phone: its words wrap, nothing to scroll
        assert browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth + 1", retention)
        assert browser.execute_script(TABLES_INSIDE) == [True, []]
    finally:
        browser.set_window_size(1280, 900)
    results = search(browser, "What does each team pay for storage?", "handbook")
    card = next(r for r in results if r.find_elements(By.CSS_SELECTOR, ".passage table"))
    card.find_element(By.TAG_NAME, "button").click()  # the split view: results beside the lineage
    wait(browser, lambda d: d.find_element(By.ID, "lineage").is_displayed() and d.find_elements(By.ID, "page-label"))
    wait(browser, lambda d: d.find_element(By.ID, "page-text").text.strip())
    assert browser.execute_script(TABLES_INSIDE) == [True, []]
    last = (  # the cost report's last column shows, unscrolled: its words wrap instead
        "const t = [...document.querySelectorAll('.split .result .passage-table')]"
        ".find(t => t.innerText.includes('Cost (USD)')); const cells = t.rows[0].cells;"
        "return cells[cells.length - 1].getBoundingClientRect().right <= "
        "t.closest('.passage-table-wrap').getBoundingClientRect().right + 1"
    )
    assert browser.execute_script(last)
