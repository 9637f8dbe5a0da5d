"""Semantic drift of the embedded stream, per source, domain and model (docs/design/drift.md).

sample.py turns an embedded chunk set into a DriftSample; window.py sums one tumbling window;
detector.py compares each closed window with the last K and reports; snapshot.py keeps the
detectors across restarts. agents.py is the Faust side.
"""
