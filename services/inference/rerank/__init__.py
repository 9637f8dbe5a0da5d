"""Reranking: a cross-encoder re-scores the top candidates of a search (optional, off by default).

order   pure: which candidates are re-scored, their new order, the cut to top k
folder  pure: what a reranker folder must hold, checked when the settings are built
stage   the stage in the engine: one shared.batching Batcher in front of the scorer
model   the Hugging Face runtime (AutoModelForSequenceClassification), loaded at start
"""
