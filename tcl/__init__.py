"""TCL: transferable learned cost models for Apache TVM MetaSchedule."""

__version__ = "0.1.0"
