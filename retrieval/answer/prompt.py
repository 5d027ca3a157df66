"""The answer format: the prompt the model reads, the grammar it writes under, and
the reader of what it wrote.

The model is shown numbered source sentences and writes one to three lines, each
starting with the number of the sentence it comes from: ``[3] The answer.`` A GBNF
grammar makes that the only thing it can write: no line without a number, no number
that is not a source sentence, and ``[0]`` (nothing else on the line) when the
sources do not answer. The instructions come first and never change, so llama.cpp
reuses their cached prefix from the previous question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from retrieval.answer.evidence import Numbered, sources_block
from retrieval.ingest import ABBREVIATIONS
from retrieval.models import Message

INSTRUCTIONS = (
    "You answer questions using ONLY the numbered source sentences you are given. "
    "Write one to three short sentences. Start each sentence with the number of the source sentence "
    "it is taken from, in square brackets. Copy the source's words where you can. "
    "If the sources do not answer the question, write only: [0]"
)
# Appended for a question in another language than English: the model writes in it (it
# copies the source's words, so from Danish sources it mostly does anyway).
IN_LANGUAGE = {"da": " Write the answer in Danish."}
MAX_CLAIMS = 3
# The most of a question the model reads, each of the two times it is shown. A message with a
# pasted log or document would otherwise overflow the model's 4,096-token window (14,000
# characters become 7,000 tokens) and the answer would be an error. Its start and end are
# kept, where people put what they ask; the search still reads the whole message.
QUESTION_CHARS = 1500
NOT_FOUND = "[0]"

_CLAIM = re.compile(r"\[(\d+)\]\s*([^\n\[]*)")


@dataclass(frozen=True)
class Claim:
    """One sentence of the model's answer and the sentence number it cited (0 = none)."""

    text: str
    cite: int


def build_prompt(
    question: str, sentences: Sequence[Numbered], context: Sequence[str] = (), language: str | None = None
) -> list[Message]:
    """Fixed instructions (a cacheable prefix), then the question, the numbered sentences
    and the question again.

    The question before the sources lets a decoder-only model read them for it (query-aware
    contextualisation, Liu et al. 2023, "Lost in the Middle"). Measured on the dev set
    (0.5B, then 3 sentences, 64 + 30 questions): the model then copies the source sentence it
    cites word for word (59 of 62 first lines, against 34), so the support check had nothing
    to remove (6 before), re-attributed 1 sentence (7) and quoted bare evidence 0 times
    (13); the needle's words in the answers rose from 0.57 to 0.61; evidence hits stayed 36
    (paired +4/-4; one half of the documents +3, the other -3); bluffs 2/30 both.
    """
    earlier = "".join(f"Earlier question in this conversation: {q}\n" for q in context)
    question = within(question, QUESTION_CHARS)
    user = f"QUESTION\n{question}\n\nSOURCES\n{sources_block(sentences)}\n\n{earlier}QUESTION\n{question}"
    system = INSTRUCTIONS + IN_LANGUAGE.get(language or "", "")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def within(text: str, limit: int) -> str:
    """``text``, or its start and end with a marked gap when it is longer than ``limit``."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    return f"{text[:head].rstrip()} […] {text[len(text) - (limit - head) :].lstrip()}"


_STOPS = frozenset(b".!?")
_DIGITS = frozenset(b"0123456789")
_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") | _DIGITS
_NOT_IN_TEXT = frozenset(b"\n[]")
# A sentence goes on after an abbreviation's or a number's stop when a space and a
# lower-case letter or a digit follow ("dvs. data", "Registreringsnr. på siden", "1. juli",
# "e.g. the"): where the chunker does not end a sentence either, so the model can copy
# one whole. After any other word ". " ends it: a small model asked to go on may write
# the source's next sentence in lower case ("… i rapporten. hvis du …").
_ABBREVIATED = tuple(sorted({w.encode() for a in ABBREVIATIONS for w in (a, a.capitalize())}))
_TAIL = max(len(a) for a in _ABBREVIATED)  # what of a sentence the automaton keeps to tell
_GOES_ON = frozenset(b"abcdefghijklmnopqrstuvwxyz") | _DIGITS
_LATIN1_LEAD = 0xC3  # UTF-8's two-byte Latin-1 lower case (æ, ø, å, é, ü …): 0xC3, then 0xA0-0xBF
_LATIN1_LOWER = range(0xA0, 0xC0)


@dataclass(frozen=True)
class FormatCursor:
    """Where a partial answer stands in the answer format (one immutable step per byte)."""

    fmt: AnswerFormat
    # open "[" · num · space · first char · text · stop · inner stop · zero ("[0]") ·
    # gap (". " after an abbreviation) · gap2 (a two-byte letter's first byte after it)
    phase: str = "open"
    digits: str = ""
    lines: int = 0
    tail: bytes = b""  # the sentence's last bytes, up to its stop: is it an abbreviation's?

    @property
    def can_end(self) -> bool:
        """Whether the answer may stop here: after ``[0]`` or at a sentence's final stop."""
        return self.phase in ("stop", "zero")

    def feed(self, piece: bytes) -> FormatCursor | None:
        """The cursor after ``piece``, or None when the format does not allow it."""
        cur = self
        for b in piece:
            nxt = cur._step(b)
            if nxt is None:
                return None
            cur = nxt
        return cur

    def _step(self, b: int) -> FormatCursor | None:
        p, f = self.phase, self.fmt
        if p == "open":
            return self._to("num") if b == ord("[") else None
        if p == "num":
            if b == ord("]"):
                if self.digits == "0" and self.lines == 0:
                    return self._to("zero")
                return self._to("space") if self.digits in f.numbers else None
            if b not in _DIGITS:
                return None
            digits = self.digits + chr(b)
            allowed = f.first_line_numbers if self.lines == 0 else f.numbers
            return FormatCursor(f, "num", digits, self.lines) if any(n.startswith(digits) for n in allowed) else None
        if p == "space":
            return self._to("first") if b == ord(" ") else None
        if p in ("first", "text"):
            if b in _NOT_IN_TEXT:
                return None
            if b in _STOPS:
                return self._to("inner" if p == "first" else "stop", b)
            return self._to("text", b)
        if p == "inner":  # a stop before any other character must be followed by one (.5)
            return self._to("text", b) if b in _ALNUM else None
        if p == "stop":
            return self._after_stop(b)
        if p == "gap":
            if b == _LATIN1_LEAD:
                return self._to("gap2", b)
            return self._to("text", b) if b in _GOES_ON else None
        if p == "gap2":
            return self._to("text", b) if b in _LATIN1_LOWER else None
        return None

    def _after_stop(self, b: int) -> FormatCursor | None:
        if b in _ALNUM:
            return self._to("text", b)  # 2.5, e.g: the stop did not end the sentence
        if b == ord(" ") and self.tail.endswith(b".") and self._abbreviated(self.tail[:-1]):
            return self._to("gap", b)
        if b == ord("\n") and self.lines + 1 < self.fmt.max_claims:
            return FormatCursor(self.fmt, "open", "", self.lines + 1)
        return None

    @staticmethod
    def _abbreviated(text: bytes) -> bool:
        return text[-1:].isdigit() or text.endswith(_ABBREVIATED)

    def _to(self, phase: str, byte: int | None = None) -> FormatCursor:
        # digits matter inside "num" only; the tail inside a sentence only (``byte``: one of its)
        tail = (self.tail + bytes([byte]))[-_TAIL - 1 :] if byte is not None else b""
        return FormatCursor(self.fmt, phase, lines=self.lines, tail=tail)


@dataclass(frozen=True)
class AnswerFormat:
    """``[0]`` alone, or 1..max_claims lines ``[n] one sentence.`` with n a source number."""

    n_sentences: int
    max_claims: int = MAX_CLAIMS

    @cached_property  # read at every byte of every candidate token: built once
    def numbers(self) -> frozenset[str]:
        return frozenset(str(i) for i in range(1, self.n_sentences + 1))

    @cached_property
    def first_line_numbers(self) -> frozenset[str]:
        """The first line may also be ``[0]``."""
        return self.numbers | {"0"}

    def start(self) -> FormatCursor:
        return FormatCursor(self)

    def gbnf(self) -> str:
        return answer_grammar(self.n_sentences, self.max_claims)


def answer_grammar(n_sentences: int, max_claims: int = MAX_CLAIMS) -> str:
    """GBNF: ``[0]`` alone, or 1..max_claims lines ``[n] text`` with n in 1..n_sentences."""
    numbers = " | ".join(f'"{i}"' for i in range(n_sentences, 0, -1))  # longest first: "12" before "1"
    more = " ".join(['("\\n" line)?'] * (max_claims - 1))
    abbreviations = " | ".join(f'"{a.decode()}"' for a in _ABBREVIATED)
    return (
        f'root ::= "[0]" | line {more}\n'
        'line ::= "[" num "] " text\n'
        f"num ::= {numbers}\n"
        # One sentence per line: a stop ends the line unless a letter or digit follows it
        # at once (2.5, e.g.), or it closes an abbreviation and a space and a lower-case
        # letter follow (dvs. data), so the model cannot run on into a second, uncited sentence.
        'text ::= char+ ("." | "!" | "?")\n'
        'char ::= [^\\n\\[\\].!?] | [.!?] [a-zA-Z0-9] | [.!?]? abbr ". " [a-z0-9\\u00E0-\\u00FF]\n'
        f"abbr ::= [0-9] | {abbreviations}\n"
    )


def parse_claims(raw: str) -> list[Claim]:
    """``[n] sentence`` lines (the constrained format), or a free-text reply from a server
    that ignored the grammar (``sentence [n].``: each sentence takes the first number it
    carries; 0 when none)."""
    text = raw.strip()
    if text.startswith("["):
        claims = [Claim(" ".join(m.group(2).split()), int(m.group(1))) for m in _CLAIM.finditer(text)]
        if claims:
            return [c for c in claims if c.text or c.cite == 0]
    return [_free_claim(s) for s in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9])", text) if s.strip()]


def says_nothing_found(claims: Sequence[Claim]) -> bool:
    return not claims or all(c.cite == 0 and not c.text for c in claims)


def _free_claim(sentence: str) -> Claim:
    m = re.search(r"\[(\d+)\s*[\],;]", sentence)  # "[2]" or the first of "[2, 3]"
    text = " ".join(re.sub(r"\[\d+(?:\s*[,;]\s*\d+)*\]", "", sentence).split()).rstrip(" ,;")
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)  # "It extracts [2]." leaves "It extracts ."
    return Claim(text, int(m.group(1)) if m else 0)


def visible_partial(raw: str) -> str:
    """What a reader may see while the model writes: its sentences without the numbers
    (they are sentence numbers, not the citation numbers of the final reply)."""
    cut = raw.rfind("[")
    if cut != -1 and "]" not in raw[cut:]:
        raw = raw[:cut]  # a number still being written
    text = re.sub(r"\[\d*\]\s*", "", raw)
    return " ".join(text.split())
