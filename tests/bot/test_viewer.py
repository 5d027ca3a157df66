"""The citation viewer: signed links only, safe paths, channel scopes, the highlighted span,
and the page in a real headless browser."""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from bot.http_server import make_server
from bot.i18n import accepted
from bot.viewer import render_view, safe_path
from retrieval.answer.citations import Linker, make_citations
from retrieval.answer.links import LinkSigner, text_digest
from retrieval.answer.service import AnswerService
from retrieval.ingest.sandbox import ExtractionRunner
from retrieval.models.embed import SentenceTransformerEmbedder
from retrieval.models.llm import Message, OnToken
from retrieval.search.engine import Engine
from retrieval.search.gate import GateConfig
from tests.conftest import EXAMPLES, ROOT, make_engine

ARTIFACTS = ROOT / "test-artifacts"
DAY = 86400.0


class Clock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def signer() -> LinkSigner:
    return LinkSigner(b"viewer-test-secret-0123456789abc", 30 * DAY, Clock())


def _q(query: str) -> dict[str, str]:
    return dict(parse_qsl(query))


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    shutil.copytree(EXAMPLES, d)
    (tmp_path / "secret.md").write_text("# Secret\n\nsalaries")
    os.symlink(tmp_path / "secret.md", d / "escape.md")
    os.symlink("loop-b.md", d / "loop-a.md")
    os.symlink("loop-a.md", d / "loop-b.md")
    return d


def test_paths_that_leave_the_docs_folder_are_refused(docs: Path) -> None:
    assert safe_path(docs, "on-call.md") == (docs / "on-call.md").resolve()
    for bad in (
        "../secret.md",
        "%2E%2E/secret.md",
        "/etc/passwd",
        "escape.md",
        "a/../../secret.md",
        "",
        "missing.md",
        "loop-a.md",
    ):
        assert safe_path(docs, bad) is None, bad


def test_the_cited_span_is_highlighted_and_everything_is_escaped(docs: Path, signer: LinkSigner) -> None:
    (docs / "x.md").write_text("# X <b>\n\nBefore. The <script>alert(1)</script> part. After.\n")
    text = (docs / "x.md").read_text()
    a = text.index("The <script>")
    b = text.index(" After")
    query = _q(signer.sign("x.md", a, b))
    status, page = render_view(docs, "x.md", query, ExtractionRunner().extract, verify=signer.verify)
    assert status == 200
    assert '<mark id="hit">The &lt;script&gt;alert(1)&lt;/script&gt; part.</mark>' in page
    assert "<script>alert" not in page and "X &lt;b&gt;" in page


def test_a_link_to_words_that_have_since_moved_says_so_instead_of_marking_others(
    docs: Path, signer: LinkSigner
) -> None:
    """A link binds the words it cites, not only their place: after an edit above them the
    same range holds other words, and marking those would show a source the answer never had."""
    run = ExtractionRunner().extract
    text = (docs / "on-call.md").read_text()
    cited = "acknowledge the page within 5 minutes"
    a = text.index(cited)
    query = _q(signer.sign("on-call.md", a, a + len(cited), text_digest(cited)))
    status, page = render_view(docs, "on-call.md", query, run, verify=signer.verify)
    assert status == 200 and f'<mark id="hit">{cited}</mark>' in page and "changed since" not in page
    old = _q(signer.sign("on-call.md", a, a + len(cited)))  # minted before links bound their words
    (docs / "on-call.md").write_text("# On-call Handbook\n\nA new first paragraph, added later.\n\n" + text[19:])
    status, page = render_view(docs, "on-call.md", query, run, verify=signer.verify)
    assert status == 200 and "<mark" not in page and "has changed since Footnote cited it" in page
    assert "A new first paragraph" in page  # the document as it is now
    assert (
        render_view(docs, "on-call.md", {**query, "h": text_digest("other words")}, run, verify=signer.verify)[0] == 403
    )
    assert '<mark id="hit">' in render_view(docs, "on-call.md", old, run, verify=signer.verify)[1]


def test_only_signed_unexpired_links_to_files_inside_the_docs_folder_open(docs: Path) -> None:
    clock = Clock()
    signer = LinkSigner(b"viewer-test-secret-0123456789abc", 30 * DAY, clock)
    run = ExtractionRunner().extract

    def view(path: str, query: dict[str, str], lang: str | None = None) -> tuple[int, str]:
        return render_view(docs, path, query, run, verify=signer.verify, lang=lang)

    good = _q(signer.sign("on-call.md", 0, 20))
    status, page = view("on-call.md", good)
    assert status == 200 and '<mark id="hit">' in page
    # Unsigned, with the range alone, or with a signature made by another key.
    for query in ({}, {"from": "0", "to": "20"}, _q(LinkSigner(b"x" * 32, DAY, clock).sign("on-call.md", 0, 20))):
        status, page = view("on-call.md", query)
        assert status == 403 and "<mark" not in page and "on-call" not in page, query
    assert "no signature" in view("on-call.md", {})[1]
    # Edited path (also percent-encoded or dotted variants of the same file), edited range.
    for path in ("time-off.txt", "./on-call.md", "on-call.md%00", "%6Fn-call.md/"):
        assert view(path, good)[0] == 403, path
    assert view("%6Fn-call.md", good)[0] == 200  # the same path, merely percent-encoded
    status, page = view("on-call.md", {**good, "to": "2000"})
    assert status == 403 and "changed after Footnote made it" in page
    # A signed link to something outside the folder still does not leave it.
    for path in ("escape.md", "../secret.md", "missing.md"):
        assert view(path, _q(signer.sign(path, 0, 5)))[0] == 404, path
    # Unsigned requests learn nothing, not even which files exist.
    assert view("../secret.md", {})[0] == view("missing.md", {})[0] == 403
    clock.t += 31 * DAY
    status, page = view("on-call.md", good)
    assert status == 403 and "expired" in page


def test_the_viewer_speaks_the_language_the_readers_browser_asks_for(docs: Path, signer: LinkSigner) -> None:
    run = ExtractionRunner().extract

    def view(path: str, query: dict[str, str], lang: str | None = None) -> tuple[int, str]:
        return render_view(docs, path, query, run, verify=signer.verify, lang=lang)

    def get(url: str, accept: str) -> tuple[int, str]:
        req = urllib.request.Request(url, headers={"Accept-Language": accept})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    good = signer.sign("on-call.md", 0, 20, text_digest((docs / "on-call.md").read_text()[:20]))
    with make_server(("127.0.0.1", 0), lambda: {"ok": True}, view) as server:
        status, page = get(f"{server.url}/view/on-call.md?{good}", "da-DK,da;q=0.9,en;q=0.8")
        assert status == 200 and '<html lang="da">' in page and "tegn 0–20" in page
        assert get(f"{server.url}/view/on-call.md?{good}", "en-GB,da;q=0.5")[1].count("characters 0–20") == 1
        status, page = get(f"{server.url}/view/on-call.md", "da")
        assert status == 403 and "ingen signatur" in page and "signature" not in page
        status, page = get(f"{server.url}/view/on-call.md?{good}".replace("to=20", "to=21"), "fr, de;q=0.7")
        assert status == 403 and "This link was changed" in page  # a language Footnote does not speak: English


def test_accept_language_picks_the_preferred_language_footnote_speaks() -> None:
    assert accepted("da-DK,da;q=0.9,en;q=0.8") == "da"
    assert accepted("en-US,en;q=0.9,da;q=0.8") == "en"
    assert accepted("de-DE,da;q=0.5,en;q=0.3") == "da"
    assert accepted("fr") is None and accepted("") is None and accepted(None) is None
    assert accepted("da;q=0, en;q=0.1") == "en" and accepted("da;q=abc,en") == "en"


class _CitesFirstSource:
    """A stand-in model that cites source 1 (the scoping is what is under test, not the model)."""

    name = "cites-first"
    supports_grammar = True

    def complete(self, messages: list[Message], max_tokens: int, on_token: OnToken | None = None, **_: object) -> str:
        return "[1] Here it is."


@pytest.fixture
def scoped_server(
    embedder: SentenceTransformerEmbedder, tmp_path: Path, signer: LinkSigner
) -> Iterator[tuple[Engine, str]]:
    docs = tmp_path / "scoped-docs"
    for folder, name in (("engineering", "on-call.md"), ("hr", "time-off.txt")):
        (docs / folder).mkdir(parents=True)
        shutil.copy(EXAMPLES / name, docs / folder / name)
    eng = make_engine(embedder, tmp_path / "scoped-data", docs)
    eng.sync()
    run = eng.indexer.runner.extract

    def view(path: str, query: dict[str, str], lang: str | None = None) -> tuple[int, str]:
        return render_view(docs, path, query, run, verify=signer.verify, lang=lang)

    with make_server(("127.0.0.1", 0), lambda: {"ok": True}, view) as server:
        yield eng, server.url


def test_a_link_cited_for_an_hr_channel_cannot_be_edited_into_engineering(
    scoped_server: tuple[Engine, str], signer: LinkSigner
) -> None:
    eng, base = scoped_server
    svc = AnswerService(
        eng.searcher, lambda: _CitesFirstSource(), GateConfig(threshold=10.0), links=Linker(docs_dir=eng.cfg.docs_dir, viewer_url=base, sign=signer.sign),
    )  # fmt: skip
    a = svc.answer("Who is on call for incidents this week?", folders=["hr"])  # an engineering question
    assert not a.refused and a.citations and a.collection == "hr/"
    url = urlsplit(a.citations[0].url)
    assert url.path.startswith("/view/hr/")
    status, page = _get(a.citations[0].url)
    assert status == 200 and '<mark id="hit">' in page
    query = _q(url.query)
    eng_start = (eng.cfg.docs_dir / "engineering/on-call.md").read_text().index("##")
    for path, q in (
        ("/view/engineering/on-call.md", url.query),  # the path edited, signature kept
        ("/view/hr/../engineering/on-call.md", url.query),
        ("/view/engineering/on-call.md", f"from={eng_start}&to={eng_start + 50}"),  # no signature at all
        ("/view/engineering/on-call.md", f"from=0&to=50&exp={query['exp']}&sig={query['sig']}"),
    ):
        status, page = _get(f"{base}{path}?{q}")
        assert status == 403 and "<mark" not in page, (path, q)


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
def viewer_server(long_engine: Engine, signer: LinkSigner) -> Iterator[str]:
    docs, run = long_engine.cfg.docs_dir, long_engine.indexer.runner.extract

    def view(path: str, query: dict[str, str], lang: str | None = None) -> tuple[int, str]:
        return render_view(docs, path, query, run, verify=signer.verify, lang=lang)

    with make_server(("127.0.0.1", 0), lambda: {"ok": True}, view) as server:
        yield server.url


def test_a_citation_link_opens_the_viewer_with_the_quote_in_view(
    long_engine: Engine, viewer_server: str, signer: LinkSigner
) -> None:
    webdriver = pytest.importorskip("selenium.webdriver")
    chromium, driver_bin = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver_bin, "Debian's chromium and chromium-driver must be installed (.ci/run does it)"
    hit = long_engine.searcher().search("How often are badge photos retaken?", k=1).hits[0]
    assert "Badge photos" in hit.chunk.content and hit.chunk.start > 5000
    (cite,) = make_citations([hit], Linker(None, long_engine.cfg.docs_dir, viewer_server, signer.sign))
    assert cite.url.startswith(f"{viewer_server}/view/") and f"from={hit.chunk.start}&to={hit.chunk.end}&" in cite.url
    assert f"&h={text_digest(hit.chunk.content)}&" in cite.url  # the words cited, bound by the signature
    assert "&sig=" in cite.url
    assert _get(cite.url.replace(f"to={hit.chunk.end}", f"to={hit.chunk.end + 1}"))[0] == 403
    assert _get(f"{viewer_server}/view/..%2F..%2Fetc%2Fpasswd")[0] == 403

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
