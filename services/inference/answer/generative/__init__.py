"""Generative answers: the model wrapper (model), the batched decode loop (decode) and the
prompt and stop-sequence rules (prompt)."""
