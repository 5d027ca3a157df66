"""A question asked in Slack, and the work of answering it (a job in the queue)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    channel: str
    thread_ts: str  # the thread the answer goes in
    ts: str  # the question's own message (thread context is what came before it)
    text: str
    user: str
    is_dm: bool = False
    folders: tuple[str, ...] | None = None  # the channel's collection; None = every document
    language: str | None = None  # the asker's, as detected (None: unknown; English is shown)


@dataclass
class Job:
    """One journaled question on its way to an answer."""

    id: int  # its journal row
    question: Question
    placeholder_ts: str | None  # the message the answer replaces (None: post a new reply)
    created_at: float
