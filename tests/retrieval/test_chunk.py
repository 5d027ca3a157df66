"""The chunker's invariants, on the dev corpus with the real tokenizer, and on edge cases."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from retrieval.ingest.chunk import ChunkerConfig, chunk_document, chunk_sentence_spans, sentence_spans, sentences
from retrieval.ingest.formats.markdown import MarkdownExtractor
from retrieval.models.embed import SentenceTransformerEmbedder
from retrieval.types import Document, Section
from tests.conftest import DEV_DOCS, require_dev_set

EX = MarkdownExtractor()


def _dev_docs() -> list[Path]:
    return sorted(DEV_DOCS.glob("*.md"))


def test_dev_corpus_chunks_keep_every_invariant(embedder: SentenceTransformerEmbedder) -> None:
    require_dev_set()
    cfg = ChunkerConfig()
    total = 0
    for path in _dev_docs():
        doc = EX.extract(path.name, path.read_bytes())
        chunks = chunk_document(doc, cfg, embedder.count_tokens)
        assert chunks, path
        for c in chunks:
            total += 1
            # The quoted content slices exactly out of the canonical text.
            assert doc.text[c.start : c.end] == c.content
            assert c.content == c.content.strip() and c.content
            # No chunk crosses a section.
            sec = next(s for s in doc.sections if s.title == c.section and s.start <= c.start)
            assert c.end <= sec.end
            assert "\n## " not in "\n" + c.content
            # The header is in the embedded text only.
            header = f"[{doc.title} > {c.section}]" if c.section else f"[{doc.title}]"
            assert c.text == f"{header}\n{c.content}"
            assert not c.content.startswith(header)
            # Nothing exceeds the encoder window, by the real tokenizer.
            assert embedder.count_tokens(c.text) <= 256
            assert len(c.content) <= cfg.target
    assert total > 500


def _doc(text: str, title: str = "T") -> Document:
    return Document("d.md", title, text, (Section("S", 0, len(text)),), "markdown", "1")


def _chars_as_tokens(text: str) -> int:
    return len(text) // 2


def test_oversized_paragraph_falls_back_to_sentences() -> None:
    para = " ".join(f"Sentence number {i} says something useful about the topic." for i in range(40))
    doc = _doc(para)
    chunks = chunk_document(doc, ChunkerConfig(target=200, window=10_000), _chars_as_tokens)
    assert len(chunks) > 5
    for c in chunks:
        assert c.content.endswith(".")
        assert doc.text[c.start : c.end] == c.content


def test_code_block_without_sentences_splits_at_line_breaks() -> None:
    code = "\n".join(f"x_{i} = compute_value({i}, other_argument={i * 2})" for i in range(60))
    doc = _doc(code)
    chunks = chunk_document(doc, ChunkerConfig(target=300, window=10_000), _chars_as_tokens)
    assert len(chunks) > 3
    for c in chunks:
        assert len(c.content) <= 300
        assert c.content.startswith("x_")  # cut at a line start, never inside a line


def test_token_window_forces_a_split_even_under_the_character_target() -> None:
    text = "Short para one here.\n\nShort para two here.\n\nShort para three here."
    doc = _doc(text)
    loose = chunk_document(doc, ChunkerConfig(target=512, window=10_000), _chars_as_tokens)
    tight = chunk_document(doc, ChunkerConfig(target=512, window=20), _chars_as_tokens)
    assert len(loose) == 1
    assert len(tight) == 3
    assert all(_chars_as_tokens(c.text) <= 20 for c in tight)


def test_a_run_with_no_whitespace_is_halved_not_truncated() -> None:
    blob = "A" * 1500
    doc = _doc(blob)
    chunks = chunk_document(doc, ChunkerConfig(target=512), _chars_as_tokens)
    assert "".join(c.content for c in chunks) == blob
    assert all(len(c.content) <= 512 for c in chunks)


def test_overlap_goes_into_text_but_not_content() -> None:
    text = "First paragraph is here and long enough.\n\nSecond paragraph follows it right after."
    doc = _doc(text)
    chunks = chunk_document(doc, ChunkerConfig(target=45, overlap=10, window=10_000), _chars_as_tokens)
    assert len(chunks) == 2
    # The quoted content is exactly the chunk's own words, none of the previous chunk's.
    assert chunks[1].content == "Second paragraph follows it right after."
    assert doc.text[chunks[1].start : chunks[1].end] == chunks[1].content
    # The embedded text carries the end of the previous chunk (up to 10 characters, whole
    # words) between the header and the content.
    assert chunks[1].text.startswith("[T > S]\n") and chunks[1].text.endswith(chunks[1].content)
    between = chunks[1].text.removeprefix("[T > S]\n").removesuffix(chunks[1].content)
    assert between.strip() == "enough." and chunks[0].content.endswith(between.strip())
    no_overlap = chunk_document(doc, ChunkerConfig(target=45, overlap=0, window=10_000), _chars_as_tokens)
    assert no_overlap[1].text == "[T > S]\n" + no_overlap[1].content  # without overlap, nothing in between


def test_chunk_ids_are_stable_and_unique() -> None:
    doc = _doc("One.\n\nTwo.\n\nThree.")
    a = chunk_document(doc, ChunkerConfig(target=6), _chars_as_tokens)
    b = chunk_document(doc, ChunkerConfig(target=6), _chars_as_tokens)
    assert [c.id for c in a] == [c.id for c in b]
    assert len({c.id for c in a}) == len(a)


def _split(content: str, lines: bool = False) -> list[str]:
    return [content[a:b] for a, b in sentence_spans(content, lines=lines)]


def test_sentences_split_prose_and_lines() -> None:
    assert _split("The cat sat. Then it slept on the mat!\n- a list item here") == [
        "The cat sat.",
        "Then it slept on the mat!",
        "- a list item here",
    ]


WRAPPED = """If the card is lost, follow [these
steps](#lost) within 24 hours. Call AdTrav at (877)
472-6716 to book both air and rail.
Follow these steps:
1. Go to Concur at
   travel.gsa.gov and sign in
2. Select **Travel - New
   Booking**
| Leave | Hours |
| Annual | 4 per pay period |
```python
x = load(path)
y = x.ask(question)
```
> **Note**: to open an account you may need to call
> their help desk first.
> ## Not part of the note
The end of the page"""


def test_a_sentence_wrapped_over_lines_stays_one_sentence() -> None:
    assert _split(WRAPPED) == [
        "If the card is lost, follow [these\nsteps](#lost) within 24 hours.",
        "Call AdTrav at (877)\n472-6716 to book both air and rail.",
        "Follow these steps:",
        "1. Go to Concur at\n   travel.gsa.gov and sign in",
        "2. Select **Travel - New\n   Booking**",
        "| Leave | Hours |",
        "| Annual | 4 per pay period |",
        "x = load(path)",  # the fence lines are under 12 characters: dropped
        "y = x.ask(question)",
        "> **Note**: to open an account you may need to call\n> their help desk first.",
        "> ## Not part of the note",
        "The end of the page",
    ]


def test_numbers_rules_and_blank_lines_still_end_units() -> None:
    assert _split("The total at the end of the year was\n42.\n\n## Heading two\nBody text here.") == [
        "The total at the end of the year was\n42.",
        "## Heading two",
        "Body text here.",
    ]
    assert _split("The company was founded in\n2019. It grew fast after that.") == [
        "The company was founded in\n2019.",
        "It grew fast after that.",
    ]
    assert _split("A paragraph line here\n---\nAnother paragraph here.") == [
        "A paragraph line here",
        "Another paragraph here.",
    ]


def test_an_abbreviation_or_a_date_before_lower_case_does_not_end_a_sentence() -> None:
    assert _split("Fra 1. juli 2024 vil denne funktion være aktiveret som standard. Det gælder alle.") == [
        "Fra 1. juli 2024 vil denne funktion være aktiveret som standard.",
        "Det gælder alle.",
    ]
    assert _split("Brug f.eks. moms, bl.a. afgifter, jf. loven. Ring kl. 9 til os, ca. 5 min.") == [
        "Brug f.eks. moms, bl.a. afgifter, jf. loven.",
        "Ring kl. 9 til os, ca. 5 min.",
    ]
    assert _split("Use a tool, e.g. the linter, on each file. Then commit.") == [
        "Use a tool, e.g. the linter, on each file.",
        "Then commit.",
    ]
    # Before a capital, an abbreviation's stop still ends its sentence.
    assert _split("Bilag, kvitteringer mv. Derefter bogføres de.") == [
        "Bilag, kvitteringer mv.",
        "Derefter bogføres de.",
    ]


def test_spans_slice_the_content_in_order_without_overlap() -> None:
    rng = random.Random(7)
    pieces = ["word", "Word", ".", "?", "\n", "\n\n", " ", "- ", "2. ", "> ", "```", "|", ":", "#", "2019."]
    for _ in range(500):
        content = "".join(rng.choice(pieces) + rng.choice(["", " "]) for _ in range(rng.randint(1, 60)))
        for lines in (False, True):
            spans = sentence_spans(content, lines=lines)
            assert all(0 <= a <= b <= len(content) and content[a:b] == content[a:b].strip() for a, b in spans)
            assert all(b1 <= a2 for (_, b1), (a2, _) in itertools.pairwise(spans))


def test_records_one_per_line_stay_one_per_line() -> None:
    rows = "Name: Ada; Role: on-call lead\nName: Bob; Role: backup engineer"
    assert _split(rows, lines=True) == rows.split("\n")
    doc = Document("rota.xlsx", "Rota", rows, (Section("Sheet1", 0, len(rows)),), "sheet", "1", locator="sheet")
    (chunk,) = chunk_document(doc, ChunkerConfig(), _chars_as_tokens)
    assert [chunk.content[a:b] for a, b in chunk_sentence_spans(chunk)] == rows.split("\n")
    assert sentences(chunk) == rows.split("\n")
