"""Learning from confirmations: a confirmed (message, passage) pair answers later messages that
read like it, in the same channel scope only; it follows its words when an edit moves them,
retires when they are gone, and survives a restart. Real embedder, real Chroma."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from retrieval.answer import Linker
from retrieval.answer.service import AnswerService, Outcome
from retrieval.evaluation.answers import Replayed, replay
from retrieval.evaluation.suite import Question
from retrieval.index import SqliteRecords
from retrieval.learn import NEVER, LearnedPairs, MatchConfig, scope_key
from retrieval.models.embed import SentenceTransformerEmbedder
from retrieval.search.engine import Engine
from retrieval.search.gate import GateConfig
from testkit.fakes import FailingModel, NeverCalledModel, ScriptedModel
from tests.conftest import EXAMPLES, make_engine

ASKED = "got paged for a sev1, how long until I have to ack it?"
LATER = "sev1 page came in, what's the ack deadline?"  # the same need, other words
ACK = "acknowledge the page within 5 minutes"
GATE = GateConfig(0.5, point=1.2)  # both messages would be pointed at, not answered


def _copy_the_ack_sentence(prompt: str) -> str:
    """A model that answers with the numbered source sentence about acknowledging, cited."""
    line = next(x for x in prompt.splitlines() if x.startswith("[") and ACK in x)
    return line


@pytest.fixture
def drive(embedder: SentenceTransformerEmbedder, tmp_path: Path) -> tuple[Engine, Path, LearnedPairs]:
    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLES, docs / "ops")
    shutil.copytree(EXAMPLES, docs / "hr")
    engine = make_engine(embedder, tmp_path / "data", docs)
    engine.sync()
    return engine, docs, LearnedPairs(SqliteRecords(tmp_path / "data" / "records.sqlite3", "learned"))


def _service(engine: Engine, pairs: LearnedPairs, model: object) -> AnswerService:
    return AnswerService(
        engine.searcher,
        lambda: model,
        GATE,
        links=Linker(docs_dir=engine.docs_folder()),
        learned=pairs,  # type: ignore[arg-type,return-value]
    )


def _confirm_the_ack_pointer(svc: AnswerService, folders: list[str] | None) -> str:
    shown = svc.answer(ASKED, folders=folders)
    assert shown.outcome is Outcome.POINTED
    pointer = next(p for p in shown.pointers if ACK in p.quote)
    pair = svc.confirm(ASKED, pointer, folders, "U1", "pointer")
    assert pair is not None
    return pair.id


def test_a_confirmed_passage_answers_a_message_like_it_and_says_so(drive: tuple[Engine, Path, LearnedPairs]) -> None:
    engine, _, pairs = drive
    assert _service(engine, pairs, NeverCalledModel()).answer(LATER, folders=["ops"]).outcome is Outcome.POINTED
    pid = _confirm_the_ack_pointer(_service(engine, pairs, NeverCalledModel()), ["ops"])
    model = ScriptedModel(_copy_the_ack_sentence)
    a = _service(engine, pairs, model).answer(LATER, folders=["ops"])
    assert a.answered and a.learned == pid
    (c,) = a.citations
    assert ACK in c.quote and c.path == "ops/on-call.md"
    (pair,) = pairs.all()
    first = next(x for x in model.calls[0][-1]["content"].splitlines() if x.startswith("[1] "))[4:]
    assert c.quote in pair.quote and first in " ".join(pair.quote.split())  # read first: the confirmed words


def test_a_confirmation_never_changes_answers_in_another_scope(drive: tuple[Engine, Path, LearnedPairs]) -> None:
    engine, _, pairs = drive
    _confirm_the_ack_pointer(_service(engine, pairs, NeverCalledModel()), ["ops"])
    svc = _service(engine, pairs, NeverCalledModel())  # answering would call the model
    for folders in (["hr"], ["ops", "hr"], None):
        a = svc.answer(LATER, folders=folders)
        assert a.outcome is Outcome.POINTED and a.learned is None, folders
    assert scope_key(["ops"]) != scope_key(["hr", "ops"]) != scope_key(None) == scope_key([""])


def test_an_unrelated_message_does_not_match(drive: tuple[Engine, Path, LearnedPairs]) -> None:
    engine, _, pairs = drive
    _confirm_the_ack_pointer(_service(engine, pairs, NeverCalledModel()), None)
    a = _service(engine, pairs, NeverCalledModel()).answer("How many days of paid annual leave do I get?")
    assert a.learned is None and not a.answered


def test_a_pair_never_takes_over_a_sure_search_unless_told(
    drive: tuple[Engine, Path, LearnedPairs], embedder: SentenceTransformerEmbedder
) -> None:
    """Two needs on one topic read alike, and are often answered in one passage: a question the
    gate would answer on its own is not answered from a pair, whichever passages search found
    (measured: bench.matching)."""
    engine, _, pairs = drive
    _confirm_the_ack_pointer(_service(engine, pairs, NeverCalledModel()), None)
    snap = engine.searcher().snapshot
    (pair,) = pairs.all()
    confirmed = next(c for c in snap.chunks if c.path == pair.path and c.start <= pair.start < c.end)
    other = next(c for c in snap.chunks if c.id != confirmed.id)
    v = embedder.embed_queries([LATER])[0]
    assert pairs.match(v, None, snap, [other], sure=False) is not None  # search unsure: the pair answers
    assert pairs.match(v, None, snap, [other], sure=True) is None  # search sure of another passage
    assert pairs.match(v, None, snap, [confirmed], sure=True) is None  # ... even of the confirmed passage
    pairs.cfg = MatchConfig(pairs.cfg.alone, pairs.cfg.with_passage, over_sure=pairs.cfg.alone)
    assert pairs.match(v, None, snap, [other], sure=True) is not None


def test_a_pair_needs_a_lower_cosine_when_its_passage_is_among_the_first_hits(
    drive: tuple[Engine, Path, LearnedPairs], embedder: SentenceTransformerEmbedder
) -> None:
    """Two signals that agree (the messages read alike, and search found the confirmed passage
    among its first ``within`` hits) need less of each (measured: bench.matching)."""
    engine, _, pairs = drive
    _confirm_the_ack_pointer(_service(engine, pairs, NeverCalledModel()), None)
    snap = engine.searcher().snapshot
    (pair,) = pairs.all()
    confirmed = next(c for c in snap.chunks if c.path == pair.path and c.start <= pair.start < c.end)
    a, b, c = [x for x in snap.chunks if x.id != confirmed.id][:3]
    v = embedder.embed_queries([LATER])[0]
    cos = float(pair.vector @ v)
    pairs.cfg = MatchConfig(alone=cos + 0.01, with_passage=cos - 0.01, over_sure=NEVER, within=2)
    assert pairs.match(v, None, snap, [a, b, c], sure=False) is None  # the cosine alone falls short
    assert pairs.match(v, None, snap, [a, confirmed, b], sure=False) is not None  # second hit: within 2
    assert pairs.match(v, None, snap, [a, b, confirmed], sure=False) is None  # third: beyond
    assert pairs.match(v, None, snap, [a, confirmed, b], sure=True) is None  # a sure search answers on its own


def test_a_pair_follows_its_words_when_an_edit_moves_them_and_retires_when_they_are_gone(
    drive: tuple[Engine, Path, LearnedPairs],
) -> None:
    engine, docs, pairs = drive
    _confirm_the_ack_pointer(_service(engine, pairs, NeverCalledModel()), ["ops"])
    (before,) = pairs.all()
    page = docs / "ops" / "on-call.md"
    page.write_text(
        "# On-call Handbook\n\nA new first paragraph.\n\n" + page.read_text()[len("# On-call Handbook\n") :]
    )
    engine.sync()
    assert pairs.retire(engine.searcher().snapshot) == 0
    (moved,) = pairs.all()
    assert moved.quote == before.quote and moved.start > before.start
    assert page.read_text()[moved.start : moved.end] == moved.quote
    page.write_text(page.read_text().replace(ACK, "acknowledge it when you can"))
    engine.sync()
    assert pairs.retire(engine.searcher().snapshot) == 1 and pairs.all() == []


def test_pairs_survive_a_restart_and_can_be_forgotten(drive: tuple[Engine, Path, LearnedPairs], tmp_path: Path) -> None:
    engine, _, pairs = drive
    svc = _service(engine, pairs, NeverCalledModel())
    pid = _confirm_the_ack_pointer(svc, None)
    again = LearnedPairs(SqliteRecords(tmp_path / "data" / "records.sqlite3", "learned"))  # another process
    (pair,) = again.all()
    assert pair.id == pid and pair.scope == "*" and pair.user == "U1" and pair.via == "pointer"
    assert pair.vector.shape == (384,)
    (p,) = again.all()
    assert svc.confirm(ASKED, p, None, "U2", "answer") is not None  # confirmed twice: one pair, renewed
    (renewed,) = again.all()
    assert renewed.id == pid and renewed.user == "U2"
    assert svc.forget(pid) and not svc.forget(pid) and again.all() == []


def test_a_passage_no_longer_in_the_index_is_not_confirmed(drive: tuple[Engine, Path, LearnedPairs]) -> None:
    engine, _, pairs = drive
    svc = _service(engine, pairs, NeverCalledModel())
    pointer = svc.answer(ASKED).pointers[0]
    from dataclasses import replace

    assert svc.confirm(ASKED, replace(pointer, quote="words that are not there"), None, "U1", "pointer") is None
    assert svc.confirm(ASKED, replace(pointer, path="nowhere.md"), None, "U1", "pointer") is None
    assert pairs.all() == []


def test_a_pair_another_embedding_model_embedded_matches_only_once_embedded_again(
    drive: tuple[Engine, Path, LearnedPairs], tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    engine, _, pairs = drive
    pid = _confirm_the_ack_pointer(_service(engine, pairs, NeverCalledModel()), ["ops"])
    assert pairs.all()[0].model == "minilm" and pairs.cfg == MatchConfig.measured("minilm")
    # Each model's cosines have their own scale: multilingual-e5's threshold is its own.
    assert MatchConfig.measured("multilingual-e5").alone > 0.85 > MatchConfig.measured("minilm").alone
    records = SqliteRecords(tmp_path / "data" / "records.sqlite3", "learned")
    # The drive changed model (here the same vectors stand in for the other model's).
    other = LearnedPairs(records, MatchConfig(0.5, 0.5, 0.5), model="multilingual-e5")
    a = _service(engine, other, NeverCalledModel()).answer(LATER, folders=["ops"])
    assert a.outcome is Outcome.POINTED and a.learned is None  # never compared across models
    assert other.refresh(embedder.embed_queries) == 1 and other.refresh(embedder.embed_queries) == 0
    (pair,) = other.all()
    assert pair.id == pid and pair.model == "multilingual-e5" and pair.user == "U1"
    a = _service(engine, other, ScriptedModel(_copy_the_ack_sentence)).answer(LATER, folders=["ops"])
    assert a.answered and a.learned == pid


def test_replay_confirms_the_passage_it_showed_and_counts_questions_that_got_no_answer(
    drive: tuple[Engine, Path, LearnedPairs],
) -> None:
    engine, _, pairs = drive
    needle = "For a SEV1, the on-call engineer must acknowledge the page within 5 minutes"
    first = [Question("q1", ASKED, needle), Question("q2", "Who approves a rollback?", "nothing shows this needle")]
    done = replay(_service(engine, pairs, NeverCalledModel()), first)  # both pointed at: no model call
    assert done == Replayed(confirmed=1, failed=0)
    (pair,) = pairs.all()
    assert needle in pair.quote and pair.message == ASKED
    # Answered, and the model fails on every question (a busy CPU): nothing confirmed, and it is said.
    model = FailingModel()
    svc = AnswerService(
        engine.searcher,
        lambda: model,
        GateConfig(2.0, point=3.0),
        learned=LearnedPairs(SqliteRecords(engine.docs_folder().parent / "other.sqlite3", "learned")),
    )
    assert replay(svc, first) == Replayed(confirmed=0, failed=2) and model.calls == 2


def test_a_confirmed_passage_is_read_once_though_the_drive_holds_copies_of_it(
    drive: tuple[Engine, Path, LearnedPairs],
) -> None:
    engine, _, pairs = drive  # ops/ and hr/ hold the same documents: search shows hr/'s
    svc = _service(engine, pairs, NeverCalledModel())
    pointer = next(p for p in svc.answer(ASKED, folders=["ops"]).pointers if ACK in p.quote)
    assert pointer.path == "ops/on-call.md" and svc.confirm(ASKED, pointer, None, "U1", "pointer") is not None
    # A model that fails: the passages it would have read are pointed at, the confirmed one first.
    a = _service(engine, pairs, FailingModel()).answer(LATER)
    assert a.learned is not None and a.pointers[0].path == "ops/on-call.md"
    quotes = [p.quote for p in a.pointers]
    assert len(quotes) == len(set(quotes)) == 3  # a copy's passage (hr/'s) is not shown again
