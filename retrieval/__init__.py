"""Footnote's core: extract, chunk, index, search, rerank, gate and answer.

Nothing in this package imports Slack; heavy libraries each live in one module
(``embed`` for sentence-transformers, ``store`` for chromadb, ``llm`` for llama_cpp).
"""

import os

# numpy's OpenBLAS threads spin on every core for a while after each vector product,
# and the embedding model's ONNX Runtime threads then wait for those cores: measured on
# 2 cores (AMD EPYC), a query's embedding inside search took 12.1 ms p50, 6.2 ms with
# one BLAS thread. Footnote's products are one query against the index (memory-bound),
# where a second BLAS thread gains nothing. Set before numpy is first imported; an
# explicit OPENBLAS_NUM_THREADS wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
