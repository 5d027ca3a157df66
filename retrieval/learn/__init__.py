"""Learning the team's words: confirmed (message, passage) pairs.

When a teammate confirms that a passage answers a message ("This answers it" under a
pointer, 👍 on an answer, ``footnote confirm``), the pair is kept, per channel scope; a
later message that reads like it is answered from that passage, with confidence.
:class:`LearnedPairs` keeps, matches, forgets and retires them.
"""

from __future__ import annotations

from retrieval.learn.pairs import EVERYWHERE, NEVER, LearnedPairs, Match, MatchConfig, Pair, holder, ranks, scope_key

__all__ = ["EVERYWHERE", "NEVER", "LearnedPairs", "Match", "MatchConfig", "Pair", "holder", "ranks", "scope_key"]
