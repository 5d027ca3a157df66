"""Test support shared by the tests and the benchmarks (tooling: not in the wheel).

- ``fakes``: in-memory stand-ins for the index's collaborators, embedders and models;
- ``slack``: a fake Slack Web API on 127.0.0.1 (port 0) that records every call, and signed requests;
- ``servers``: real engines on loopback for the scale-out tests (a Chroma server, a llama.cpp server).
"""
