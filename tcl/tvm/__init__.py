"""TCL inside TVM: learned models as MetaSchedule cost models, tuning and end-to-end checks."""
