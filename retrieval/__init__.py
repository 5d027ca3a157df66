"""Footnote's core: extract, chunk, index, search, rerank, gate and answer.

Nothing in this package imports Slack; heavy libraries each live in one module
(``embed`` for sentence-transformers, ``store`` for chromadb, ``llm`` for llama_cpp).
"""
