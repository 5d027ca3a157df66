"""The answer-type check: a question asking for an amount, or for one of two alternatives, is answered
only from sentences that state one."""

from __future__ import annotations

import pytest

from retrieval.answer.asked import alternatives, asks_for_amount, names_either, states_amount, unanswered


@pytest.mark.parametrize(
    "question",
    [
        "How much can I spend per month in my AWS sandbox account?",
        "What rate limit should our public API enforce per API key?",
        "how often should drills run",
        "Hvor mange dage har jeg til at indberette momsen?",
        "Hvilket beløb skal jeg betale?",
    ],
)
def test_an_amount_is_asked_for(question: str) -> None:
    assert asks_for_amount(question)


@pytest.mark.parametrize(
    "question", ["Which screen readers should we test with?", "What is a SEV1?", "Hvem må se dataene?", ""]
)
def test_other_questions_ask_for_no_amount(question: str) -> None:
    assert not asks_for_amount(question)


def test_a_translation_asking_for_an_amount_counts() -> None:
    assert asks_for_amount("Hvem skal jeg spørge?", "How many days do I get?")


@pytest.mark.parametrize(
    ("sentence", "language"),
    [
        ("Aim for more than 90% of your source code to be covered.", "en"),
        ("Run drills on an annual basis at the very least.", "en"),
        ("There's only one participant per session.", "en"),
        ("Push work up at least once a day.", None),
        ("Fristen er otte dage efter perioden.", "da"),
        ("Du har to uger.", "da"),
    ],
)
def test_a_sentence_states_an_amount(sentence: str, language: str | None) -> None:
    assert states_amount([(sentence, language)])


@pytest.mark.parametrize(
    ("sentence", "language"),
    [
        ("Consider whether one of your product goals is to allow normal use of the API.", "en"),
        ("A SEV1 is a full outage; a SEV2 is a degraded service.", "en"),  # a digit inside a name
        ("Talk to the fire warden.", "en"),  # Danish "to" and "fire" are numbers only in Danish
        ("Det er en god idé at spørge et medlem af holdet.", "da"),  # articles, not numbers
    ],
)
def test_a_sentence_states_no_amount(sentence: str, language: str | None) -> None:
    assert not states_amount([(sentence, language)])


def test_any_sentence_stating_an_amount_is_enough() -> None:
    assert states_amount([("Keys are used to manage access.", "en"), ("The limit is 100 requests.", "en")])
    assert not states_amount([])


@pytest.mark.parametrize(
    ("question", "choice"),
    [
        (
            "Should the vendor contract be firm-fixed-price or time-and-materials?",
            ("firm-fixed-price", "time-and-materials"),
        ),
        ("Are splits saved to CSV or JSON?", ("csv", "json")),
        ("Skal jeg bruge faktura eller kreditnota?", ("faktura", "kreditnota")),
        ("Should I use tabs or spaces for indentation?", ("tabs", "spaces")),
    ],
)
def test_a_question_offering_two_answers(question: str, choice: tuple[str, str]) -> None:
    assert alternatives(question) == choice


@pytest.mark.parametrize(
    "question",
    [
        "Can I merge now or not?",  # no second answer
        "Is Postgres a requirement for TTS projects, or just the default datastore?",  # clauses, not two words
        "Which screen readers should we test with?",
        "Should I do this or that?",  # stopwords name nothing
        "Who approves a refund or a credit note, and when?",  # the or is not at the question's end
    ],
)
def test_a_question_offering_no_alternatives(question: str) -> None:
    assert alternatives(question) is None


def test_an_alternative_is_named_whatever_its_hyphens_and_case() -> None:
    choice = ("firm-fixed-price", "time-and-materials")
    assert names_either(choice, ["Use a Firm fixed price contract."])
    assert not names_either(choice, ["The agreements process takes 3-6 months."])


def test_why_cited_sentences_cannot_answer() -> None:
    on_topic = [("Keys are used to manage and authenticate API access.", "en")]
    assert unanswered("What rate limit should our API enforce?", on_topic) == (
        "the closest passages state no amount, and the question asks for one"
    )
    assert unanswered("What rate limit should our API enforce?", [("Allow 100 requests a minute.", "en")]) is None
    assert "neither tabs nor spaces" in str(unanswered("Tabs or spaces?", on_topic))
    assert unanswered("How are API keys used?", on_topic) is None


def test_a_translated_question_keeps_its_interrogative_not_its_alternatives() -> None:
    danish = [("Momsen indberettes via TastSelv.", "da")]
    assert unanswered("Hvordan indberettes momsen?", danish, "How many days do I have to file VAT?") is not None
    assert unanswered("Hvordan indberettes momsen?", danish, "Should I file by mail or online?") is None
