"""One-process mode: every service's agents, tables and timers on one Faust worker."""
