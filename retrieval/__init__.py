"""Footnote's core: no Slack, no settings object, no environment writes.

- ``models``: the embedder and the language model, and what is measured once per machine to run them;
- ``ingest``: files to canonical text, chunks and sentences, synced into the index;
- ``index``: the vector store, the manifest, the lease, shared records, BM25 and the snapshot;
- ``search``: hybrid ranking, reranking, the gate and its self-calibration, the engine;
- ``learn``: confirmed (message, passage) pairs, matched to later messages in the same scope;
- ``answer``: the prompt, the evidence, the support check, citations and signed links;
- ``evaluation``: recall, refusals and answer-level figures (``footnote eval``).

``types`` and ``errors`` are shared by all of them; ``measured`` keeps measure-once results.
Each subpackage's ``__init__`` is its front door: the names others may use.
"""
