"""The query-path configuration at run time: applied versions (live), routing, the reader."""
