"""The answer cache: repeated questions answered without a stale answer (key, store, serve)."""
