"""Prefect flows: one per pipeline stage. Thin: the logic lives in `tcl`."""
