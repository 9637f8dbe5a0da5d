"""What every worker process has, whatever its stage: how it starts (`runner`), the boundary
around each record (`boundary`: dead letter, or stop so the record replays), the event-loop
heartbeat and the poison-record ledger, what it keeps out of memory (`lean_imports`), logs
that never carry content (`logsafe`), status files for `streamrag status`, and the slot
where in-process retrieval shards meet inference (`local_search`)."""
