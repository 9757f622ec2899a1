// kb-assets: search a knowledge base and see where each answer came from. No build step, no library.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { key: sessionStorage.getItem("kb-key") || "", results: [], lineage: null, page: null,
  documentId: null, pageIndex: 0, pageCount: null, active: null, dagsterUrl: null, query: "" };

// ---------------------------------------------------------------- the API, with the key
class AuthNeeded extends Error {}

async function api(path, options = {}) {
  const headers = Object.assign({ Accept: "application/json" }, options.headers || {});
  if (state.key) headers.Authorization = "Bearer " + state.key;
  if (options.body) headers["Content-Type"] = "application/json";
  const response = await fetch(path, Object.assign({}, options, { headers }));
  if (response.status === 401) throw new AuthNeeded("an API key is needed");
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (!response.ok) {  // an RFC 9457 problem: its detail says what failed (a 422: each field's message)
    const fields = body && Array.isArray(body.errors) ? body.errors.map((e) => `${(e.loc || []).slice(-1)[0]}: ${e.msg}`) : [];
    const detail = fields.length ? fields.join("; ") : body && body.detail ? String(body.detail) : response.statusText;
    throw new Error(`${response.status}: ${detail}`);
  }
  return body;
}

function say(text, error = false) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("error", error);
}

function askForKey(message) {
  $("key-error").textContent = message || "";
  $("key-input").value = "";
  if (!$("key-dialog").open) $("key-dialog").showModal();
  $("key-input").focus();
}

async function guarded(work) {
  try {
    return await work();
  } catch (error) {
    if (error instanceof AuthNeeded) askForKey(state.key ? "That key was not accepted." : "");
    else say(error.message, true);
    return null;
  }
}

// ---------------------------------------------------------------- text helpers
const CJK = /[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]/;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "className") node.className = value;
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

// whitespace collapsed and spaces beside CJK characters dropped (kb_assets.lib.text.normalize_ws), with
// the index in the original text of every kept character
function normalized(text) {
  const chars = [], origin = [];
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (/\s/.test(ch)) {
      if (chars.length && chars[chars.length - 1] !== " ") { chars.push(" "); origin.push(i); }
    } else { chars.push(ch); origin.push(i); }
  }
  const out = [], map = [];
  for (let i = 0; i < chars.length; i++) {
    if (chars[i] === " " && ((i > 0 && CJK.test(chars[i - 1])) || (i + 1 < chars.length && CJK.test(chars[i + 1])))) continue;
    out.push(chars[i]); map.push(origin[i]);
  }
  return { text: out.join(""), map };
}

// [start, end) of the chunk's content in the joined text of its pages, or null
function chunkSpan(joined, content, header) {
  const hay = normalized(joined);
  const needles = [content];
  if (header && content.startsWith(header)) needles.push(content.slice(header.length));
  for (const needle of needles) {
    const n = normalized(needle).text;
    if (!n) continue;
    const at = hay.text.indexOf(n);
    if (at >= 0) return [hay.map[at], hay.map[at + n.length - 1] + 1];
  }
  return null;
}

// a document's organisation, period and kind as read from its content, those known ("" when none is)
function aboutDocument(metadata) {
  const m = metadata || {};
  const sure = m.confidence || {};  // a field read with confidence under 0.5 is not shown (as the CLI)
  const shown = (name, value) => value && (sure[name] === undefined || sure[name] >= 0.5) ? value : null;
  return [shown("organisation", m.organisation), shown("period", m.period && m.period.label), shown("kind", m.kind)]
    .filter(Boolean).join(" · ");
}

function pageLabel(index, label) {
  return label && label !== String(index + 1) ? `page ${index + 1} (“${label}”)` : `page ${index + 1}`;
}

// the question's words, to mark in a passage: Latin words (less the commonest, "backups" also finding
// "backup") and the two-character pieces of its Chinese
const STOP = new Set(("a an and are as at be by can could did do does for from had has have how i if in is it " +
  "its me my of on or our should that the their them there these this those to was we were what when where " +
  "which who whom why will with would you your").split(" "));

function questionTerms(query) {
  const terms = [];
  for (const word of query.toLowerCase().match(/[a-z0-9][a-z0-9_'-]*/g) || []) {
    let stem = word.replace(/'s$/, "");
    if (STOP.has(stem) || (stem.length < 3 && !/\d/.test(stem))) continue;
    if (stem.length > 4 && stem.endsWith("s") && !stem.endsWith("ss")) stem = stem.slice(0, -1);
    terms.push(new RegExp(`\\b${stem}[a-z]*`, "gi"));  // stems hold only letters, digits, _ ' -
  }
  for (const run of query.match(/[\u3400-\u9fff]+/g) || []) {
    for (let i = 0; i + 1 < run.length; i++) terms.push(new RegExp(run.slice(i, i + 2), "g"));
  }
  return terms;
}

// blank lines and runs of spaces folded: a passage reads as a few lines
function compact(text) {
  return text.replace(/[ \t]+/g, " ").replace(/\s*\n\s*/g, "\n").trim();
}

// the text with the question's words in <mark>
function marked(text, query) {
  const spans = [];
  for (const term of questionTerms(query)) {
    for (const found of text.matchAll(term)) if (found[0]) spans.push([found.index, found.index + found[0].length]);
  }
  spans.sort((a, b) => a[0] - b[0]);
  const out = document.createDocumentFragment();
  let at = 0;
  for (const [start, end] of spans) {
    if (end <= at) continue;
    const from = Math.max(start, at);
    if (from > at) out.append(text.slice(at, from));
    out.append(el("mark", {}, text.slice(from, end)));
    at = end;
  }
  out.append(text.slice(at));
  return out;
}

// text as the page reads it: Markdown table rows ("| a | b |") as a table (the header row first when a "|---|"
// line follows it) that scrolls inside its box when it is wider, the rest as text. `marks(piece, at)` gives the
// nodes of a piece of the text that starts at `at` in it (the question's words marked, or the chunk's span).
const TABLE_ROW = /^\|.*\|$/;
const TABLE_RULE = /^\|[\s:|-]+\|$/;
const FIGURE = /^[$€£(\s-]*\d[\d,.]*\)?\s*%?$/;  // a cell that is a figure: right-aligned, whole

function rich(text, marks) {
  const out = document.createDocumentFragment();
  const lines = [];
  let at = 0;
  for (const line of text.split("\n")) { lines.push([line, at]); at += line.length + 1; }
  for (let i = 0; i < lines.length;) {
    if (!TABLE_ROW.test(lines[i][0].trim())) {
      let end = i;
      while (end < lines.length && !TABLE_ROW.test(lines[end][0].trim())) end++;
      const from = lines[i][1], to = end < lines.length ? lines[end][1] : text.length;
      out.append(el("span", { className: "prose" }, marks(text.slice(from, to), from)));
      i = end;
      continue;
    }
    const rows = [];
    while (i < lines.length && TABLE_ROW.test(lines[i][0].trim())) rows.push(lines[i++]);
    out.append(markdownTable(rows, marks));
  }
  return out;
}

// a table row's cells as [text, offset of the text in the whole text] (an escaped \| stays in its cell)
function cells(line, at) {
  const out = [];
  let start = line.indexOf("|") + 1;
  for (let i = start; i < line.length; i++) {
    if (line[i] === "\\" && line[i + 1] === "|") { i++; continue; }
    if (line[i] !== "|") continue;
    const raw = line.slice(start, i), lead = raw.length - raw.trimStart().length;
    out.push([raw.trim(), at + start + lead]);
    start = i + 1;
  }
  return out;
}

function markdownTable(rows, marks) {
  const headed = rows.length > 1 && TABLE_RULE.test(rows[1][0].trim());
  const body = rows.filter(([line], index) => !(headed && index === 1) && !TABLE_RULE.test(line.trim()));
  const line = ([text, at], tag) => el("tr", {}, ...cells(text, at).map(([cell, from]) =>
    el(tag, { className: FIGURE.test(cell) ? "figure" : /\s/.test(cell) ? null : "whole" },
      marks(cell.replace(/\\\|/g, "|"), from))));
  const table = el("table", { className: "passage-table" },
    headed ? el("thead", {}, line(body[0], "th")) : null,
    el("tbody", {}, ...(headed ? body.slice(1) : body).map((row) => line(row, "td"))));
  return el("div", { className: "table-wrap passage-table-wrap", tabindex: "0", role: "region", "aria-label": "Table" }, table);
}

// a passage with the question's words marked
function passage(text, query) {
  return rich(text, (piece) => marked(piece, query));
}

// a piece of a text with the part of [start, end) that falls inside it marked
function spanMarked(piece, at, start, end) {
  const from = Math.max(start - at, 0), to = Math.min(end - at, piece.length);
  if (to <= from) return document.createTextNode(piece);
  const out = document.createDocumentFragment();
  out.append(piece.slice(0, from), el("mark", {}, piece.slice(from, to)), piece.slice(to));
  return out;
}

// the result whose passage holds this result's chunk, when its own context was handed over whole by results
// above on the same page (kb_assets/retrieval/overlap.py: covered_by), else -1
function coveredBy(rows, index) {
  const row = rows[index];
  if (row.context !== "") return -1;
  const head = (row.content || "").split(/\s+/).join(" ").trim().slice(0, 80);
  return rows.slice(0, index).findIndex((other) => other.documentId === row.documentId && other.pageIndex === row.pageIndex
    && head && (other.context || other.content || "").split(/\s+/).join(" ").includes(head));
}

// ---------------------------------------------------------------- start
async function start() {
  const info = await guarded(() => api("/v1/service"));
  if (!info) return;
  state.dagsterUrl = info.dagsterUrl;
  const strategy = $("strategy");
  strategy.replaceChildren(...info.strategies.map((name) =>
    el("option", { value: name, selected: name === info.defaultStrategy }, name)));
  const kbs = await guarded(() => api("/v1/knowledge-bases"));
  if (!kbs) return;
  const options = kbs.knowledgeBases.map((kb) =>
    el("option", { value: kb.knowledgeBaseId }, `${kb.knowledgeBaseId} (${kb.documents} documents)`));
  $("kb").replaceChildren(el("option", { value: "" }, "All I may read"), ...options.map((o) => o.cloneNode(true)));
  $("documents-kb").replaceChildren(...options);
  say(kbs.knowledgeBases.length ? `${kbs.knowledgeBases.length} knowledge bases` : "No knowledge base yet");
  if ($("view-documents").hidden === false) loadDocuments();
}

// ---------------------------------------------------------------- search
async function search(event) {
  event.preventDefault();
  const query = $("query").value.trim();
  if (!query) return;
  const body = { query, limit: 10, strategy: $("strategy").value || null };
  if ($("kb").value) body.knowledgeBaseIds = [$("kb").value];
  for (const name of ["period", "kind", "organisation"]) {  // the API's metadata filters, those filled in
    const value = $(name).value.trim();
    if (value) body[name] = value;
  }
  say("Searching…");
  const answer = await guarded(() => api("/v1/kb/search", { method: "POST", body: JSON.stringify(body) }));
  if (!answer) return;
  state.results = answer.results;
  state.query = query;
  renderResults(answer);
  say(`${answer.results.length} results`);
}

function renderResults(answer) {
  // how the results were ranked (score parts, language notes, what failed) is for those who open it
  const notes = $("notes");
  notes.hidden = !answer.warnings.length;
  notes.open = false;
  $("notes-count").textContent = String(answer.warnings.length);
  $("notes-list").replaceChildren(...answer.warnings.map((w) => el("li", {}, w)));
  const list = $("results");
  list.replaceChildren();
  answer.results.forEach((row, index) => {
    const fallback = row.retrievalSource === "fallback_pages";
    const where = pageLabel(row.pageIndex, row.pageLabel) + (row.pageEnd > row.pageIndex ? `–${row.pageEnd + 1}` : "");
    const title = row.documentTitle || row.sourceUri || row.documentId;
    const thumb = row.pageImageUrl
      ? el("img", { className: "thumb", src: row.pageImageUrl, alt: "", loading: "lazy" })
      : el("span", { className: "thumb", "aria-hidden": "true" }, "text");
    const about = aboutDocument(row.documentMetadata);
    const meta = el("span", { className: "meta" },
      about ? el("span", { className: "about" }, about) : null,
      el("span", {}, where),
      row.sectionTitle ? el("span", { className: "section" }, "§ " + row.sectionTitle) : null,
      fallback ? el("span", { className: "badge fallback" }, "from page text")
        : el("span", { className: "score" }, `score ${Number(row.score).toFixed(3)}`),
      row.versionNotice ? el("span", { className: "badge older" }, "last good version") : null,
      el("span", {}, row.knowledgeBaseId));
    const open = el("button", { type: "button", className: "open", "aria-label": `${title}, ${where}: show where it came from` },
      el("span", { className: "title" }, title));
    const documentButton = el("button", { type: "button", className: "quiet small" }, "All chunks of this document");
    documentButton.addEventListener("click", () => openDocument(row.documentId, row.chunkId));
    const card = el("li", { className: "result" + (fallback ? " fallback" : ""), "data-index": index },
      thumb,
      el("div", { className: "body" }, open, meta,
        el("div", { className: "passage" }, coveredBy(answer.results, index) >= 0
          ? el("span", { className: "meta" }, `Its passage is in result ${coveredBy(answer.results, index) + 1} above (the same page).`)
          : passage(compact(row.context || row.content), state.query)),
        el("div", { className: "actions" }, documentButton,
          row.fileUrl ? el("a", { href: row.fileUrl, target: "_blank", rel: "noopener", className: "small" }, "Open the original") : null,
          scoreDetails(row))));
    open.addEventListener("click", () => openResult(index));
    card.addEventListener("click", (event) => {
      if (!event.target.closest("button, a, details")) openResult(index);
    });
    list.append(card);
  });
  closeLineage(false);
}

function scoreDetails(row) {
  const scores = row.scores || {};
  const parts = Object.entries(scores).filter(([, v]) => v !== null && v !== undefined)
    .map(([name, v]) => el("li", {}, `${name} ${Number(v).toFixed(3)}`));
  const lines = [];
  if (row.retrievalSource === "fallback_pages") lines.push(el("li", {}, "chunk search did not answer: the page's text from the catalog"));
  if (row.versionNotice) lines.push(el("li", {}, row.versionNotice));
  if (!parts.length && !lines.length) return null;
  return el("details", { className: "why" }, el("summary", {}, "Score details"), el("ul", {}, ...parts, ...lines));
}

// ---------------------------------------------------------------- lineage
async function openResult(index) {
  const row = state.results[index];
  state.active = index;
  document.querySelectorAll(".result").forEach((li) => li.classList.toggle("active", Number(li.dataset.index) === index));
  state.lineage = null;
  if (row.chunkId) {
    const found = await guarded(() => api(`/v1/chunks/${encodeURIComponent(row.chunkId)}/lineage`));
    if (!found) return;
    state.lineage = found;
    state.pageCount = found.document.pageCount;
    renderFacts(found);
    showLineagePanel();
    await showPage(found.documentId || found.document.documentId, found.pageIndex, found.pages.find((p) => p.pageIndex === found.pageIndex));
  } else {
    renderFacts(null, row);
    showLineagePanel();
    await showPage(row.documentId, row.pageIndex);
  }
}

function showLineagePanel() {
  $("lineage").hidden = false;
  document.querySelector(".split").classList.remove("closed");
  $("lineage").focus();
}

function closeLineage(restoreFocus = true) {
  $("lineage").hidden = true;
  document.querySelector(".split").classList.add("closed");  // the results take the width
  state.lineage = null;
  if (restoreFocus && state.active !== null) {
    const button = document.querySelector(`.result[data-index="${state.active}"] button.open`);
    if (button) button.focus();
  }
}

function renderFacts(found, row) {
  const verified = $("verified");
  const dl = $("doc-version");
  const runs = $("runs").querySelector("tbody");
  dl.replaceChildren();
  runs.replaceChildren();
  if (!found) {
    verified.className = "verified";
    verified.textContent = "A page-fallback result: page text from Postgres, no chunk to verify.";
    addFact(dl, "document", row.documentTitle || row.documentId);
    addFact(dl, "source", row.sourceUri);
    return;
  }
  const v = found.verification || {};
  verified.className = "verified " + (found.verified ? "yes" : "no");
  verified.textContent = found.verified ? "✓ verified: the chunk is in its pages' stored text, same version"
    : `✗ not verified (content in pages: ${v.contentFoundInPages}, versions match: ${v.versionsMatch})`;
  const doc = found.document;
  addFact(dl, "title", doc.title);
  addFact(dl, "source", doc.sourceUri);
  addFact(dl, "sha256", doc.version);
  if (doc.currentVersion && doc.currentVersion !== doc.version) addFact(dl, "current", doc.currentVersion);
  addFact(dl, "size", doc.sizeBytes !== null && doc.sizeBytes !== undefined ? `${doc.sizeBytes.toLocaleString()} bytes` : null);
  addFact(dl, "type", [doc.sourceKind, doc.mime].filter(Boolean).join(" · "));
  addFact(dl, "status", doc.status);
  addFact(dl, "knowledge base", doc.knowledgeBaseId);
  addFact(dl, "chunk", `${found.chunkId} (#${found.chunkIndex}, ${found.kind})`);
  addFact(dl, "section", found.sectionTitle);
  if (doc.fileUrl) {
    dl.append(el("dt", {}, "original"), el("dd", {}, el("a", { href: doc.fileUrl, target: "_blank", rel: "noopener" }, "open the file")));
  }
  const all = el("button", { type: "button", className: "quiet small" }, "All chunks of this document");
  all.addEventListener("click", () => openDocument(doc.documentId, found.chunkId));
  dl.append(el("dt", {}, "chunks"), el("dd", {}, all));
  for (const run of found.runs) {
    runs.append(el("tr", {}, el("td", {}, run.asset), el("td", {}, run.runId ? runLink(run.runId, run.url) : "—")));
  }
  $("lineage-runs-note").hidden = Boolean(state.dagsterUrl);
}

// a run id: a link into the Dagster UI when KB_DAGSTER_URL is set, else the id (the page says how to link it)
function runLink(runId, url, shown) {
  const text = shown ? runId.slice(0, shown) : runId;
  return url ? el("a", { href: url, target: "_blank", rel: "noopener", title: runId }, text)
    : el("code", { title: `${runId} (set KB_DAGSTER_URL to link runs to the Dagster UI)` }, text);
}

function addFact(dl, name, value) {
  if (value === null || value === undefined || value === "") return;
  dl.append(el("dt", {}, name), el("dd", {}, String(value)));
}

async function showPage(documentId, pageIndex, fromLineage) {
  let page = fromLineage;
  if (!page || !("text" in page)) {
    page = await guarded(() => api(`/v1/documents/${encodeURIComponent(documentId)}/pages/${pageIndex}`));
    if (!page) return;
    if (page.pageCount !== null && page.pageCount !== undefined) state.pageCount = page.pageCount;
  }
  state.documentId = documentId;
  state.pageIndex = pageIndex;
  state.page = page;
  $("page-label").textContent = pageLabel(pageIndex, page.pageLabel) + (state.pageCount ? ` of ${state.pageCount}` : "");
  $("prev-page").disabled = pageIndex <= 0;
  $("next-page").disabled = state.pageCount ? pageIndex >= state.pageCount - 1 : false;
  renderPageImage(page);
  renderPageText(page);
}

function renderPageImage(page) {
  const frame = $("page-frame");
  frame.querySelectorAll(".region").forEach((r) => r.remove());
  const image = $("page-image");
  const url = page.imageUrl || page.pageImageUrl;
  const lineage = state.lineage;
  const regions = lineage ? lineage.regions.filter((r) => r.pageIndex === state.pageIndex) : [];
  placePageText(!url);
  if (!url) {
    frame.classList.add("empty");
    image.removeAttribute("src");
    $("page-caption").textContent = lineage ? "This format has no page image: its text, the chunk marked." : "";
    return;
  }
  frame.classList.remove("empty");
  image.alt = `Image of ${pageLabel(state.pageIndex, page.pageLabel)}` + (regions.length ? ", the chunk highlighted" : "");
  const draw = () => {
    frame.querySelectorAll(".region").forEach((r) => r.remove());
    if (!page.width || !page.height) return;
    for (const r of regions) {   // page units -> percentages of the image, whatever size it is shown at
      const box = el("div", { className: "region", "aria-hidden": "true" });
      box.style.left = `${(100 * r.l) / page.width}%`;
      box.style.top = `${(100 * r.t) / page.height}%`;
      box.style.width = `${(100 * (r.r - r.l)) / page.width}%`;
      box.style.height = `${(100 * (r.b - r.t)) / page.height}%`;
      frame.append(box);
    }
  };
  image.onload = draw;
  image.src = url;
  if (image.complete && image.naturalWidth) draw();
  $("page-caption").textContent = regions.length
    ? `${regions.length} highlighted region${regions.length > 1 ? "s" : ""}: where the chunk is on this page`
    : lineage ? "The chunk is not on this page (← → to move between pages)" : "";
}

// a format without page images (Markdown, HTML, text, code, CSV) shows its page text where the image would be
function placePageText(asSheet) {
  const box = $("page-text");
  box.classList.toggle("sheet", asSheet);
  $("page-text-title").hidden = asSheet;
  if (asSheet) $("page-figure").insertBefore(box, $("page-caption"));
  else $("page-text-title").after(box);
}

function renderPageText(page) {
  const box = $("page-text");
  const text = page.text || "";
  const plain = (piece) => document.createTextNode(piece);
  box.replaceChildren();
  const lineage = state.lineage;
  if (!lineage || state.pageIndex < lineage.pageIndex || state.pageIndex > lineage.pageEnd) {
    box.append(rich(text, plain));
    return;
  }
  // the chunk's span in the joined text of its pages, cut to this page
  const pages = lineage.pages;
  let joined = "", at = 0;
  for (const p of pages) {
    if (joined) joined += "\n";
    if (p.pageIndex === state.pageIndex) at = joined.length;
    joined += p.text;
  }
  const span = chunkSpan(joined, lineage.content, lineage.tableHeader);
  if (!span) { box.append(rich(text, plain)); return; }
  const start = Math.max(0, span[0] - at), end = Math.min(text.length, span[1] - at);
  if (end <= start) { box.append(rich(text, plain)); return; }
  box.append(rich(text, (piece, from) => spanMarked(piece, from, start, end)));
  const mark = box.querySelector("mark");
  if (mark) mark.scrollIntoView({ block: "nearest" });
}

function turnPage(step) {
  if ($("lineage").hidden || !state.documentId) return;
  const next = state.pageIndex + step;
  if (next < 0 || (state.pageCount && next >= state.pageCount)) return;
  const fromLineage = state.lineage ? state.lineage.pages.find((p) => p.pageIndex === next) : null;
  showPage(state.documentId, next, fromLineage);
}

// ---------------------------------------------------------------- documents
async function loadDocuments() {
  const kb = $("documents-kb").value;
  const body = $("documents-table").querySelector("tbody");
  if (!kb) { body.replaceChildren(); return; }
  const answer = await guarded(() => api(`/v1/knowledge-bases/${encodeURIComponent(kb)}/documents`));
  if (!answer || $("documents-kb").value !== kb) return;  // another knowledge base was chosen meanwhile
  body.replaceChildren(...answer.documents.map((d) => el("tr", { "data-document": d.documentId },
    el("td", { "data-label": "document" }, documentLink(d), el("div", { className: "meta" }, d.sourcePath)),
    el("td", { "data-label": "status" }, el("span", { className: "badge " + d.status }, d.status)),
    el("td", { "data-label": "pages" }, d.pages === null ? "—" : String(d.pages)),
    el("td", { "data-label": "chunks" }, d.chunks === null ? "—" : String(d.chunks)),
    el("td", { "data-label": "last run" }, d.lastRunId ? runLink(d.lastRunId, d.lastRunUrl, 8) : "—",
      d.updatedAt ? el("div", { className: "meta" }, new Date(d.updatedAt).toLocaleString()) : null),
    el("td", { className: d.error ? "error" : "", "data-label": "failure" }, d.error || ""))));
  $("runs-note").hidden = Boolean(state.dagsterUrl);
  say(`${answer.documents.length} documents in ${kb}`);
}

function documentLink(d) {
  const button = el("button", { type: "button", className: "link title" }, d.title || d.sourcePath);
  button.addEventListener("click", () => openDocument(d.documentId));
  return button;
}

// ---------------------------------------------------------------- one document: its chunks by page
async function openDocument(documentId, chunkId) {
  const answer = await guarded(() => api(`/v1/documents/${encodeURIComponent(documentId)}/chunks`));
  if (!answer) return;
  const doc = answer.document;
  $("tab-document").hidden = false;
  selectTab("document");
  $("document-title").textContent = doc.title || doc.sourcePath;
  $("document-file").href = answer.fileUrl;
  const dl = $("document-facts");
  dl.replaceChildren();
  addFact(dl, "source", doc.sourceUri);
  addFact(dl, "knowledge base", doc.knowledgeBaseId);
  addFact(dl, "about", aboutDocument(doc.metadata));
  addFact(dl, "status", doc.status + (doc.error ? ` (${doc.error})` : ""));
  addFact(dl, "pages", doc.pages);
  addFact(dl, "chunks", answer.chunks.length);
  addFact(dl, "sha256", answer.version);
  $("document-note").hidden = answer.published || !answer.chunks.length;
  $("document-note").textContent = "These chunks are of a file version search does not serve yet.";
  const byPage = new Map();
  for (const chunk of answer.chunks) {
    if (!byPage.has(chunk.pageIndex)) byPage.set(chunk.pageIndex, []);
    byPage.get(chunk.pageIndex).push(chunk);
  }
  const pages = [...byPage].map(([index, chunks]) => el("section", { className: "doc-page", "data-page": index },
    el("h3", {}, pageLabel(index, chunks[0].pageLabel)),
    el("ol", { className: "chunks" }, ...chunks.map((c) => el("li", { className: "chunk" + (c.chunkId === chunkId ? " active" : ""), "data-chunk": c.chunkId },
      el("div", { className: "meta" },
        el("span", {}, `#${c.chunkIndex}`),
        c.pageEnd > c.pageIndex ? el("span", {}, `to page ${c.pageEnd + 1}`) : null,
        c.sectionTitle ? el("span", { className: "section" }, "§ " + c.sectionTitle) : null,
        el("span", {}, c.kind)),
      el("div", { className: "chunk-text" }, rich(c.content, (piece) => document.createTextNode(piece))))))));
  $("document-pages").replaceChildren(...pages);
  say(`${answer.chunks.length} chunks on ${byPage.size} pages`);
  const active = document.querySelector("#document-pages .chunk.active");
  if (active) active.scrollIntoView({ block: "center" });
  else window.scrollTo(0, 0);
}

function selectTab(name) {
  for (const tab of ["search", "documents", "document"]) {
    const selected = tab === name;
    $(`tab-${tab}`).setAttribute("aria-selected", String(selected));
    $(`view-${tab}`).hidden = !selected;
  }
  if (name === "documents") loadDocuments();
}

// ---------------------------------------------------------------- wiring
$("search-form").addEventListener("submit", search);
$("close-lineage").addEventListener("click", () => closeLineage());
$("prev-page").addEventListener("click", () => turnPage(-1));
$("next-page").addEventListener("click", () => turnPage(1));
$("tab-search").addEventListener("click", () => selectTab("search"));
$("tab-documents").addEventListener("click", () => selectTab("documents"));
$("tab-document").addEventListener("click", () => selectTab("document"));
$("documents-kb").addEventListener("change", loadDocuments);
$("key-change").addEventListener("click", () => askForKey(""));
$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.key = $("key-input").value.trim();
  sessionStorage.setItem("kb-key", state.key);
  $("key-dialog").close();
  start();
});
document.addEventListener("keydown", (event) => {
  const typing = ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement.tagName);
  if (event.key === "Escape" && !$("lineage").hidden) { closeLineage(); return; }
  if (typing || $("lineage").hidden) return;
  if (event.key === "ArrowLeft" || event.key === "[") { turnPage(-1); event.preventDefault(); }
  if (event.key === "ArrowRight" || event.key === "]") { turnPage(1); event.preventDefault(); }
});
start();
