"""Defaults every flow process needs on a closed network (no telemetry, local stores)."""

import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")
# Prefect's temporary server gives up after 20 s by default; on 2 busy cores (CI, a tuning
# running beside) it has taken longer, so a flow would fail before doing any work.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
