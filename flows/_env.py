"""Defaults every flow process needs: a closed network (no telemetry, local stores), tcl's logs in the flow's log."""

import logging
import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")
# Prefect's temporary server gives up after 20 s by default; on 2 busy cores (CI, a tuning
# running beside) it has taken longer, so a flow would fail before doing any work.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
# tcl's own loggers (a checkpoint of `make collect`, a resumed training, an ingested database) reach the
# flow's log and the Prefect UI: Prefect gives them its handlers, and their level lets INFO through.
os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "tcl")
logging.getLogger("tcl").setLevel(logging.INFO)
