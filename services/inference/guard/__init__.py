"""The SLO guard: per-variant window figures judged against objectives, acted on in tiers."""
