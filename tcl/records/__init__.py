"""What the committed pipeline did, as MLflow run records rebuilt from its versioned products.

The MLflow store (`mlflow.db`, `mlruns/`) is not versioned; what the stages leave in DVC and
git is: the bundles (`models/`), the metrics JSONs and plots (`reports/`), and `dvc.lock`,
which holds the params each stage ran with and the md5 of every output. From these, this
package describes every run the pipeline logged (params, metrics with their steps,
artifacts, nested runs) and every model version it registered (name, version, bundle,
provenance tags, aliases) as plain data. `tcl.tracking.replay` writes the records into an
MLflow store; the `register` stage does it on every clone (README "Promotion").

Nothing here calls MLflow; `rebuild_registry` hands the records to `tcl.tracking.replay`.
"""

from ..tracking.run_record import Registration, RunRecord
from .pipeline import pipeline_records, rebuild_registry

__all__ = ["Registration", "RunRecord", "pipeline_records", "rebuild_registry"]
