"""Load TVM's tensor intrinsics before Prefect and MLflow.

The first MetaSchedule TuneContext imports them anyway; once Prefect and MLflow
are loaded that import scans many more modules (tcl/collect/intrinsics.py says why).
Flows that tune or measure import this module first.
"""

from tcl.collect.intrinsics import load_tensor_intrinsics

load_tensor_intrinsics()
