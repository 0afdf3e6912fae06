"""Register flow: rebuild the MLflow store (runs, registered models, aliases) from the pipeline's
versioned products, so a fresh clone's registry holds what the committed pipeline registered.

    python -m flows.register            # what `dvc repro register` runs; adds nothing already there

Writes the registry manifest (`mlruns/tcl-registry.json`, the stage's DVC output).
"""

from __future__ import annotations

import argparse

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from prefect import flow, get_run_logger

from tcl import tracking
from flows._params import load_checked_params

MANIFEST = "mlruns/tcl-registry.json"


@flow(name="register", log_prints=True)
def register_flow(params_path: str = "params.yaml", manifest_path: str = MANIFEST) -> dict:
    """Replay every run record of dvc.lock's stages into the store; write the manifest."""
    params = load_checked_params(params_path)
    log = get_run_logger()
    if not tracking.enabled(params):
        log.info("tracking is off (tracking.enabled / TCL_TRACKING): no store to rebuild")
        return {}
    from tcl.records import rebuild_registry
    from tcl.tracking.replay import write_manifest

    data = rebuild_registry(params, ".", log=log.info)
    write_manifest(data, manifest_path)
    for name, entry in data["registered_models"].items():
        aliases = ", ".join(f"{a} -> v{v}" for a, v in sorted(entry["aliases"].items()))
        log.info("%s: versions %s%s", name, ",".join(entry["versions"]), f"; {aliases}" if aliases else "")
    return data


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default="params.yaml")
    register_flow(ap.parse_args().params)
