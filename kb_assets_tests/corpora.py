"""The corpora tests share: the sample corpus of ``examples/``, the two small knowledge bases of the
retrieval and API tests with the filter-injection attempts they are searched with, and two annual reports
of one organisation (generated covers) for the metadata filters of the command line and the web page."""

from __future__ import annotations

from pathlib import Path

EXAMPLE_CORPUS = Path(__file__).resolve().parents[1] / "examples" / "corpus"

RETRIEVAL_CORPUS = {
    "alpha": {
        "backups.md": "# Backup handbook\n\n## Retention\n\nNightly backups of the orders database are kept for "
        "35 days in the cold tier. Restores of the backups are tested every quarter by the "
        "platform team.\n\n## Encryption\n\nBackup archives are encrypted with a key stored in "
        "the vault. The encryption key rotates every 90 days.\n\n## Snapshots\n\nVolume snapshots "
        "are taken every hour and preserved for five weeks before they expire.\n",
        "oncall.md": "# On-call guide\n\n## Rotation\n\nThe on-call rotation changes every Monday at 09:00. The "
        "primary engineer carries the pager for the week.\n\n## Escalation\n\nIf the primary does "
        "not answer within 15 minutes, the secondary engineer is paged.\n",
    },
    "beta": {
        "warehouse.md": "# Analytics warehouse\n\n## Retention\n\nBackups of the analytics warehouse are kept "
        "for 90 days. Raw event tables are kept for 13 months.\n\n## Loading\n\nEvent data "
        "is loaded every 15 minutes by the ingestion service.\n",
        "数据平台.md": "# 数据平台手册\n\n## 数据备份\n\n数据平台的备份每天执行一次，备份保留三十五天。恢复演练每季度"
        "进行一次。\n\n## 访问权限\n\n新员工入职后第三天获得生产环境的只读权限。\n",
    },
}
# knowledge-base ids that would widen a search if they became filter syntax
INJECTIONS = [
    'x" or 1==1 or "',
    "x' or 1==1 or '",
    'alpha" or knowledge_base_id == "beta',
    'alpha\\" or 1==1 or \\"',
    'x"] or knowledge_base_id not in ["',
]


def ensure_retrieval_corpus(kb_home: Path, settings) -> None:
    """The knowledge bases ``alpha`` and ``beta``, ingested once per session (later calls change nothing)."""
    from kb_assets.launch.ingest import ingest

    for kb, files in RETRIEVAL_CORPUS.items():
        folder = kb_home / "retrieval-corpus" / kb
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            path = folder / name
            if not path.exists():
                path.write_text(text, encoding="utf-8")
        report = ingest([folder], kb, settings)
        assert not report.failures, report.failures


FISCAL_YEARS = {2022: 180, 2023: 240}  # Initech's annual reports: fiscal year -> net revenue (millions)


def ensure_fiscal_years(kb_home: Path, settings) -> dict[int, str]:
    """The knowledge base ``filings``: Initech Corporation's annual reports for fiscal 2022 and 2023, whose
    file names tell nothing (metadata comes from the cover), ingested once per session. Year -> file name."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    from kb_assets.launch.ingest import ingest

    folder = kb_home / "filings-corpus"
    folder.mkdir(parents=True, exist_ok=True)
    names = {}
    for n, (year, revenue) in enumerate(FISCAL_YEARS.items(), 1):
        path = names[year] = folder / f"doc-{n:03}.pdf"
        if path.exists():
            continue
        pdf = canvas.Canvas(str(path), pagesize=A4)
        cover = ["Initech Corporation", f"Annual Report for the fiscal year ended December 31, {year}"]
        body = ["Results of operations", f"Net revenue was ${revenue} million in {year}, up from the year before."]
        for lines in (cover, body):
            for row, line in enumerate(lines):
                pdf.drawString(72, A4[1] - 100 - 18 * row, line)
            pdf.showPage()
        pdf.save()
    report = ingest([folder], "filings", settings)
    assert not report.failures, report.failures
    return {year: path.name for year, path in names.items()}
