"""Issue 12's figures in one run, on the dev corpus: how close an ingest comes to the bare work.

    .venv/bin/python benchmarks/hardware_speed.py [--home /tmp/kb-bench-speed] [--keep]
        [--cache ~/.cache/kb-assets/dev-corpus] [--encoder-passages 600]

Printed, in this order, with the load average beside each (on a shared machine figures only compare
within one run):

1. full ingest of the dev corpus (5 manuals) into a fresh ``--home`` on the embedded defaults, the no-op
   re-run (every file unchanged) and its share, and the peak RSS of the ingesting process;
2. the bare work of the same corpus done directly: pypdfium2 text of every PDF page plus plain
   sentence-transformers (torch, batch 32) encoding every chunk's ``embedding_input`` as the lake holds
   it, warm (in this process, model loaded) and cold (a fresh process, as the ingest's child starts:
   imports and model load included); the ingest's ratio to each;
3. parsing alone, every PDF page: docling's native conversion (docling-parse, lines only, no images),
   ``parse_document`` without figure crops, with them, and the page PNGs ``page_images`` renders;
4. encoders on the same sample of embedding inputs: torch, onnxruntime fp32 and int8 (passages/s,
   cosine to torch);
5. a run launched as from the UI (``dagster asset materialize`` of one unchanged partition) beside a
   no-op ``kb-assets ingest`` of the same file;
6. the resident memory of a real ``kb-assets serve`` process after 100 searches (Postgres and Milvus Lite
   are other processes, not counted).

``--keep`` leaves the home and its services running (``retrieval_quality.py --home`` can score it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from dev_corpus import KNOWLEDGE_BASES, fetch  # siblings: this script's folder is first on sys.path
from materialize_one import materialize_argv

REPO = Path(__file__).resolve().parents[1]

BIN = Path(sys.executable).parent


def load() -> str:
    return f"(load {os.getloadavg()[0]:.1f})"


def ingest_child(cache: Path) -> dict:
    """Inside a child process: the full ingest and the no-op re-run, as the CLI's ``ingest`` runs them."""
    from kb_assets.launch.ingest import ingest
    from kb_assets.settings import Settings
    from kb_assets.stores import Stores

    settings = Settings.from_env()
    started = time.perf_counter()
    failures = []
    for kb, files in KNOWLEDGE_BASES.items():
        failures += ingest([cache / f for f in files], kb, settings).failures
    full = time.perf_counter() - started
    started = time.perf_counter()
    for kb, files in KNOWLEDGE_BASES.items():
        ingest([cache / f for f in files], kb, settings)
    noop = time.perf_counter() - started
    documents = Stores(settings).catalog.list_documents(list(KNOWLEDGE_BASES))
    return {
        "full_s": full,
        "noop_s": noop,
        "failures": [str(f) for f in failures],
        "documents": len(documents),
        "pages": sum(d.page_count or 0 for d in documents),
        "chunks": sum(d.chunk_count or 0 for d in documents),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def pdf_paths(cache: Path) -> list[Path]:
    return [cache / f for files in KNOWLEDGE_BASES.values() for f in files]


def pdfium_text_seconds(paths: list[Path]) -> tuple[int, float]:
    import pypdfium2 as pdfium

    started, pages = time.perf_counter(), 0
    for path in paths:
        pdf = pdfium.PdfDocument(str(path))
        for i in range(len(pdf)):
            pdf[i].get_textpage().get_text_range()
            pages += 1
        pdf.close()
    return pages, time.perf_counter() - started


def embedding_inputs(settings) -> list[str]:
    from kb_assets.stores import Stores

    stores = Stores(settings)
    texts: list[str] = []
    for doc in stores.catalog.list_documents(list(KNOWLEDGE_BASES)):
        texts += stores.lake.read("chunks", doc.document_id)["embedding_input"].to_list()
    return texts


def bare_encode_seconds(texts: list[str]) -> float:
    """Plain sentence-transformers on torch, batch 32, warmed up: the seconds to encode ``texts``."""
    from sentence_transformers import SentenceTransformer

    from kb_assets.embedding.model import resolve_model_path

    plain = SentenceTransformer(str(resolve_model_path("all-MiniLM-L6-v2")[0]), device="cpu", local_files_only=True)
    plain.encode(texts[:8])
    started = time.perf_counter()
    plain.encode(texts, batch_size=32)
    return time.perf_counter() - started


def bare_child(inputs: Path, cache: Path) -> None:
    """The bare work from a cold start, in this (child) process: text of every page, then every input encoded."""
    from sentence_transformers import SentenceTransformer

    from kb_assets.embedding.model import resolve_model_path

    pdfium_text_seconds(pdf_paths(cache))
    plain = SentenceTransformer(str(resolve_model_path("all-MiniLM-L6-v2")[0]), device="cpu", local_files_only=True)
    plain.encode(json.loads(inputs.read_text()), batch_size=32)


def parse_figures(paths: list[Path]) -> None:
    from kb_assets.parsing import ParseOptions, parse_document
    from kb_assets.parsing.converter import convert
    from kb_assets.parsing.render import render_page_images

    parse_document(REPO / "examples" / "corpus" / "platform-handbook.pdf")  # docling set-up, not timed
    pages = 0
    timings = {
        "docling native conversion (no images)": 0.0,
        "parse_document, no figure crops": 0.0,
        "parse_document, figure crops (as parsed_pages)": 0.0,
        "page PNGs (page_images asset)": 0.0,
    }
    for path in paths:
        started = time.perf_counter()
        result = convert(path, path.name)
        timings["docling native conversion (no images)"] += time.perf_counter() - started
        pages += len(result.pages)
        started = time.perf_counter()
        parse_document(path, options=ParseOptions(images=False))
        timings["parse_document, no figure crops"] += time.perf_counter() - started
        started = time.perf_counter()
        parsed = parse_document(path, options=ParseOptions(images=True))
        timings["parse_document, figure crops (as parsed_pages)"] += time.perf_counter() - started
        started = time.perf_counter()
        render_page_images(path.read_bytes(), "pdf", list(range(len(parsed.pages))))
        timings["page PNGs (page_images asset)"] += time.perf_counter() - started
    for what, seconds in timings.items():
        print(f"  {what:<48} {pages / seconds:6.1f} pages/s ({seconds:.1f} s for {pages} pages)")
    with_images = timings["parse_document, figure crops (as parsed_pages)"] + timings["page PNGs (page_images asset)"]
    print(f"  {'parse + page PNGs in one step (before issue 12)':<48} {pages / with_images:6.1f} pages/s {load()}")


def encoder_figures(texts: list[str]) -> None:
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from kb_assets.embedding.model import EmbeddingModel, resolve_model_path

    path, _ = resolve_model_path("all-MiniLM-L6-v2")
    plain = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    plain.encode(texts[:8])
    started = time.perf_counter()
    reference = np.asarray(plain.encode(texts, batch_size=32, normalize_embeddings=True), dtype=np.float32)
    print(
        f"  {'torch (sentence-transformers, batch 32)':<48} "
        f"{len(texts) / (time.perf_counter() - started):6.1f} passages/s"
    )
    for model_id in ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2+int8"):
        model = EmbeddingModel(model_id)
        model.encode(["warm"])  # exports / quantizes once (cached)
        started = time.perf_counter()
        vectors = np.asarray(model.encode(texts), dtype=np.float32)
        seconds = time.perf_counter() - started
        cosine = (vectors * reference).sum(axis=1)
        print(
            f"  {model.backend:<48} {len(texts) / seconds:6.1f} passages/s; cosine to torch "
            f"min {cosine.min():.5f} mean {cosine.mean():.5f}"
        )
    print(f"  {load()}")


def ui_path_figures(settings, env: dict, cache: Path) -> None:
    from kb_assets.launch.ingest import ingest
    from kb_assets.launch.instance import dagster_instance
    from kb_assets.stores import Stores

    doc = next(
        d for d in Stores(settings).catalog.list_documents(["r-manuals"]) if d.source_path.endswith("R-data.pdf")
    )
    started = time.perf_counter()
    subprocess.run(
        materialize_argv(doc.partition_key),
        env=dict(env, DAGSTER_HOME=str(settings.dagster_home)),
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    ui = time.perf_counter() - started
    stats = dagster_instance(settings).get_run_stats(dagster_instance(settings).get_runs(limit=1)[0].run_id)
    started = time.perf_counter()
    subprocess.run(
        [str(BIN / "kb-assets"), "ingest", str(cache / KNOWLEDGE_BASES["r-manuals"][0]), "--kb", "r-manuals"],
        env=env,
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    cli = time.perf_counter() - started
    started = time.perf_counter()
    ingest([cache / KNOWLEDGE_BASES["r-manuals"][0]], "r-manuals", settings)
    warm = time.perf_counter() - started
    print(
        f"  one unchanged partition (R-data): `dagster asset materialize` {ui:.1f} s (its run, in process: "
        f"{stats.end_time - stats.start_time:.1f} s; the rest is the process and its code load); `kb-assets "
        f"ingest` {cli:.1f} s (no run starts); ingest() in a warm process {warm:.1f} s {load()}"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_figures(env: dict) -> None:
    questions = [json.loads(line) for line in (REPO / "benchmarks" / "detail_questions.jsonl").open()]
    port = free_port()
    server = subprocess.Popen(
        [str(BIN / "kb-assets"), "serve", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(base + "/healthz", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        started_mb = rss_mb(server.pid)["VmRSS"]
        for n in range(100):
            q = questions[n % len(questions)]
            body = json.dumps({"query": q["query"], "knowledgeBaseIds": [q["kb"]], "limit": 5}).encode()
            request = urllib.request.Request(base + "/v1/kb/search", body, {"Content-Type": "application/json"})
            urllib.request.urlopen(request, timeout=60).read()
        after = rss_mb(server.pid)
        print(
            f"  kb-assets serve: {started_mb:.0f} MB resident when up, {after['VmRSS']:.0f} MB after 100 "
            f"searches (peak {after['VmHWM']:.0f} MB); torch imported: {torch_loaded(server.pid)}"
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


def rss_mb(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields


def torch_loaded(pid: int) -> bool:
    return "libtorch_cpu" in Path(f"/proc/{pid}/maps").read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", default="/tmp/kb-bench-speed")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kb-assets" / "dev-corpus"))
    parser.add_argument("--encoder-passages", type=int, default=600)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bare-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    cache = Path(args.cache).expanduser()
    if args.bare_child:
        bare_child(args.bare_child, cache)
        return
    if args.child:
        print(json.dumps(ingest_child(cache)))
        return
    fetch(cache)
    home = Path(args.home).resolve()
    shutil.rmtree(home, ignore_errors=True)
    env = dict(os.environ, KB_HOME=str(home))
    env.pop("DAGSTER_HOME", None)
    os.environ.update(KB_HOME=str(home))
    os.environ.pop("DAGSTER_HOME", None)
    print(f"{os.cpu_count()} cores {load()}")

    print("1. full ingest of the dev corpus (embedded defaults)")
    child = subprocess.run(
        [sys.executable, __file__, "--child", "--cache", str(cache)], env=env, capture_output=True, text=True, cwd=REPO
    )
    if child.returncode:
        sys.exit(f"ingest failed:\n{child.stderr[-4000:]}")
    ingest_figures = json.loads(child.stdout.strip().splitlines()[-1])
    full = ingest_figures["full_s"]
    print(
        f"  {ingest_figures['documents']} documents, {ingest_figures['pages']} pages, {ingest_figures['chunks']} "
        f"chunks in {full:.1f} s ({ingest_figures['pages'] / full:.2f} pages/s); failures: {ingest_figures['failures']}"
    )
    print(
        f"  no-op re-run {ingest_figures['noop_s']:.1f} s ({100 * ingest_figures['noop_s'] / full:.1f}% of the "
        f"full ingest); peak RSS: the ingesting process {ingest_figures['peak_mb']:.0f} MB, the largest of it "
        f"and its workers {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MB {load()}"
    )

    from kb_assets.services import stop_milvus, stop_postgres
    from kb_assets.settings import Settings

    settings = Settings.from_env()
    try:
        print("2. bare work: pypdfium2 text + sentence-transformers (torch, batch 32) on every embedding input")
        texts = embedding_inputs(settings)
        pages, text_s = pdfium_text_seconds(pdf_paths(cache))
        encode_s = bare_encode_seconds(texts)
        bare = text_s + encode_s
        print(
            f"  warm (this process, model loaded): pypdfium2 text, {pages} pages: {text_s:.1f} s; encode "
            f"{len(texts)} inputs: {encode_s:.1f} s; bare work {bare:.1f} s; the ingest costs {full / bare:.2f}x that"
        )
        with tempfile.NamedTemporaryFile("w", suffix=".json") as inputs:
            json.dump(texts, inputs)
            inputs.flush()
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, __file__, "--bare-child", inputs.name, "--cache", str(cache)],
                env=env,
                cwd=REPO,
                check=True,
                capture_output=True,
            )
            cold = time.perf_counter() - started
        print(
            f"  cold (a fresh process, as the ingest's: imports, model load, text, encode): {cold:.1f} s; "
            f"the ingest costs {full / cold:.2f}x that {load()}"
        )

        print("3. parsing alone, every PDF page")
        parse_figures(pdf_paths(cache))

        step = max(1, len(texts) // args.encoder_passages)
        print(f"4. encoders on {len(texts[::step])} of those embedding inputs")
        encoder_figures(texts[::step])

        print("5. a run launched as from the UI against a no-op ingest")
        ui_path_figures(settings, env, cache)

        print("6. the retrieval service's memory")
        serve_figures(env)
    finally:
        if args.keep:
            print(f"kept {home} (services running; `KB_HOME={home} kb-assets services down` stops them)")
        else:
            stop_milvus(home)
            stop_postgres(home)
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
