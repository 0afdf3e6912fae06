"""Run records of the transfer stage (tcl.transfer.tracked): the parent run, one nested run per
phase with its per-epoch loss and top-1 (from `models/transfer/history.json`), each KB snapshot
registered as a version of `<prefix>-kb-tcl` and the target model with its gate decision
(from `reports/transfer/stage.json`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from .lock import Lock
from ..tracking.run_record import Registration, RunRecord, record_key
from .provenance import promotion, provenance_tags

OUT = "models/transfer"


def transfer_records(root: Path, lock: Lock) -> list[RunRecord]:
    if not lock.has("transfer"):
        return []
    stage_json = root / "reports" / "transfer" / "stage.json"
    history_json = root / OUT / "history.json"
    m = json.loads(stage_json.read_text())
    history = json.loads(history_json.read_text())
    trains = [f"train@{p}" for p in lock.instances("train")][:1]
    used = lock.params("transfer", "featurize", *trains)
    settings = used.get("transfer") or {}
    data_version = lock.data_version()
    commit = lock.recording_commit("transfer", OUT)
    name = f"transfer-{m['method']}-{m['target']}"
    parent = RunRecord(record_key(name, stage_json, history_json), name,
                       {"stage": "transfer", "method": m["method"], "target": m["target"]})
    parent.params = {**{k: v for k, v in settings.items() if not isinstance(v, (list, dict))},
                     "order": ",".join(m["order"]), "seed": m.get("seed", 0), "data_version": data_version}
    parent.add_metrics({"target_held_out_top1": m.get("validation_top1"), "params_total": m.get("params_total"),
                        "params_deployed": m.get("params_deployed")})
    parent.artifacts = [(f"{OUT}/history.json", None), (f"{OUT}/forgetting.png", None)]
    kb_dirs = sorted((p for p in (root / OUT / "kb").iterdir() if p.is_dir()),
                     key=lambda p: int(p.name.split("-", 1)[0])) if (root / OUT / "kb").is_dir() else []
    kb_for = {d.name.split("-", 1)[1]: (d, v) for d, v in zip(kb_dirs, m.get("kb_versions") or [])}
    step = 0
    for phase in history:
        child = RunRecord(f"{parent.key}/{phase['phase']}-{phase['platform']}", f"{phase['phase']}-{phase['platform']}",
                          {"stage": "transfer", "phase": phase["phase"], "platform": phase["platform"]})
        for loss, values in zip(phase.get("losses") or [], phase.get("metrics") or []):
            child.add_metrics({"loss": loss, **values}, step)
            step += 1
        if phase["phase"] == "kd" and phase["platform"] in kb_for:
            kb_dir, version = kb_for.pop(phase["platform"])
            last = (phase.get("metrics") or [{}])[-1]
            meta = json.loads((kb_dir / "bundle.json").read_text()).get("meta") or {}
            tags = {"platforms": ",".join(meta.get("platforms") or phase["seen"]), "seed": str(m.get("seed", 0)),
                    **provenance_tags(lock, used, meta.get("data_version", data_version),
                                      # NaN where the platform has no held-out task: the monitor scored none, and
                                      # the live registration's held-out top-1 was NaN
                                      {"val_top1": last.get(f"kb_top1.{phase['platform']}", math.nan)}, commit,
                                      ("transfer",))}
            child.registrations.append(Registration(m["kb_model"], str(version), str(kb_dir.relative_to(root)), tags))
        parent.children.append(child)
    if m.get("registered_model"):
        gate, aliases = promotion(bool(m.get("champion")), _reason(m), m.get("validation_top1"))
        tags = {"platform": m["target"], "method": m["method"], "platforms": ",".join(m["order"]),
                "seed": str(m.get("seed", 0)),
                **provenance_tags(lock, used, data_version, {"val_top1": m.get("validation_top1")}, commit,
                                  ("transfer",)), **gate}
        parent.registrations.append(Registration(m["registered_model"], str(m["version"]), f"{OUT}/target", tags,
                                                 aliases))
    return [parent]


def _reason(m: dict) -> str:
    """stage.json keeps the previous champion's top-1, not the gate's sentence: rebuild the sentence."""
    before = m.get("previous_champion_validation_top1")
    if before is None:
        return "there is no champion yet" if m.get("champion") else "not promoted"
    verdict = "beats" if m.get("champion") else "is not higher than"
    return f"top-1 {m['validation_top1']:.4f} {verdict} the champion's {before:.4f}"
