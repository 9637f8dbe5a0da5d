"""Query audit: one signed record per answered call, off the answer path, to audit.queries.v1."""
