"""Channel scoping: a question only retrieves from the folders its channel may see."""

from __future__ import annotations

import shutil

import pytest
from pydantic import ValidationError

from bot.scoping import ChannelScopes, Scope
from config.settings import Settings
from retrieval.answer.service import AnswerService
from retrieval.models.embed import SentenceTransformerEmbedder
from retrieval.search.engine import Engine
from retrieval.search.gate import GateConfig
from tests.conftest import EXAMPLES, make_engine


@pytest.fixture(scope="module")
def foldered(embedder: SentenceTransformerEmbedder, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    root = tmp_path_factory.mktemp("scoped")
    docs = root / "docs"
    for folder, name in (("engineering", "on-call.md"), ("hr", "time-off.txt"), ("finance", "expenses.md")):
        (docs / folder).mkdir(parents=True)
        shutil.copy(EXAMPLES / name, docs / folder / name)
    eng = make_engine(embedder, root / "data", docs)
    eng.sync()
    return eng


def test_search_never_returns_documents_outside_the_folders(foldered: Engine) -> None:
    q = "How many weeks of parental leave do I get?"
    assert foldered.searcher().search(q, k=1).hits[0].chunk.path == "hr/time-off.txt"
    scoped = foldered.searcher().search(q, k=20, folders=["engineering", "finance/"])
    assert scoped.hits and all(h.chunk.path.startswith(("engineering/", "finance/")) for h in scoped.hits)
    assert scoped.best_distance > foldered.searcher().search(q, k=1).best_distance
    assert foldered.searcher().search(q, k=5, folders=["nowhere"]).hits == []


def test_a_scoped_question_outside_its_collection_is_refused_and_names_it(foldered: Engine) -> None:
    called = []
    # No pointing band: what is asked about is refused outright (pointing is tested elsewhere).
    svc = AnswerService(foldered.searcher, lambda: called.append(1), GateConfig(0.70, point=0.70))  # type: ignore[arg-type,return-value]
    a = svc.answer("How many weeks of parental leave do I get?", folders=["engineering"])
    assert a.refused and a.collection == "engineering/" and called == []
    a = svc.answer("How many weeks of parental leave?", folders=["nowhere"])
    assert a.refused and a.reason == "no documents in nowhere/"


def test_channel_scopes_parse_defaults_dms_and_exclusions() -> None:
    s = Settings(channel_folders="C0ENG=engineering|runbooks/, *=public, dm=public|hr", excluded_channels="C0RANDOM")
    scopes = ChannelScopes(s.channel_folders, s.excluded_channels)
    assert scopes.for_channel("C0ENG") == Scope(("engineering", "runbooks"))
    assert scopes.for_channel("C0OTHER") == Scope(("public",))
    assert scopes.for_channel("D123", is_dm=True) == Scope(("public", "hr"))
    assert scopes.for_channel("C0RANDOM").excluded
    none = Settings(channel_folders="")
    assert ChannelScopes(none.channel_folders, none.excluded_channels).for_channel("C1") == Scope(None)  # everything
    with pytest.raises(ValidationError, match="should look like"):
        Settings(channel_folders="C0ENG")
    with pytest.raises(ValidationError, match="may not leave"):
        Settings(channel_folders="C0ENG=../secrets")
