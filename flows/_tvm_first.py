"""Import TVM's tensor intrinsics before Prefect and MLflow.

The first MetaSchedule TuneContext imports `tvm.s_tir.tensor_intrin`, whose
TVMScript parser calls `inspect.stack()` for every intrinsic; each call scans
`sys.modules`. Measured here: 24 s on its own, 180 s once Prefect and MLflow are
loaded. Flows that tune or measure import this module first.
"""

import tvm.s_tir.tensor_intrin  # noqa: F401
