"""The gaps record (kept, expired, purged), grouping by meaning, and who may see what.

The Slack side (every outcome recorded from a real answer, the App Home section by the
viewer's channels, 👎 clicks) is in test_slack_app.py; `footnote ask`/`gaps` in test_cli.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bot.gaps import DAY_S, FILE, GapRecord, find_gaps, gaps_blocks, visible
from bot.grouping import group_by_meaning
from bot.scoping import ChannelScopes, may_see
from retrieval.answer import Answer, Outcome
from testkit.fakes import FakeClock


def _vec(*xs: float) -> np.ndarray:
    v = np.zeros(8, dtype=np.float32)
    v[: len(xs)] = xs
    return v / np.linalg.norm(v)


def _answer(outcome: Outcome, vector: np.ndarray | None, nearest: tuple[str, ...] = ("Expenses",)) -> Answer:
    return Answer("q", outcome.refused, "r", "", [], nearest=list(nearest), gate=0.8, outcome=outcome, vector=vector)


def _record(rec: GapRecord, text: str, outcome: Outcome, vector: np.ndarray | None, folders=None, **kw) -> None:  # type: ignore[no-untyped-def]
    rec.record(text, outcome, folders, surface="slack", answer=_answer(outcome, vector, **kw))


def test_a_recorded_question_keeps_everything_the_issue_names(tmp_path: Path) -> None:
    rec = GapRecord(tmp_path)
    v = _vec(1, 2, 3)
    rec.record("Where is X?", Outcome.REFUSED_GATE, ["hr/", "/eng"], surface="slack", answer=_answer(Outcome.REFUSED_GATE, v), feedback_id="f1")  # fmt: skip
    rec.record("It broke", Outcome.ERROR, None, surface="cli")
    a, e = rec.asked()
    assert (a.question, a.scope, a.outcome, a.nearest, a.gate, a.surface) == (
        "Where is X?", ("eng", "hr"), Outcome.REFUSED_GATE, ("Expenses",), 0.8, "slack",
    )  # fmt: skip
    assert a.vector is not None and np.allclose(a.vector, v)
    assert (e.outcome, e.scope, e.vector, e.nearest, e.gate) == (Outcome.ERROR, None, None, (), None)
    assert rec.vote("f1", "down") and not rec.vote("unknown", "up")
    assert rec.asked()[0].down == 1
    assert rec.outcomes() == {
        "answered": 0,
        "pointed": 0,
        "refused_gate": 1,
        "refused_model": 0,
        "claims_removed": 0,
        "error": 1,
        "model_failed": 0,
    }


def test_retention_deletes_what_is_older_than_the_kept_days(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000.0)
    rec = GapRecord(tmp_path, keep_days=90, clock=clock)
    _record(rec, "old question", Outcome.REFUSED_GATE, _vec(1))
    clock.advance(60 * DAY_S)
    _record(rec, "newer question", Outcome.REFUSED_MODEL, _vec(0, 1))
    clock.advance(31 * DAY_S)  # the first is 91 days old, the second 31
    assert rec.expire() == 1 and rec.count() == 1
    assert [r.question for r in rec.asked()] == ["newer question"]
    rec.close()
    clock.advance(60 * DAY_S)
    reopened = GapRecord(tmp_path, keep_days=90, clock=clock)  # a start deletes what expired meanwhile
    assert reopened.count() == 0


def test_an_expired_row_is_never_read_even_before_it_is_deleted(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000.0)
    rec = GapRecord(tmp_path, keep_days=600 / DAY_S, clock=clock)  # kept ten minutes
    _record(rec, "short-lived", Outcome.REFUSED_GATE, _vec(1))
    clock.advance(900)  # expired, and the hourly deletion is not due yet
    assert rec.asked() == [] and rec.outcomes()["refused_gate"] == 0 and rec.count() == 1


def test_recording_deletes_expired_rows_once_an_hour(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000.0)
    rec = GapRecord(tmp_path, keep_days=1, clock=clock)
    _record(rec, "first", Outcome.REFUSED_GATE, _vec(1))
    clock.advance(2 * DAY_S)
    _record(rec, "second", Outcome.REFUSED_GATE, _vec(1))
    assert rec.count() == 1


@pytest.mark.parametrize("secure_delete", ["ON", "OFF"])
def test_purge_leaves_no_question_text_in_any_file(tmp_path: Path, secure_delete: str) -> None:
    rec = GapRecord(tmp_path)
    for i in range(50):
        _record(rec, f"secret-question-{i} about the merger", Outcome.REFUSED_GATE, _vec(1, i))
    # OFF: as an SQLite built without secure delete by default would leave the deleted pages.
    rec._db.execute(f"PRAGMA secure_delete={secure_delete}")
    assert rec.purge() == 50 and rec.count() == 0
    files = list(tmp_path.glob(FILE + "*"))
    assert files and all(b"secret-question" not in f.read_bytes() for f in files)


def test_expired_text_is_overwritten_in_the_file(tmp_path: Path) -> None:
    """The record asks for secure delete (Debian's SQLite has it on by default; others do not)."""
    clock = FakeClock(1_000_000.0)
    rec = GapRecord(tmp_path, keep_days=1, clock=clock)
    _record(rec, "expiring-secret-question", Outcome.REFUSED_GATE, _vec(1))
    assert rec._db.execute("PRAGMA secure_delete").fetchone() == (1,)
    rec._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # as SQLite does by itself every 1,000 pages
    clock.advance(2 * DAY_S)
    rec.expire()
    rec._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert all(b"expiring-secret-question" not in f.read_bytes() for f in tmp_path.glob(FILE + "*"))


# -- grouping ----------------------------------------------------------------------------------


def test_groups_put_near_questions_together_and_keep_others_apart() -> None:
    x = np.stack([_vec(1, 0.1), _vec(0, 1), _vec(1, 0.2), _vec(1, 0), _vec(0, 0, 1), _vec(0.1, 1)])
    groups = group_by_meaning(x, 0.9)
    assert [sorted(g.tolist()) for g in groups] == [[0, 2, 3], [1, 5], [4]]
    assert groups[0][0] == 0  # the most central of the three (between the other two)
    assert [g.tolist() for g in group_by_meaning(x, 0.9, block=2)] == [g.tolist() for g in groups]  # any block size


def test_a_chain_of_small_steps_does_not_become_one_group() -> None:
    """Twelve points a few degrees apart along an arc: neighbours are alike, the ends are not."""
    angles = np.radians(np.arange(12) * 8.0)
    x = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    groups = group_by_meaning(x, 0.95)  # 0.95 is about 18 degrees
    assert len(groups) > 1
    for g in groups:
        sims = x[g] @ x[g].T
        assert sims.min() >= 2 * 0.95**2 - 1  # all within the threshold of one founder: no long chains


@pytest.mark.parametrize("spread", [0.3, 0.6, 1.2])
def test_kept_pairs_and_recomputed_similarities_give_the_same_groups(spread: float) -> None:
    """With few close pairs they are kept; with many (max_pairs=0 here) they are computed again."""
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((12, 16))
    x = centres[rng.integers(0, 12, 300)] + spread * rng.standard_normal((300, 16))
    kept = group_by_meaning(x, 0.6, block=64)
    again = group_by_meaning(x, 0.6, block=64, max_pairs=0)
    assert [g.tolist() for g in kept] == [g.tolist() for g in again]
    assert 1 < len(kept) < 300  # neither one group nor all alone: the case is not trivial


def test_no_rows_no_groups() -> None:
    assert group_by_meaning(np.zeros((0, 8)), 0.5) == []


def test_gaps_are_the_refused_and_the_thumbed_down_with_their_documents(tmp_path: Path) -> None:
    rec = GapRecord(tmp_path)
    _record(rec, "How do I expense home internet?", Outcome.REFUSED_GATE, _vec(1, 0.1), nearest=("Expenses", "Travel"))
    _record(rec, "Can I claim my home wifi bill?", Outcome.REFUSED_MODEL, _vec(1, 0.15), nearest=("Travel",))
    _record(rec, "Is home broadband reimbursed?", Outcome.CLAIMS_REMOVED, _vec(1, 0.05), nearest=("Expenses",))
    _record(rec, "How fast is a SEV1 acknowledged?", Outcome.ANSWERED, _vec(0, 1))  # answered, no vote: no gap
    rec.record("Who approves a laptop?", Outcome.ANSWERED, None, surface="slack", answer=_answer(Outcome.ANSWERED, _vec(0, 0, 1)), feedback_id="f9")  # fmt: skip
    rec.vote("f9", "down")
    rec.record("the model server was down", Outcome.ERROR, None, surface="slack")  # an error is not a gap
    first, second = find_gaps(rec.asked(), threshold=0.9)
    assert first.count == 3 and first.label == "How do I expense home internet?"
    assert set(first.questions) == {"How do I expense home internet?", "Can I claim my home wifi bill?", "Is home broadband reimbursed?"}  # fmt: skip
    assert first.nearest == ("Expenses", "Travel")
    assert first.outcomes == {"refused_gate": 1, "refused_model": 1, "claims_removed": 1}
    assert (second.label, second.count, second.outcomes) == ("Who approves a laptop?", 1, {"down": 1})


def test_may_see_only_questions_asked_within_what_the_reader_may_search() -> None:
    assert may_see([("eng",)], ("eng",)) and may_see([("eng",)], ("eng/backend",))
    assert not may_see([("eng",)], ("engineering",)) and not may_see([("eng",)], ("eng", "hr"))
    assert may_see([("eng",), ("hr",)], ("eng", "hr"))  # two channels together
    assert not may_see([("eng",)], None)  # asked about every document
    assert may_see([None], ("hr",)) and may_see([("eng",), None], None)


def test_a_reader_may_search_their_channels_and_a_direct_message() -> None:
    scopes = ChannelScopes({"CENG": ("eng",), "CHR": ("hr",), "dm": ("public",)}, frozenset({"CQUIET"}))
    assert scopes.reader(["CENG", "CQUIET"]) == [("eng",), ("public",)]
    unscoped_dm = ChannelScopes({"CENG": ("eng",)})
    assert unscoped_dm.reader([]) == [None]  # a direct message searches everything: so may the reader


def test_a_group_mixing_scopes_shows_only_what_the_reader_may_see(tmp_path: Path) -> None:
    rec = GapRecord(tmp_path)
    _record(rec, "Where do I get a parking permit?", Outcome.REFUSED_GATE, _vec(1, 0.1), folders=["eng"], nearest=("Office",))  # fmt: skip
    _record(rec, "How to apply for a parking pass (hr)?", Outcome.REFUSED_GATE, _vec(1, 0.12), folders=["hr"], nearest=("HR secrets",))  # fmt: skip
    _record(rec, "Parking pass for contractors?", Outcome.REFUSED_GATE, _vec(1, 0.11), folders=None)
    everyone = find_gaps(rec.asked(), threshold=0.9)
    assert [g.count for g in everyone] == [3]
    (mine,) = find_gaps(visible(rec.asked(), [("eng",), ("public",)]), threshold=0.9)
    assert (mine.count, mine.questions, mine.nearest, mine.scopes) == (1, ("Where do I get a parking permit?",), ("Office",), ("eng/",))  # fmt: skip
    blob = str(gaps_blocks([mine], 30))
    assert "parking permit" in blob and "hr" not in blob.lower() and "contractors" not in blob


def test_the_home_section_is_escaped_and_says_when_there_is_nothing() -> None:
    assert "Nothing you can see" in str(gaps_blocks([], 30))


@pytest.mark.parametrize("outcome", list(Outcome))
def test_every_outcome_kind_round_trips(tmp_path: Path, outcome: Outcome) -> None:
    rec = GapRecord(tmp_path)
    answer = None if outcome is Outcome.ERROR else _answer(outcome, _vec(1))
    rec.record("q", outcome, None, surface="cli", answer=answer)
    assert rec.asked()[0].outcome is outcome and rec.outcomes()[outcome.value] == 1


def test_every_outcome_has_words_in_english_and_danish() -> None:
    from bot.gaps import OUTCOME_WORDS
    from bot.i18n import say

    for kind in Outcome:
        words = OUTCOME_WORDS[kind.value]
        assert say("da", words) != words, kind
