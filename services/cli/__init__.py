"""The `streamrag` command line: bring-up, workers, producing, querying, status."""
