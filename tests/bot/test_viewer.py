"""The citation viewer: safe paths, the highlighted span, and the page in a real headless browser."""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.http_server import make_server, serve_in_thread
from bot.viewer import render_view, safe_path
from retrieval.citations import make_citations
from retrieval.engine import Engine
from retrieval.sandbox import ExtractionRunner
from tests.conftest import EXAMPLES, ROOT, make_engine

ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    shutil.copytree(EXAMPLES, d)
    (tmp_path / "secret.md").write_text("# Secret\n\nsalaries")
    os.symlink(tmp_path / "secret.md", d / "escape.md")
    return d


def test_paths_that_leave_the_docs_folder_are_refused(docs: Path) -> None:
    assert safe_path(docs, "on-call.md") == (docs / "on-call.md").resolve()
    for bad in ("../secret.md", "%2E%2E/secret.md", "/etc/passwd", "escape.md", "a/../../secret.md", "", "missing.md"):
        assert safe_path(docs, bad) is None, bad


def test_the_cited_span_is_highlighted_and_everything_is_escaped(docs: Path) -> None:
    (docs / "x.md").write_text("# X <b>\n\nBefore. The <script>alert(1)</script> part. After.\n")
    text = (docs / "x.md").read_text()
    a = text.index("The <script>")
    b = text.index(" After")
    status, page = render_view(docs, "x.md", {"from": str(a), "to": str(b)}, ExtractionRunner().extract)
    assert status == 200
    assert '<mark id="hit">The &lt;script&gt;alert(1)&lt;/script&gt; part.</mark>' in page
    assert "<script>alert" not in page and "X &lt;b&gt;" in page
    assert render_view(docs, "../secret.md", {}, ExtractionRunner().extract)[0] == 404


@pytest.fixture
def long_engine(embedder, tmp_path: Path) -> Engine:  # type: ignore[no-untyped-def]
    """One long document, so that "scrolled into view" means something."""
    docs = tmp_path / "long-docs"
    docs.mkdir()
    filler = "\n\n".join(f"Clause {i}: the committee reviews item {i} at its monthly meeting." for i in range(120))
    answer = "Badge photos are retaken every three years at the reception desk on Tuesdays."
    (docs / "rules.md").write_text(f"# House Rules\n\n## General\n\n{filler}\n\n## Badges\n\n{answer}\n")
    eng = make_engine(embedder, tmp_path / "long-data", docs)
    eng.sync()
    return eng


@pytest.fixture
def viewer_server(long_engine: Engine) -> Iterator[str]:
    docs, runner = long_engine.cfg.docs_dir, long_engine.indexer.runner
    server = make_server(
        None, "127.0.0.1", 0, lambda: {"ok": True}, lambda p, q: render_view(docs, p, q, runner.extract)
    )  # type: ignore[arg-type]
    serve_in_thread(server)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_citation_link_opens_the_viewer_with_the_quote_in_view(long_engine: Engine, viewer_server: str) -> None:
    webdriver = pytest.importorskip("selenium.webdriver")
    chromium, driver_bin = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver_bin, "Debian's chromium and chromium-driver must be installed (.ci/run does it)"
    hit = long_engine.searcher().search("How often are badge photos retaken?", k=1).hits[0]
    assert "Badge photos" in hit.chunk.content and hit.chunk.start > 5000
    (cite,) = make_citations([hit], None, long_engine.cfg.docs_dir, viewer_url=viewer_server)
    assert cite.url.startswith(f"{viewer_server}/view/") and f"from={hit.chunk.start}&to={hit.chunk.end}" in cite.url
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(f"{viewer_server}/view/..%2F..%2Fetc%2Fpasswd", timeout=5)
    assert denied.value.code == 404

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,800"):
        opts.add_argument(arg)
    browser = webdriver.Chrome(service=webdriver.ChromeService(executable_path=driver_bin), options=opts)
    try:
        browser.get(cite.url)
        mark = browser.find_element("id", "hit")
        assert " ".join(mark.text.split()) == " ".join(hit.chunk.content.split())
        top, bottom, height = browser.execute_script(
            "const r = document.getElementById('hit').getBoundingClientRect(); return [r.top, r.bottom, innerHeight];"
        )
        assert browser.execute_script("return window.scrollY") > 0 and 0 <= top < height and bottom > 0
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "viewer.png"
        browser.save_screenshot(str(shot))
        print(f"screenshot: {shot}")
        assert shot.stat().st_size > 1000
    finally:
        browser.quit()
