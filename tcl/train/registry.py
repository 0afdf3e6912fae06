"""Moved to tcl.tracking.registry (the one module that talks to the MLflow registry).

Kept so that model versions registered before the move load: their pickled pyfunc names
`tcl.train.registry.BundlePyfunc`. New code imports tcl.tracking.registry.
"""

from ..tracking.registry import BundlePyfunc, load_registered, registered_name  # noqa: F401
