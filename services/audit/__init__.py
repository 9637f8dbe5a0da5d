"""The audit trails' read side: `streamrag audit` checks what was ingested (documents/:
every redaction batch re-derived from docs.redacted.v1 and held to its signed record, its
chain and its anchor, and redaction's input reconciled with what it left) and what was
asked (queries/: each answer's audit record proven against its anchored batch). It runs no
agents and reads only topics and the chain; the record formats it checks are contracts in
shared/contract (audit_batches, query_audit, audit_signing, merkle)."""
