"""Faust and aiokafka: the app factory and every fix of their private methods (patches)."""
