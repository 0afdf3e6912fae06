"""Learned cost models saved as files, with the pin of the registered version they came from.

The MLflow registry lives in one machine's `mlflow.db` (not versioned), so a retrain on a
fresh clone registers another model under the same name and version. A comparison that
spans sessions must tune every seed with the very same weights: the bundle is saved once,
beside the results, with the registered name, version, data version it came from and a
digest of its files; later runs load it from there (`tune.bundles`) and check the digest.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, Callable

PIN_FILE = "pin.json"


def bundle_digest(directory: str | Path) -> str:
    """sha256 over the bundle's files (names and bytes), the pin file left out."""
    h = hashlib.sha256()
    for path in sorted(p for p in Path(directory).rglob("*") if p.is_file() and p.name != PIN_FILE):
        h.update(path.relative_to(directory).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def read_pin(directory: str | Path) -> dict[str, Any]:
    """The pin of a saved bundle directory, checked against its files; a bundle without a pin
    file is pinned by its digest."""
    directory = Path(directory)
    digest = bundle_digest(directory)
    pin_path = directory / PIN_FILE
    if not pin_path.exists():
        return {"uri": str(directory), "sha256": digest, "why": "a saved bundle"}
    pin = json.loads(pin_path.read_text())
    if pin.get("sha256") != digest:
        raise ValueError(f"{directory}: its files changed since they were pinned "
                         f"(sha256 {digest[:12]}, {PIN_FILE} says {str(pin.get('sha256'))[:12]})")
    return {**pin, "bundle_dir": str(directory)}


def load_pinned(directory: str | Path):
    """(bundle, pin) from a saved bundle directory (see `read_pin`)."""
    from ..models.bundle import ModelBundle

    pin = read_pin(directory)
    return ModelBundle.load(directory), pin


def pin_bundle(directory: str | Path, resolve: Callable[[], tuple[Any, dict[str, Any]]]) -> dict[str, Any]:
    """The pin of the bundle saved at `directory`; if none is there yet, `resolve()` gives
    (bundle, pin fields) and they are saved first, through a temporary directory renamed at
    the end, so a kill leaves either nothing or a complete bundle."""
    directory = Path(directory)
    if not (directory / PIN_FILE).exists():
        bundle, fields = resolve()
        staging = directory.with_name(directory.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        bundle.save(staging)
        (staging / PIN_FILE).write_text(json.dumps({**fields, "sha256": bundle_digest(staging)}, indent=2))
        shutil.rmtree(directory, ignore_errors=True)
        staging.rename(directory)
    return read_pin(directory)


def weight_digests(pin: dict[str, Any]) -> set[str]:
    """Every digest this pin's weights were saved under (its own and those before an `add_op_types`):
    a run tuned with any of them used these very weights."""
    return {pin["sha256"], *pin.get("same_weights_as", [])}


def ensemble_pin(pins: list[dict[str, Any]], members: tuple[str, ...]) -> dict[str, Any]:
    """One pin for an ensemble (tcl.tvm.ensemble): its members' fields joined with ' + ', and where every member
    is pinned by digest, a digest over theirs, so a run with other weights for any member is another run."""
    def joined(key: str) -> str:
        return " + ".join(str(p.get(key)) for p in pins)

    pin = {"uri": joined("uri"), "registered_model": joined("registered_model"), "version": joined("version"),
           "data_version": joined("data_version"), "why": f"ensemble of {', '.join(members)}"}
    if all(p.get("sha256") for p in pins):
        pin["sha256"] = hashlib.sha256(":".join(p["sha256"] for p in pins).encode()).hexdigest()
    return pin


def add_op_types(directory: str | Path, op_types: dict[str, int], source: str) -> dict[str, Any]:
    """Give a bundle pinned before bundles kept their training operator types (`meta.op_types`, which
    the guard reads) those types, counted from `source` (the training split it was fitted on); the
    weights are untouched, the pin gets the new digest and says what changed. Returns the new pin."""
    from ..data.store import atomic_write_bytes
    from ..models.bundle import BUNDLE_FILE

    directory = Path(directory)
    pin = read_pin(directory)
    info = json.loads((directory / BUNDLE_FILE).read_text())
    if (info.get("meta") or {}).get("op_types") is not None:
        raise ValueError(f"{directory}: the bundle already names its training operator types")
    info.setdefault("meta", {})["op_types"] = dict(sorted(op_types.items()))
    atomic_write_bytes(directory / BUNDLE_FILE, json.dumps(info, indent=2).encode())
    pin.pop("bundle_dir", None)
    pin.update(sha256=bundle_digest(directory), same_weights_as=[*pin.get("same_weights_as", []), pin["sha256"]],
               amended=f"meta.op_types added from {source}; the weights are those of same_weights_as")
    atomic_write_bytes(directory / PIN_FILE, json.dumps(pin, indent=2).encode())
    return read_pin(directory)
