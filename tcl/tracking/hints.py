"""What to run when a registered model is missing: the exact command, and never one that measures.

The committed pipeline's metrics JSONs say which models its stages registered. A model they
name is rebuilt from the DVC-tracked bundles by the register stage (no training, no
measuring); a model no stage registers has to be trained, on the features already there.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..config import REPO_ROOT

REBUILD = ("`dvc pull && python -m flows.register` rebuilds the registry from the committed bundles "
           "(no training, no measuring; `dvc repro register` does the same)")


def committed_names(root: str | Path = REPO_ROOT) -> set[str]:
    """Every registered model name the committed train, train_joint and transfer stages recorded."""
    root = Path(root)
    names: set[str] = set()
    for path in sorted((root / "reports" / "train").glob("*.json")):
        for entry in json.loads(path.read_text()).values():
            # <platform>.json: model -> entry; joint.json: model -> platform -> entry
            entries = entry.values() if isinstance(entry, dict) and "registered_model" not in entry else [entry]
            names.update(e["registered_model"] for e in entries if isinstance(e, dict) and e.get("registered_model"))
    stage = root / "reports" / "transfer" / "stage.json"
    if stage.exists():
        m = json.loads(stage.read_text())
        names.update(n for n in (m.get("registered_model"), m.get("kb_model")) if n)
    return names


def how_to_get(model_name: str, prefix: str, root: str | Path = REPO_ROOT) -> str:
    """The command that makes a `<prefix>-<model_name>-<platform>` champion available."""
    if any(n.startswith(f"{prefix}-{model_name}-") for n in committed_names(root)):
        return f"The committed pipeline registered {prefix}-{model_name}-<platform> models: {REBUILD}."
    return (f"No stage of this pipeline registers a '{model_name}' model: add it to train.models in params.yaml, "
            f"then `python -m flows.train --platform zen4-avx512-1c` (or another platform of train.platforms; "
            f"it trains on data/features and measures nothing).")


def how_to_register(name: str, root: str | Path = REPO_ROOT) -> str:
    """The command that makes registered model `name` exist."""
    if name in committed_names(root):
        return f"The committed pipeline registered {name}: {REBUILD}."
    return ("No stage of this pipeline registers it: train it (`python -m flows.train --platform <platform>`, "
            "with the model in train.models) or check the name.")
