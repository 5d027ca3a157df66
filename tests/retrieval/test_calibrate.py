"""The gate's self-calibration: probes from the corpus, the chosen threshold, its cache, the override."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bot.builder import Builder
from bot.health import Health
from bot.render import status_text
from config.settings import load_settings
from retrieval.evaluation import cross_validation as cv_mod
from retrieval.models.embed import SentenceTransformerEmbedder
from retrieval.search import calibration as cal_mod
from retrieval.search.calibration import (
    Calibration,
    CalibrationCache,
    CalibrationConfig,
    Calibrator,
    calibrate,
    choose_threshold,
    in_domain_probes,
    near_domain_probes,
    ood_probes,
    probe_from,
    signals_of,
)
from retrieval.search.engine import Engine
from retrieval.search.gate import GateConfig, decide
from retrieval.search.searcher import SearchResult
from retrieval.types import Chunk, Hit
from tests.conftest import make_engine

HANDBOOK = {
    "leave.md": """# Leave policy

## Annual leave
Every employee accrues 25 days of paid annual leave per calendar year. Leave is requested in the HR portal at least two weeks ahead, and your manager approves it. Up to five unused days carry over to the next year; the rest expire on 31 March.

## Sick leave
Report sickness to your manager before 9:00 on the first day. From the fourth day of absence a doctor's note is required. Sick days do not reduce your annual leave.

## Parental leave
Parents are entitled to 24 weeks of paid parental leave, which can be split between parents and taken within the first two years after birth or adoption.
""",
    "travel.md": """# Travel and expenses

## Booking travel
Book flights and hotels through the travel desk. Economy class is the rule for flights under six hours; business class needs approval from a director.

## Per diem and receipts
The daily allowance for meals abroad is 60 euros. Submit receipts in the expense tool within 30 days of returning; expenses older than 90 days are not reimbursed.

## Mileage
Using your own car for business trips is reimbursed at 0.30 euros per kilometre, logged in the expense tool with the route and purpose.
""",
    "security.md": """# Information security

## Passwords
Passwords must be at least 14 characters long and unique per system. Use the company password manager; never reuse a password from a personal account.

## Lost devices
Report a lost or stolen laptop or phone to the security team within one hour. The device is wiped remotely and access tokens are revoked.

## Phishing
Forward suspicious emails to the phishing mailbox and do not click any link in them. The security team answers within one working day.
""",
    "timekeeping.md": """# Timekeeping

## Recording hours
Record your working hours daily in the time tool. The standard week is 37 hours; core hours are 10:00 to 15:00.

## Overtime
Overtime must be agreed with your manager in advance. It is compensated with time off in lieu at a rate of 1.5 hours per hour worked.
""",
}
# Questions this handbook cannot answer. The first ones use its own words, and the
# fixed default threshold lets some of them through; the rest are plainly elsewhere.
KNOWN_OOD = [
    "Who approves overtime for part-time employees?",
    "How do I record hours worked on a public holiday?",
    "Can I carry over parental leave to a new employer?",
    "What is the per diem for domestic trips?",
    "Is sick leave paid during the probation period?",
    "How many days of leave do I get when I move house?",
    "How do I change my password in the HR portal?",
    "Can I take my annual leave in hourly blocks?",
    "What is the reimbursement rate for an electric bike?",
    "How do I share a password with a colleague?",
    "Can I expense a taxi to the airport?",
    "Which hotel chains does the travel desk prefer?",
    "How do I request a new laptop?",
    "Does the company pay for my phone bill?",
    "Is working from home allowed on Fridays?",
    "How do I request a standing desk?",
    "Where can I download my payslip?",
    "Who is the fire warden on our floor?",
    "How do I book a meeting room for Thursday?",
    "Can I bring my dog to the office?",
    "How do I enrol in the company pension plan?",
    "How do I get a replacement access badge?",
    "What time does the building close on Fridays?",
    "How do I connect to the office printer?",
    "How do I set up the VPN on my phone?",
    "When is payday this month?",
    "How do I add my partner to my health insurance?",
    "What is the dress code for the client dinner?",
    "How do I order new business cards?",
    "How do I report a broken chair?",
    "Is there parking for employees at the office?",
    "How do I get a company credit card?",
    "How do I renew my passport?",
    "What is the capital of France?",
    "How long should I boil an egg?",
    "Who won the football World Cup in 2014?",
    "How do I reverse a linked list in C?",
    "How do I fix a leaking tap?",
    "When should I plant tomatoes?",
    "How often should I feed a kitten?",
]
SMALL = CalibrationConfig(in_domain=40, near_domain=40)


def _write(folder: Path, docs: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def handbook(embedder: SentenceTransformerEmbedder, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    root = tmp_path_factory.mktemp("handbook")
    eng = make_engine(embedder, root / "data", _write(root / "docs", HANDBOOK))
    eng.sync()
    return eng


def test_the_shipped_ood_list_is_large_varied_and_packaged() -> None:
    probes = ood_probes()
    assert len(probes) >= 300 and len(set(probes)) == len(probes)
    assert all(not p.startswith("#") and len(p.split()) >= 3 for p in probes)
    assert any("payslip" in p for p in probes) and any("paella" in p for p in probes)


def test_probes_come_from_the_corpus_without_a_model(handbook: Engine) -> None:
    import random

    chunks = handbook.searcher().snapshot.chunks
    words = {w for c in chunks for w in cal_mod.tokenize(c.content)}
    for kind in cal_mod.PROBE_KINDS:
        probes = in_domain_probes(chunks, 20, kind, random.Random(1))
        assert len(probes) == 20
        assert all(set(cal_mod.tokenize(p)) - {"what", "is", "how", "does", "why", "do", "i", "when", "should",
                                                "happens", "with", "can"} <= words for p in probes), kind  # fmt: skip
    near = near_domain_probes(chunks, 10, random.Random(1))
    assert len(near) == 10 and all("{t}" not in p for p in near)
    masked = probe_from("Passwords must be at least fourteen characters long and unique", "masked", random.Random(0))
    assert 0 < len(masked.split()) < 10


def test_choose_threshold_lets_through_at_most_the_target() -> None:
    ood = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4]
    assert choose_threshold(ood, 0.0, 0.7) < 0.5
    t = choose_threshold(ood, 0.2, 0.7)  # two of ten may pass
    assert 0.6 <= t < 0.7 and sum(x <= t for x in ood) == 2
    assert choose_threshold([], 0.05, 0.7) == 0.7


def test_calibration_is_stricter_where_a_loose_fixed_threshold_bluffs(handbook: Engine) -> None:
    loose = 0.70  # an older Footnote's fixed default
    searcher = handbook.searcher()
    facts = cal_mod.facts_for(searcher, KNOWN_OOD)
    fixed_bluffs = sum(s <= loose for s in signals_of(facts, 0.5, 0.0))
    assert fixed_bluffs / len(KNOWN_OOD) > 0.05  # the premise: it bluffs on this corpus

    c = calibrate(searcher, SMALL, generation=1, generic=KNOWN_OOD)
    assert c.threshold < loose
    assert sum(s <= c.threshold for s in signals_of(facts, 0.5, 0.0)) / len(KNOWN_OOD) <= SMALL.target_bluff
    assert c.est_bluff <= SMALL.target_bluff and 0.0 <= c.est_in_refused < 0.5
    assert c.thresholds[1] >= c.threshold  # pointing starts where answering stops
    assert c.n_in == 40 and c.n_ood == len(KNOWN_OOD) and c.n_near == 40
    assert any(p.threshold == c.threshold for p in c.sweep)
    # The gate, given this calibration, refuses what the fixed threshold let through.
    gate = GateConfig(loose, calibrated=lambda: c.thresholds)
    results = [searcher.search(q) for q in KNOWN_OOD]
    assert sum(decide(r, gate, 4).answerable for r in results) < fixed_bluffs


def _fake_calibration(threshold: float, key: str, formula: str | None = None) -> Calibration:
    formula = cal_mod.formula_of(CalibrationConfig()) if formula is None else formula
    return Calibration(key, 0, threshold, 0.05, 0.0, 0.1, 1, 1, 0, 0.0, "bluff target", [], 0.0, 0.0, formula=formula)


def test_a_threshold_of_another_gate_formula_never_serves(handbook: Engine, tmp_path: Path) -> None:
    # An older Footnote's 0.685 on its own scale would refuse nearly everything on today's signal.
    cache = CalibrationCache(tmp_path / "calibration.json")
    cache.save(_fake_calibration(0.685, "k", formula=""))
    assert Calibrator(handbook.searcher, lambda: 1, cache, SMALL).threshold() is None
    cache.save(_fake_calibration(0.9, "k", formula=cal_mod.formula_of(SMALL)))
    assert Calibrator(handbook.searcher, lambda: 1, cache, SMALL).threshold() == 0.9
    heavier = CalibrationConfig(coverage_weight=1.0)
    assert Calibrator(handbook.searcher, lambda: 1, cache, heavier).threshold() is None


def test_the_result_is_cached_and_recomputed_when_the_index_changes(
    handbook: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def fake(searcher, cfg, generation=0, generic=None, key=None, **_):  # type: ignore[no-untyped-def]
        calls.append(generation)
        return _fake_calibration(0.5 + 0.01 * len(calls), key or "")

    monkeypatch.setattr(cal_mod, "calibrate", fake)
    generation = [3]
    cache = CalibrationCache(tmp_path / "calibration.json")
    cal = Calibrator(handbook.searcher, lambda: generation[0], cache, SMALL)
    first = cal.ensure()
    assert first is not None and calls == [3] and cal.threshold() == first.threshold
    assert cal.ensure() == first and calls == [3]  # cached in memory
    again = Calibrator(handbook.searcher, lambda: generation[0], cache, SMALL)  # a new process
    assert again.current() == first and again.threshold() == first.threshold
    assert again.ensure() == first and calls == [3]  # from the JSON file, not recomputed
    generation[0] = 4  # a sync changed the index
    assert again.current() is None
    assert again.threshold() == first.threshold  # the previous threshold serves meanwhile
    second = again.ensure()
    assert calls == [3, 4] and second is not None and second.threshold != first.threshold
    assert CalibrationCache(cache.path).load() == second


def test_background_calibration_never_blocks_the_gate(
    handbook: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, entered = threading.Event(), threading.Event()

    def slow(searcher, cfg, generation=0, generic=None, key=None, **_):  # type: ignore[no-untyped-def]
        entered.set()
        assert release.wait(30)
        return _fake_calibration(0.42, key or "")

    monkeypatch.setattr(cal_mod, "calibrate", slow)
    cal = Calibrator(handbook.searcher, lambda: 7, CalibrationCache(tmp_path / "c.json"), SMALL)
    gate = GateConfig(0.70, 0.5, calibrated=cal.threshold)
    thread = cal.start()
    assert entered.wait(30)
    assert cal.start() is thread  # one at a time
    assert gate.current().threshold == 0.70  # not ready: the configured threshold, at once
    release.set()
    thread.join(30)
    assert not thread.is_alive() and gate.current().threshold == 0.42


def test_an_explicit_threshold_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    CalibrationCache(data / "calibration.json").save(_fake_calibration(0.55, "k"))
    monkeypatch.setenv("FOOTNOTE_DATA_DIR", str(data))
    monkeypatch.setenv("FOOTNOTE_DOCS_DIR", str(_write(tmp_path / "docs", {"a.md": "# A\n\nSome text here.\n"})))
    monkeypatch.delenv("FOOTNOTE_GATE_THRESHOLD", raising=False)
    rt = Builder(load_settings())
    assert rt.gate_config().current().threshold == 0.55
    assert rt.calibration() is not None
    monkeypatch.setenv("FOOTNOTE_GATE_THRESHOLD", "0.9")
    rt = Builder(load_settings())
    assert rt.gate_config().current().threshold == 0.9 and rt.calibration() is None
    rt.calibrate_in_background()  # a no-op with an explicit threshold
    assert "calibrator" not in vars(rt)


def test_decide_uses_the_calibrated_threshold() -> None:
    chunk = Chunk("c-0", "a.md", "A", "S", 0, "text", "text", 0, 4)
    result = SearchResult("q", [Hit(chunk, 1.0, 0.5)], 0.5, 1.0, {}, best_sentence_distance=0.4)
    with_sentence = {"sentence_weight": 0.5}  # signal 0.5 + 0.5 x 0.4 = 0.7
    assert decide(result, GateConfig(0.75, **with_sentence), 4).answerable
    assert not decide(result, GateConfig(0.75, **with_sentence, calibrated=lambda: 0.65), 4).answerable
    assert decide(result, GateConfig(0.65, **with_sentence, calibrated=lambda: None), 4).answerable is False
    assert decide(result, GateConfig(0.65, calibrated=lambda: None), 4).answerable  # the default leaves it out


def test_the_cross_validation_picks_the_weights_that_separate_best() -> None:
    # Coverage separates these (in-domain fully covered, OOD not); the chunk distance does
    # not, and here the nearest sentence points the wrong way, so its weight must be 0.
    inside = [(0.5, 0.9, 1.0), (0.6, 0.8, 1.0), (0.4, 0.9, 1.0)]
    ood = [(0.5, 0.3, 0.6), (0.45, 0.35, 0.6), (0.55, 0.25, 0.6)]
    cov, sent = cv_mod.choose_gate_weights(inside, ood, shipped=(0.5, 0.5))
    assert sent == 0.0 and cov == 0.5  # 0.5 and above separate alike (0.25 does not): the tie goes to 0.5
    assert cv_mod.auc(signals_of(inside, cov, sent), signals_of(ood, cov, sent)) == 1.0
    aucs = cv_mod.signal_aucs(inside, ood, 0.5, 0.5)
    assert aucs["nearest chunk"] < 1.0 and aucs["chunk + 0.5 × coverage"] == 1.0
    assert aucs["the gate as configured"] == aucs["chunk + 0.5 × coverage + 0.5 × nearest sentence"] < 1.0


def test_status_shows_the_calibration() -> None:
    c = _fake_calibration(0.612, "k")
    text = status_text(Health(3, {}, {}, 10, calibration=c))
    assert "Gate: answers at ≤ 0.612" in text and "pointed at 10.0%" in text
    assert "Gate:" not in status_text(Health(3, {}, {}, 10))


def test_a_probe_without_content_words_is_dropped_not_a_bare_frame() -> None:
    import random

    for kind in ("question", "keywords"):
        assert probe_from("It is what it is, and so it was.", kind, random.Random(0)) == ""
    with pytest.raises(ValueError, match="unknown probe kind"):
        probe_from("Passwords must be long.", "riddle", random.Random(0))


def test_cross_validation_calibrates_once_per_probe_seed(handbook: Engine) -> None:
    s = handbook.searcher()
    answerable = ["How many days of paid annual leave do I get?", "How long must passwords be?"]
    halves = [
        cv_mod.Half("a", s, answerable[:1], KNOWN_OOD[:6]),
        cv_mod.Half("b", s, answerable[1:], KNOWN_OOD[6:12]),
    ]
    folds = cv_mod.cross_validate(halves, SMALL, generic=KNOWN_OOD[12:], seeds=[0, 1])
    assert [(f.reported_on, f.seed) for f in folds] == [("b", 0), ("a", 0), ("b", 1), ("a", 1)]
    thresholds = {f.seed: f.default_weight["threshold"] for f in folds if f.reported_on == "a"}
    assert thresholds[0] != thresholds[1]  # another sample of probes, another threshold
    text = cv_mod.format_cv(folds)
    assert "(probe seed 1)" in text and "Mean over 2 probe seeds" in text
    assert "(probe seed" not in cv_mod.format_cv(folds[:2])  # one seed: printed as before


def test_probes_scan_sentences_only_when_the_weights_read_them(handbook: Engine) -> None:
    s = handbook.searcher()
    small = CalibrationConfig(in_domain=10, near_domain=5)
    skipped = cal_mod.probe(s, small, generic=KNOWN_OOD[:5])
    assert all(f is None or f[1] == f[0] for f in skipped.in_domain + skipped.generic)  # chunk distance stands in
    scanned = cal_mod.probe(s, small, generic=KNOWN_OOD[:5], sentences=True)
    assert any(f is not None and f[1] != f[0] for f in scanned.in_domain)
    weighted = cal_mod.probe(s, CalibrationConfig(in_domain=10, near_domain=5, sentence_weight=0.5), KNOWN_OOD[:5])
    assert weighted.in_domain == scanned.in_domain  # a weight that reads it scans by itself


def test_the_assert_threshold_is_a_quantile_of_the_probes_unless_the_off_topic_probes_read_like_the_corpus() -> None:
    inside = [(0.30 + 0.005 * i, 0.3, 1.0) for i in range(100)]  # signals 0.30 .. 0.795
    generic = [(1.0 + 0.005 * i, 1.0, 1.0) for i in range(100)]  # 1.0 .. 1.495
    far = [(0.9 + 0.005 * i, 0.9, 1.0) for i in range(100)]
    english, danish = (cal_mod.Probed(inside, generic, far, 0.0, lang) for lang in ("en", "da"))  # type: ignore[arg-type]
    c = cal_mod.choose(english, CalibrationConfig())
    assert c.rule == "0.50 quantile of the in-domain probes" and 0.545 <= c.threshold <= 0.55  # as measured for English
    d = cal_mod.choose(danish, CalibrationConfig())
    assert d.rule == "0.75 quantile of the in-domain probes" and 0.67 <= d.threshold <= 0.675  # ... for Danish
    other = cal_mod.choose(english, CalibrationConfig(assert_quantile=0.55))
    assert other.rule == "0.55 quantile of the in-domain probes" and 0.57 <= other.threshold <= 0.575  # as set
    c = cal_mod.choose(english, CalibrationConfig(assert_quantile=0.5))
    assert (
        c.rule == "0.50 quantile of the in-domain probes" and 0.545 <= c.threshold <= 0.55
    )  # half the corpus's probes
    assert c.est_refused == 0.5 and c.est_in_refused == 0.0 and c.est_bluff == 0.0
    assert 1.07 <= c.point_threshold <= 1.075  # the nearest 15 % of the generic off-topic probes (English)
    assert c.est_generic_pointed == 0.15
    assert 1.02 <= d.point_threshold <= 1.025  # ... 5 % on a Danish drive
    tenth = cal_mod.choose(english, CalibrationConfig(point_quantile=0.10))
    assert 1.045 <= tenth.point_threshold <= 1.05 and tenth.est_generic_pointed == 0.1
    # A handbook asked "Can I expense a conference ticket?": near-domain probes that score like the
    # corpus's own hold the assert threshold to the bluff target; pointing is what that costs.
    near = [(0.32 + 0.005 * i, 0.3, 1.0) for i in range(100)]
    strict = cal_mod.choose(cal_mod.Probed(inside, generic, near, 0.0), CalibrationConfig())  # type: ignore[arg-type]
    assert strict.rule == "bluff target" and strict.threshold < 0.35 and strict.near_bluff <= 0.05
    assert strict.point_threshold == c.point_threshold


def test_the_point_threshold_is_never_below_the_assert_threshold() -> None:
    inside = [(0.30 + 0.005 * i, 0.3, 1.0) for i in range(100)]
    generic = [(0.2, 0.2, 1.0)] * 5 + [(1.4, 1.4, 1.0)] * 95  # a few generic probes the corpus answers
    c = cal_mod.choose(cal_mod.Probed(inside, generic, [], 0.0), CalibrationConfig(target_bluff=0.05))  # type: ignore[arg-type]
    assert c.point_threshold >= c.threshold and c.thresholds == (c.threshold, c.point_threshold)
