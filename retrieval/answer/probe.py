"""The probe that times a language model on Footnote's own answer format.

Which form of the weights answers fastest, and whether drafting pays, is measured on
fixed prompts shaped like Footnote's (numbered source sentences, ~120 tokens, a
question). The model code knows nothing of prompts: it receives :data:`ANSWER_PROBE`
(a :class:`~retrieval.models.ProbeCheck`) from the builder.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.answer.prompt import AnswerFormat, build_prompt, parse_claims
from retrieval.answer.support import content_words, numbers
from retrieval.models import Clock, LanguageModel, ProbeCheck


@dataclass(frozen=True)
class _Line:
    n: int
    text: str


_PROBE_SOURCES = (
    "For a SEV1, the on-call engineer must acknowledge the page within 5 minutes and open an incident channel.",
    "A SEV1 is a full outage of the customer dashboard or data loss; a SEV2 is a degraded service with a workaround.",
    "Every SEV1 and SEV2 gets a blameless post-mortem, written within five working days and reviewed on Thursday.",
    "Everyone gets 25 days of paid holiday per calendar year, plus the public holidays of the country they work in.",
)
PROBE_QUESTIONS = (
    "How fast must a SEV1 page be acknowledged?",
    "When is the post-mortem of an outage written?",
    "How many days of paid holiday does everyone get?",
)


def probe(model: LanguageModel, clock: Clock = time.perf_counter) -> tuple[float, float, list[str]]:
    """First-token and answer seconds (medians over the probe questions after a warm-up
    that caches the instructions, as serving does), and the answers."""
    fmt = AnswerFormat(len(_PROBE_SOURCES))
    model.complete(build_prompt("Warm up.", _lines(0)), 1, grammar=fmt)
    firsts: list[float] = []
    totals: list[float] = []
    answers: list[str] = []
    for i, q in enumerate(PROBE_QUESTIONS, start=1):
        seen: list[float] = []

        def first_token(_piece: str, seen: list[float] = seen) -> None:
            if not seen:
                seen.append(clock())

        t = clock()
        out = model.complete(build_prompt(q, _lines(i)), 48, first_token, grammar=fmt)
        done = clock()
        firsts.append((seen[0] if seen else done) - t)
        totals.append(done - t)
        answers.append(out)
    return _median(firsts), _median(totals), answers


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2]


def _lines(turn: int) -> list[_Line]:
    """The probe sources, in another order at each turn: serving caches the instructions
    but never the sources, so neither may the probe."""
    order = _PROBE_SOURCES[turn % 4 :] + _PROBE_SOURCES[: turn % 4]
    return [_Line(i, t) for i, t in enumerate(order, start=1)]


def alike(a: str, b: str) -> bool:
    """Two answers to one probe agree: the same sentence numbers, and the shorter one's
    content words mostly in the longer (greedy decoding flips between "5 minutes." and
    the whole sentence that says so on a near tie; a broken conversion shares nothing)."""
    ca, cb = parse_claims(a), parse_claims(b)
    if [c.cite for c in ca] != [c.cite for c in cb] or numbers(a) != numbers(b):
        return False
    wa, wb = content_words(a), content_words(b)
    if not wa or not wb:
        return wa == wb
    return len(wa & wb) >= 0.5 * min(len(wa), len(wb))


ANSWER_PROBE = ProbeCheck(run=probe, agree=alike)
