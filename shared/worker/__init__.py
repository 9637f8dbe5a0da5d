"""What every worker process has, whatever its stage: how it starts (`runner`, which first
tries the ports it will listen on: `ports`), the boundary around each record (`boundary`:
dead letter, or stop so the record replays), the event-loop heartbeat and the poison-record
ledger, its stage metrics, what it keeps out of memory (`lean_imports`), status files for
`streamrag status`, and the slot where in-process retrieval shards meet inference
(`local_search`). Logs that never carry content are shared/logsafe.py, below every room
(settings register their paths with it)."""
