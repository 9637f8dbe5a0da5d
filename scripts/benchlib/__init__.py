"""The benchmarks behind scripts/bench_*, and what they share.

One module per benchmark (answer, encoder, ingest, latency, ledger, quality, query, redaction,
rerank, retrieval), each run as `python -m scripts.benchlib.<name>` by its scripts/bench_<name>
shim. Shared by them: paths (the repository, $BEIR, anvil, bench-results/), stats
(percentiles, summaries, ratios), procs (CPU and memory of a running mesh), progress.
Shared with the tests: the generated inputs both measure with (pii_corpus, pii_generated,
tinylm, tinyreranker) and adaptive_wait, the batching the benchmarks compare against.
"""
