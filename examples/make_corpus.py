"""Deterministic generator for the kb-assets sample corpus (examples/corpus/).

All content is original prose about a fictional company, "Northwind Data
Platform", written for this repository and free to redistribute.  Nothing is
random and every timestamp the file formats allow us to control is pinned to
2024-10-01T09:00:00Z, so re-running the script yields byte-identical files
(given the same library versions; OOXML zips are re-packed with fixed member
timestamps, the PDF is written with reportlab ``invariant=1``).

Usage::

    python examples/make_corpus.py            # writes examples/corpus/*
    python examples/make_corpus.py --check    # also verifies PDF facts/pages

Distinct facts, and where they live (for writing tests)
=======================================================

Text extracted from the PDF contains line breaks inside paragraphs; every fact
sentence below is its own short paragraph and fits on one line, but tests
should still normalise whitespace before matching.

Some numbers deliberately recur across files (use the full sentence to pin a
location): "35 days" backups in the PDF p3, ``retention_days: 35`` in
architecture.md and "35 天" in the Chinese doc; "14 days" is both the docx
read-access delay and the PDF p3 retention of application logs; the on-call
handover time (Tuesday 09:00 UTC) and the 90-day archive move also appear, in
Chinese, in 数据平台简介.md.

platform-handbook.pdf (6 pages; page index is 0-based)
    Running header "Northwind Data Platform Handbook" (left) and
    "Internal - v3.2" (right), footer "Page N of 6", on every page; pypdfium2
    extracts the header first and the footer last.  Page 0 also carries the
    document title "Northwind Data Platform Handbook" in the body.  PDF
    metadata Title = "Northwind Data Platform Handbook".  Outline (bookmarks),
    level 0/1:
    1 Overview (p0); 2 Storage Tiers (p1) > 2.1 Object Storage, 2.2 Archive
    Tier; 3 Incident Response (p2) > 3.1 Severity Levels, 3.2 On-call
    Rotation; 4 Retention Policy (p3) > 4.1 Retention Schedule; 5 Access
    Control (p4); 6 Change Management (p5).
    p0  "The platform serves 42 internal teams from two regions, eu-west and us-east."
    p0  "The platform was founded in 2019 by the Analytics Infrastructure group."
    p1  "Hot objects are stored on NVMe-backed nodes with three-way replication."
    p1  "Cold storage objects move to the archive tier after 90 days."
    p1  "Restoring an archived object takes up to 12 hours."
    p2  "A SEV1 incident must be acknowledged within 5 minutes."
    p2  "The on-call rotation changes every Tuesday at 09:00 UTC."
    p2  "Postmortems are due within 3 business days of resolution."
    p3  "Backups are kept for 35 days."
    p3  table (header Data class | Retention | Owner, 6 rows), e.g.
        "Audit logs | 400 days | Security Engineering",
        "Raw event streams | 30 days | Ingestion",
        "Customer exports | 7 days | Data Services"
    p4  "Service accounts are rotated every 60 days."
    p4  "Production write access requires approval from two maintainers."
    p5  "Change freezes start on December 15 and end on January 5."
    p5  "Every schema migration needs a rollback script."

onboarding-guide.docx (Title, Heading 1 / Heading 2 sections, one table)
    Title "Northwind Data Platform Onboarding Guide"
    H1 "Welcome to Northwind"
        "Every new hire is paired with an onboarding buddy from a different team."
    H1 "Your First Week" > H2 "Day One", H2 "Laptop and Accounts"
        "Laptop requests must be filed at least 5 business days before the start date."
    H1 "Access and Permissions"
        "New engineers get production read access after 14 days."
        "The staging cluster is called nw-stage-eu1."
    H1 "Onboarding Milestones" - table Milestone | Day | Owner, e.g.
        "First code review | Day 3 | Buddy", "Shadow an on-call shift | Day 21 | Team lead"
    H1 "Getting Help"
        "Questions about onboarding go to the #nw-onboarding channel."

quarterly-review.pptx (5 slides; slide index is 0-based)
    s0  title "Q3 2024 Quarterly Review", subtitle "Northwind Data Platform"
    s1  "Performance": "Query latency p95 dropped to 180 ms in Q3"
        speaker notes: "The latency win came mostly from the new result cache in the query router."
    s2  "Reliability": "Availability reached 99.95% across both regions"
        "Two SEV1 incidents, both resolved in under 2 hours"
    s3  "Cost": "Storage spend fell 12% after enabling the archive tier"
        speaker notes: "Compute spend grew 4% because of the new embedding jobs."
    s4  "Q4 Priorities": "Migrate ingestion pipelines to Dagster by November 30"

cost-report.xlsx (two sheets; header in row 1)
    "Compute": Team | Month | vCPU hours | Cost (USD), rows 2-11.
        Row 6: Search | 2024-08 | 41200 | 18420  (numbers stored as ints)
    "Storage": Team | Month | Tier | TB stored | Cost (USD), rows 2-11.
        Row 7: Analytics | 2024-09 | Archive | 310 | 1240
        Row 9: Machine Learning | 2024-09 | Hot | 140 | 11200

service-catalog.csv (header + 12 rows)
    service,owner_team,tier,oncall_channel
    e.g. "ingest-gateway,Ingestion,1,#oncall-ingest",
         "vector-search,Search,1,#oncall-search"

runbook.html (<title> "Runbook: Restoring a Postgres Replica")
    "A replica restore takes about 40 minutes for a 500 GB volume."
    "Never promote a replica whose replication lag exceeds 30 seconds."
    ordered list of restore steps; table Check | Command | Expected.

architecture.md
    "The vector index is rebuilt nightly at 02:30 UTC."
    "Ingestion writes to Kafka topics with 24 partitions each."
    fenced YAML code block (``retention_days: 35``); table of components.

数据平台简介.md (Simplified Chinese, mixes in Milvus / Dagster)
    "数据备份保留 35 天。"
    "向量检索服务基于 Milvus 构建。"
    "所有批处理任务由 Dagster 调度，每天凌晨 2 点（UTC）运行。"
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent / "corpus"
FIXED_DT = dt.datetime(2024, 10, 1, 9, 0, 0)
FIXED_ZIP_DT = (2024, 10, 1, 9, 0, 0)
AUTHOR = "Northwind Data Platform Team"

# Facts expected on a given 0-based PDF page (used by --check).
PDF_FACTS = {
    0: [
        "The platform serves 42 internal teams from two regions, eu-west and us-east.",
        "The platform was founded in 2019 by the Analytics Infrastructure group.",
    ],
    1: [
        "Hot objects are stored on NVMe-backed nodes with three-way replication.",
        "Cold storage objects move to the archive tier after 90 days.",
        "Restoring an archived object takes up to 12 hours.",
    ],
    2: [
        "A SEV1 incident must be acknowledged within 5 minutes.",
        "The on-call rotation changes every Tuesday at 09:00 UTC.",
        "Postmortems are due within 3 business days of resolution.",
    ],
    3: [
        "Backups are kept for 35 days.",
        "Audit logs",
        "400 days",
        "Security Engineering",
    ],
    4: [
        "Service accounts are rotated every 60 days.",
        "Production write access requires approval from two maintainers.",
    ],
    5: [
        "Change freezes start on December 15 and end on January 5.",
        "Every schema migration needs a rollback script.",
    ],
}


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def _normalize_zip(data: bytes) -> bytes:
    """Re-pack a zip with fixed member timestamps/attributes (order kept)."""
    src = zipfile.ZipFile(io.BytesIO(data))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            zi = zipfile.ZipInfo(info.filename, date_time=FIXED_ZIP_DT)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.create_system = 3  # unix
            zi.external_attr = 0o100644 << 16  # regular file, rw-r--r--
            dst.writestr(zi, src.read(info.filename), compresslevel=6)
    return buf.getvalue()


def _write_text(name: str, text: str) -> None:
    (OUT / name).write_text(text, encoding="utf-8", newline="\n")


# --------------------------------------------------------------------------
# PDF
# --------------------------------------------------------------------------
def make_pdf() -> None:
    from reportlab.lib import colors
    from reportlab.lib.enums import TA_CENTER
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
    from reportlab.lib.units import mm
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    ss = getSampleStyleSheet()
    body = ParagraphStyle("Body", parent=ss["BodyText"], fontSize=10, leading=14, spaceAfter=6)
    h1 = ParagraphStyle("H1", parent=ss["Heading1"], fontSize=18, leading=22, spaceBefore=6, spaceAfter=10)
    h2 = ParagraphStyle("H2", parent=ss["Heading2"], fontSize=13, leading=16, spaceBefore=10, spaceAfter=6)
    title = ParagraphStyle("DocTitle", parent=ss["Title"], fontSize=24, leading=28, alignment=TA_CENTER, spaceAfter=4)
    subtitle = ParagraphStyle("DocSubtitle", parent=body, alignment=TA_CENTER, textColor=colors.grey, spaceAfter=18)
    cell = ParagraphStyle("Cell", parent=body, spaceAfter=0)
    cell_head = ParagraphStyle("CellHead", parent=cell, fontName="Helvetica-Bold")

    total_pages = 6
    header_text = "Northwind Data Platform Handbook"

    class HandbookDoc(SimpleDocTemplate):
        def afterPage(self):
            draw_footer(self.canv, self.page)

        def afterFlowable(self, flowable):
            if isinstance(flowable, Paragraph) and flowable.style.name in ("H1", "H2"):
                text = flowable.getPlainText()
                level = 0 if flowable.style.name == "H1" else 1
                key = "sec-" + text.split(" ", 1)[0]
                self.canv.bookmarkPage(key)
                self.canv.addOutlineEntry(text, key, level=level, closed=False)

    def on_page(canv, doc):
        width, height = A4
        canv.saveState()
        canv.setFont("Helvetica", 9)
        canv.setFillColor(colors.grey)
        canv.drawString(20 * mm, height - 12 * mm, header_text)
        canv.drawRightString(width - 20 * mm, height - 12 * mm, "Internal - v3.2")
        canv.setStrokeColor(colors.lightgrey)
        canv.line(20 * mm, height - 14 * mm, width - 20 * mm, height - 14 * mm)
        canv.restoreState()

    def draw_footer(canv, page):
        # Drawn at page end so text extraction yields header, body, footer.
        width, _ = A4
        canv.saveState()
        canv.setFont("Helvetica", 9)
        canv.setFillColor(colors.grey)
        canv.setStrokeColor(colors.lightgrey)
        canv.line(20 * mm, 14 * mm, width - 20 * mm, 14 * mm)
        canv.drawCentredString(width / 2, 9 * mm, f"Page {page} of {total_pages}")
        canv.restoreState()

    P = lambda text, style=body: Paragraph(text, style)  # noqa: E731
    story = [
        P("Northwind Data Platform Handbook", title),
        P("Operations and policy reference for platform engineers", subtitle),
        P("1 Overview", h1),
        P(
            "This handbook describes how the Northwind Data Platform stores, "
            "protects and serves data for the rest of the company. It is written "
            "for platform engineers, on-call responders and the data owners who "
            "depend on them. Where a policy and this handbook disagree, the policy "
            "wins and the handbook is corrected in the next revision."
        ),
        P("The platform serves 42 internal teams from two regions, eu-west and us-east."),
        P("The platform was founded in 2019 by the Analytics Infrastructure group."),
        P(
            "The platform is organised as a set of shared services: an ingestion "
            "layer that accepts event streams and batch uploads, a storage layer "
            "with several tiers of different cost and latency, a query layer that "
            "serves SQL and vector search, and an orchestration layer that runs "
            "scheduled pipelines. Each service has a named owner team, an on-call "
            "channel and a tier that determines its response targets."
        ),
        P(
            "Sections 2 to 6 cover storage, incident response, retention, access "
            "control and change management. Each section starts on a new page so "
            "that it can be printed and pinned next to the relevant console."
        ),
        PageBreak(),
        P("2 Storage Tiers", h1),
        P(
            "Data on the platform lives in one of three tiers: hot, warm and "
            "archive. The tier decides where the bytes are kept, how quickly they "
            "can be read and how much the owning team is charged for them. Teams "
            "do not pick a tier directly; lifecycle rules move objects between "
            "tiers based on age and access frequency."
        ),
        P("2.1 Object Storage", h2),
        P(
            "The object store is the default home for files, table snapshots and "
            "model artefacts. Buckets are created per team and per environment, and "
            "every bucket has versioning enabled so that accidental overwrites can "
            "be undone."
        ),
        P("Hot objects are stored on NVMe-backed nodes with three-way replication."),
        P(
            "Warm objects use erasure coding on high-capacity disks. Reads from the "
            "warm tier are slower than hot reads but need no special request, and "
            "most dashboards read from the warm tier without noticing."
        ),
        P("2.2 Archive Tier", h2),
        P("The archive tier is a low-cost, high-latency store intended for data that must be kept but is rarely read."),
        P("Cold storage objects move to the archive tier after 90 days."),
        P("Restoring an archived object takes up to 12 hours."),
        P(
            "Because restores are slow, teams that expect to re-read archived data "
            "should request a restore a day before they need it. Restored copies "
            "stay in the warm tier for seven days and then expire automatically."
        ),
        PageBreak(),
        P("3 Incident Response", h1),
        P(
            "An incident is any unplanned event that degrades a platform service "
            "for its users. Anyone may declare an incident; it is always better to "
            "declare one that turns out to be minor than to miss one that is not."
        ),
        P("3.1 Severity Levels", h2),
        P(
            "SEV1 means a tier-1 service is unavailable or data is at risk. SEV2 "
            "means a service is degraded but usable. SEV3 covers minor faults with "
            "a workaround."
        ),
        P("A SEV1 incident must be acknowledged within 5 minutes."),
        P(
            "The incident commander opens a dedicated channel, posts status updates "
            "every thirty minutes and hands over explicitly if the incident lasts "
            "longer than their shift."
        ),
        P("3.2 On-call Rotation", h2),
        P(
            "Each owner team runs a primary and a secondary on-call schedule. The "
            "secondary is paged automatically if the primary does not acknowledge "
            "a page in time."
        ),
        P("The on-call rotation changes every Tuesday at 09:00 UTC."),
        P(
            "Handover happens in a short call where the outgoing engineer walks "
            "through open incidents, noisy alerts and planned maintenance."
        ),
        P("Postmortems are due within 3 business days of resolution."),
        P(
            "Postmortems are blameless. They record the timeline, the impact, the "
            "contributing factors and a list of follow-up actions with owners."
        ),
        PageBreak(),
        P("4 Retention Policy", h1),
        P(
            "Retention periods balance the cost of keeping data against legal, "
            "security and product needs. Each data class has a retention period "
            "and an owner who approves exceptions. Deletion is automatic once the "
            "retention period ends."
        ),
        P("Backups are kept for 35 days."),
        P(
            "Backups are taken nightly and copied to the other region. Restores "
            "from backup are tested every quarter by the Storage team."
        ),
        P("4.1 Retention Schedule", h2),
        P("The table below lists the retention period and the owner of each data class."),
    ]

    rows = [
        ("Data class", "Retention", "Owner"),
        ("Raw event streams", "30 days", "Ingestion"),
        ("Curated tables", "3 years", "Analytics"),
        ("Audit logs", "400 days", "Security Engineering"),
        ("Application logs", "14 days", "Observability"),
        ("Customer exports", "7 days", "Data Services"),
        ("Model artefacts", "1 year", "Machine Learning"),
    ]
    data = [[Paragraph(c, cell_head if i == 0 else cell) for c in r] for i, r in enumerate(rows)]
    table = Table(data, colWidths=[60 * mm, 40 * mm, 60 * mm], repeatRows=1)
    table.setStyle(
        TableStyle(
            [
                ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#dde4ee")),
                ("GRID", (0, 0), (-1, -1), 0.5, colors.grey),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("TOPPADDING", (0, 0), (-1, -1), 4),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 4),
            ]
        )
    )
    story += [
        table,
        Spacer(1, 8),
        P(
            "Legal holds override the schedule: data under a hold is not deleted "
            "until the hold is lifted, whatever its retention period."
        ),
        PageBreak(),
        P("5 Access Control", h1),
        P(
            "Access to platform data is granted to groups, never to individuals. "
            "Group membership is managed in the identity provider and reviewed "
            "every quarter by each team lead."
        ),
        P("Service accounts are rotated every 60 days."),
        P(
            "Read access to production is granted per dataset. Requests name the "
            "dataset, the reason and an end date; requests without an end date "
            "expire after ninety days."
        ),
        P("Production write access requires approval from two maintainers."),
        P(
            "Break-glass accounts exist for emergencies. Every break-glass login "
            "pages the Security Engineering on-call and is reviewed the next "
            "business day."
        ),
        PageBreak(),
        P("6 Change Management", h1),
        P(
            "Changes to shared services go through a reviewed pull request and a "
            "staged rollout: staging first, then one production region, then the "
            "other. A change may be rolled back at any stage without further "
            "approval."
        ),
        P("Every schema migration needs a rollback script."),
        P(
            "Large changes are announced in the platform changelog at least two "
            "days in advance so that dependent teams can plan around them."
        ),
        P("Change freezes start on December 15 and end on January 5."),
        P(
            "During a freeze only security fixes and incident remediations are "
            "deployed, and each one needs sign-off from the on-call incident "
            "commander."
        ),
    ]

    buf = io.BytesIO()
    doc = HandbookDoc(
        buf,
        pagesize=A4,
        leftMargin=20 * mm,
        rightMargin=20 * mm,
        topMargin=22 * mm,
        bottomMargin=22 * mm,
        title="Northwind Data Platform Handbook",
        author=AUTHOR,
        subject="Platform operations handbook",
        creator="kb-assets examples/make_corpus.py",
        invariant=1,
    )
    doc.build(story, onFirstPage=on_page, onLaterPages=on_page)
    (OUT / "platform-handbook.pdf").write_bytes(buf.getvalue())


# --------------------------------------------------------------------------
# DOCX
# --------------------------------------------------------------------------
def make_docx() -> None:
    from docx import Document

    d = Document()
    cp = d.core_properties
    cp.title = "Northwind Onboarding Guide"
    cp.author = AUTHOR
    cp.last_modified_by = AUTHOR
    cp.subject = "Engineer onboarding"
    cp.created = FIXED_DT
    cp.modified = FIXED_DT
    cp.last_printed = FIXED_DT
    cp.revision = 1

    d.add_heading("Northwind Data Platform Onboarding Guide", level=0)
    d.add_heading("Welcome to Northwind", level=1)
    d.add_paragraph(
        "This guide walks new platform engineers through their first month. It "
        "explains who to talk to, which accounts to request and what we expect "
        "you to have done by the end of each week."
    )
    d.add_paragraph("Every new hire is paired with an onboarding buddy from a different team.")
    d.add_paragraph(
        "Your buddy is your first point of contact for questions that feel too "
        "small for a ticket. Meet them at least twice a week during your first "
        "month."
    )

    d.add_heading("Your First Week", level=1)
    d.add_heading("Day One", level=2)
    d.add_paragraph(
        "On day one you will meet your team lead, join the team channels and "
        "read the platform handbook. You are not expected to ship anything in "
        "your first week."
    )
    d.add_heading("Laptop and Accounts", level=2)
    d.add_paragraph("Laptop requests must be filed at least 5 business days before the start date.")
    d.add_paragraph(
        "Your identity account, email and chat access are created automatically "
        "from the HR record. Source control and cloud console access are "
        "requested by your team lead on your first morning."
    )

    d.add_heading("Access and Permissions", level=1)
    d.add_paragraph("New engineers get production read access after 14 days.")
    d.add_paragraph("Until then, use the staging environment, which mirrors production topology with synthetic data.")
    d.add_paragraph("The staging cluster is called nw-stage-eu1.")
    d.add_paragraph(
        "Production write access is never granted during onboarding; it follows "
        "the two-maintainer approval process described in the handbook."
    )

    d.add_heading("Onboarding Milestones", level=1)
    d.add_paragraph("The table lists the milestones we track during onboarding.")
    rows = [
        ("Milestone", "Day", "Owner"),
        ("Accounts and laptop ready", "Day 1", "IT Support"),
        ("First code review", "Day 3", "Buddy"),
        ("First change deployed to staging", "Day 10", "Buddy"),
        ("Production read access", "Day 14", "Team lead"),
        ("Shadow an on-call shift", "Day 21", "Team lead"),
        ("Onboarding retrospective", "Day 30", "Team lead"),
    ]
    t = d.add_table(rows=len(rows), cols=3)
    t.style = "Table Grid"
    for i, r in enumerate(rows):
        for j, v in enumerate(r):
            t.cell(i, j).text = v
    for c in t.rows[0].cells:
        for run in c.paragraphs[0].runs:
            run.bold = True

    d.add_heading("Getting Help", level=1)
    d.add_paragraph("Questions about onboarding go to the #nw-onboarding channel.")
    d.add_paragraph(
        "For anything urgent outside working hours, page the platform on-call instead of messaging individuals."
    )

    buf = io.BytesIO()
    d.save(buf)
    (OUT / "onboarding-guide.docx").write_bytes(_normalize_zip(buf.getvalue()))


# --------------------------------------------------------------------------
# PPTX
# --------------------------------------------------------------------------
def make_pptx() -> None:
    from pptx import Presentation

    prs = Presentation()
    cp = prs.core_properties
    cp.title = "Q3 2024 Quarterly Review"
    cp.author = AUTHOR
    cp.last_modified_by = AUTHOR
    cp.created = FIXED_DT
    cp.modified = FIXED_DT
    cp.last_printed = FIXED_DT
    cp.revision = 1

    s = prs.slides.add_slide(prs.slide_layouts[0])
    s.shapes.title.text = "Q3 2024 Quarterly Review"
    s.placeholders[1].text = "Northwind Data Platform"

    def bullets(title, items, notes=None):
        sl = prs.slides.add_slide(prs.slide_layouts[1])
        sl.shapes.title.text = title
        tf = sl.placeholders[1].text_frame
        tf.text = items[0]
        for it in items[1:]:
            tf.add_paragraph().text = it
        if notes:
            sl.notes_slide.notes_text_frame.text = notes

    bullets(
        "Performance",
        [
            "Query latency p95 dropped to 180 ms in Q3",
            "Nightly pipeline runtime down from 5.5 to 3.8 hours",
            "Vector search recall held at 0.94 on the internal benchmark",
        ],
        notes="The latency win came mostly from the new result cache in the query router. Expect a smaller gain in Q4.",
    )
    bullets(
        "Reliability",
        [
            "Availability reached 99.95% across both regions",
            "Two SEV1 incidents, both resolved in under 2 hours",
            "Mean time to acknowledge pages: 3 minutes",
        ],
    )
    bullets(
        "Cost",
        [
            "Storage spend fell 12% after enabling the archive tier",
            "Compute spend grew modestly with new workloads",
            "Unit cost per stored terabyte is the lowest since 2022",
        ],
        notes="Compute spend grew 4% because of the new embedding jobs. Finance has approved the increase for Q4.",
    )
    bullets(
        "Q4 Priorities",
        [
            "Migrate ingestion pipelines to Dagster by November 30",
            "Roll out per-dataset access requests to all teams",
            "Run a full-region failover drill before the change freeze",
        ],
    )

    buf = io.BytesIO()
    prs.save(buf)
    (OUT / "quarterly-review.pptx").write_bytes(_normalize_zip(buf.getvalue()))


# --------------------------------------------------------------------------
# XLSX + CSV
# --------------------------------------------------------------------------
def make_xlsx() -> None:
    from openpyxl import Workbook
    from openpyxl.styles import Font
    from openpyxl.writer.excel import ExcelWriter

    wb = Workbook()
    wb.properties.title = "Northwind platform cost report"
    wb.properties.creator = AUTHOR
    wb.properties.lastModifiedBy = AUTHOR
    wb.properties.created = FIXED_DT
    wb.properties.modified = FIXED_DT

    compute = wb.active
    compute.title = "Compute"
    compute.append(["Team", "Month", "vCPU hours", "Cost (USD)"])
    for row in [
        ("Ingestion", "2024-07", 52800, 23100),
        ("Ingestion", "2024-08", 54100, 23650),
        ("Ingestion", "2024-09", 55900, 24410),
        ("Search", "2024-07", 39800, 17790),
        ("Search", "2024-08", 41200, 18420),
        ("Search", "2024-09", 43600, 19480),
        ("Analytics", "2024-07", 61500, 26870),
        ("Analytics", "2024-08", 60200, 26300),
        ("Analytics", "2024-09", 64800, 28310),
        ("Machine Learning", "2024-09", 88300, 41950),
    ]:
        compute.append(list(row))

    storage = wb.create_sheet("Storage")
    storage.append(["Team", "Month", "Tier", "TB stored", "Cost (USD)"])
    for row in [
        ("Ingestion", "2024-09", "Hot", 85, 6800),
        ("Ingestion", "2024-09", "Warm", 240, 4320),
        ("Search", "2024-09", "Hot", 120, 9600),
        ("Search", "2024-09", "Warm", 95, 1710),
        ("Analytics", "2024-09", "Hot", 60, 4800),
        ("Analytics", "2024-09", "Archive", 310, 1240),
        ("Analytics", "2024-09", "Warm", 410, 7380),
        ("Machine Learning", "2024-09", "Hot", 140, 11200),
        ("Machine Learning", "2024-09", "Warm", 180, 3240),
        ("Machine Learning", "2024-09", "Archive", 220, 880),
    ]:
        storage.append(list(row))

    for ws in (compute, storage):
        for c in ws[1]:
            c.font = Font(bold=True)
        ws.freeze_panes = "A2"
        for col, width in zip("ABCDE", (18, 10, 12, 12, 12), strict=True):
            ws.column_dimensions[col].width = width

    buf = io.BytesIO()
    archive = zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, allowZip64=True)
    # ExcelWriter directly: openpyxl.save_workbook() would stamp "now" into
    # the core properties' modified date.
    ExcelWriter(wb, archive).save()
    (OUT / "cost-report.xlsx").write_bytes(_normalize_zip(buf.getvalue()))


def make_csv() -> None:
    rows = [
        ("service", "owner_team", "tier", "oncall_channel"),
        ("ingest-gateway", "Ingestion", "1", "#oncall-ingest"),
        ("stream-router", "Ingestion", "1", "#oncall-ingest"),
        ("batch-uploader", "Ingestion", "2", "#oncall-ingest"),
        ("object-store", "Storage", "1", "#oncall-storage"),
        ("archive-mover", "Storage", "3", "#oncall-storage"),
        ("backup-runner", "Storage", "2", "#oncall-storage"),
        ("query-router", "Query", "1", "#oncall-query"),
        ("sql-warehouse", "Query", "1", "#oncall-query"),
        ("vector-search", "Search", "1", "#oncall-search"),
        ("embedding-jobs", "Machine Learning", "2", "#oncall-ml"),
        ("pipeline-orchestrator", "Orchestration", "2", "#oncall-orchestration"),
        ("access-broker", "Security Engineering", "1", "#oncall-security"),
    ]
    with open(OUT / "service-catalog.csv", "w", encoding="utf-8", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


# --------------------------------------------------------------------------
# HTML / Markdown
# --------------------------------------------------------------------------
RUNBOOK_HTML = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Runbook: Restoring a Postgres Replica</title>
</head>
<body>
<h1>Runbook: Restoring a Postgres Replica</h1>
<p>This runbook explains how to rebuild a broken read replica of the platform
metadata database from the latest base backup. It is owned by the Storage team
and applies to both regions.</p>

<h2>When to use this runbook</h2>
<p>Use it when a replica has crashed, fallen too far behind or lost its volume.
Do not use it for the primary; a failing primary is a SEV1 incident and follows
the incident response process.</p>
<p>Never promote a replica whose replication lag exceeds 30 seconds.</p>

<h2>Procedure</h2>
<ol>
  <li>Announce the restore in the #oncall-storage channel.</li>
  <li>Remove the replica from the read pool in the query router.</li>
  <li>Stop the Postgres service on the replica host.</li>
  <li>Restore the latest base backup onto a fresh volume.</li>
  <li>Start Postgres and let it replay WAL from the archive.</li>
  <li>Run the checks below, then return the replica to the read pool.</li>
</ol>
<p>A replica restore takes about 40 minutes for a 500 GB volume.</p>

<h2>Checks</h2>
<table>
  <thead>
    <tr><th>Check</th><th>Command</th><th>Expected</th></tr>
  </thead>
  <tbody>
    <tr><td>Replica is in recovery</td><td><code>SELECT pg_is_in_recovery();</code></td><td>true</td></tr>
    <tr><td>Replication lag</td><td><code>SELECT now() - pg_last_xact_replay_timestamp();</code></td><td>under 30 seconds</td></tr>
    <tr><td>Row count sanity check</td><td><code>SELECT count(*) FROM datasets;</code></td><td>matches the primary</td></tr>
  </tbody>
</table>

<h2>Escalation</h2>
<p>If the restore fails twice, page the Storage secondary on-call and open a
SEV2 incident.</p>
</body>
</html>
"""  # noqa: E501 (the runbook page's HTML table: one row a line)

ARCHITECTURE_MD = """\
# Northwind Data Platform Architecture

This document gives a short tour of the platform's main components and how
data flows between them. It is meant as a map, not a specification.

## Ingestion

Producers send events to the ingest gateway, which validates the schema and
forwards them to Kafka. Batch uploads land in a staging bucket and are picked
up by the batch uploader.

Ingestion writes to Kafka topics with 24 partitions each.

## Storage and Query

Events are compacted into columnar tables in the object store. The SQL
warehouse reads those tables directly, and the query router sends each query
to the warehouse or to vector search depending on its type.

The vector index is rebuilt nightly at 02:30 UTC.

## Orchestration

Scheduled pipelines are defined as code and deployed with the rest of the
platform. A minimal pipeline definition looks like this:

```yaml
pipeline: curated-orders
schedule: "0 2 * * *"
source: kafka://orders
sink: s3://nw-curated/orders/
retention_days: 35
owner: analytics
```

## Components

| Component | Owner | Language | Tier |
|-----------|-------|----------|------|
| ingest-gateway | Ingestion | Go | 1 |
| query-router | Query | Rust | 1 |
| vector-search | Search | Python | 1 |
| pipeline-orchestrator | Orchestration | Python | 2 |
| archive-mover | Storage | Go | 3 |
"""

CHINESE_MD = """\
# 数据平台简介

Northwind 数据平台为公司内部团队提供数据接入、存储、查询和调度服务。本文简要介绍平台的主要组成部分和几项基本规定。

## 存储与备份

平台的数据分为热、温、归档三个存储层级。超过 90 天未访问的冷数据会自动迁移到归档层。

数据备份保留 35 天。

备份每天夜间执行，并复制到另一个区域。存储团队每个季度演练一次恢复流程。

## 检索与调度

向量检索服务基于 Milvus 构建。

所有批处理任务由 Dagster 调度，每天凌晨 2 点（UTC）运行。任务定义以代码形式保存在代码仓库中，与平台其他部分一同发布。

## 值班与联系方式

值班轮换每周二 09:00（UTC）交接。紧急问题请直接呼叫值班工程师，不要私信个人。入职相关问题请在 #nw-onboarding 频道提问。
"""


def make_text_files() -> None:
    _write_text("runbook.html", RUNBOOK_HTML)
    _write_text("architecture.md", ARCHITECTURE_MD)
    _write_text("数据平台简介.md", CHINESE_MD)


# --------------------------------------------------------------------------
# verification
# --------------------------------------------------------------------------
def check_pdf() -> list[str]:
    """Return a list of problems with the PDF (empty if all good)."""
    import pypdfium2 as pdfium

    problems = []
    pdf = pdfium.PdfDocument(str(OUT / "platform-handbook.pdf"))
    try:
        n = len(pdf)
        texts = []
        for i in range(n):
            tp = pdf[i].get_textpage()
            texts.append(tp.get_text_range())
        for i, t in enumerate(texts):
            if "Northwind Data Platform Handbook" not in t:
                problems.append(f"page {i}: running header missing")
            if f"Page {i + 1} of {n}" not in t:
                problems.append(f"page {i}: footer 'Page {i + 1} of {n}' missing")
        for page, facts in PDF_FACTS.items():
            if page >= n:
                problems.append(f"page {page} does not exist (only {n})")
                continue
            for fact in facts:
                if fact not in texts[page]:
                    problems.append(f"page {page}: fact not found verbatim: {fact!r}")
                for j, t in enumerate(texts):
                    if j != page and fact in t and len(fact) > 20:
                        problems.append(f"fact also on page {j}: {fact!r}")
        toc = []
        for item in pdf.get_toc():
            dest = item.get_dest()
            toc.append((item.level, item.get_title(), dest.get_index() if dest is not None else None))
        print(f"platform-handbook.pdf: {n} pages, outline:")
        for level, title_, page in toc:
            print(f"  {'  ' * level}{title_} -> page {page}")
        if not toc:
            problems.append("no outline entries")
    finally:
        pdf.close()
    return problems


def main(argv: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    make_pdf()
    make_docx()
    make_pptx()
    make_xlsx()
    make_csv()
    make_text_files()

    total = 0
    for p in sorted(OUT.iterdir()):
        if p.is_file():
            size = p.stat().st_size
            total += size
            print(f"{size:>8}  {p.name}")
    print(f"{total:>8}  total bytes")

    if "--check" in argv:
        problems = check_pdf()
        for pr in problems:
            print("PROBLEM:", pr)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
