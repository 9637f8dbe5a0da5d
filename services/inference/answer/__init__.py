"""Answers over the retrieved chunks: extractive (quoted sentences, the default) or
generative (a causal LM, when one is configured)."""
