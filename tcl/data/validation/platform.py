"""Validation of a platform's records: bad rows quarantined, loud failure.

Each platform's records (from every configured store root) are checked in batches
of at most `batch_rows` rows (`batches`) with one Great Expectations suite (`suite`).
Outputs:

* `<validated_root>/platform=<name>.parquet`: the rows that passed (RECORD_SCHEMA);
* `<quarantine_dir>/validate-<name>.jsonl`: one line per failed row, `reason` = the
  failed expectation names, `source_file`/`line` = the part file and row (1-based);
* `<report_dir>/<name>.json`: per-expectation success and unexpected counts, failed share;
* one MLflow run (tag stage=validate) with that JSON and GE's own result as artifacts.

If the failed share exceeds `validate.max_failed_share`, or a table-level
expectation fails, `ValidationFailed` is raised after everything above is written
(the validated file is then not published), with a summary naming each failing
expectation and its counts: the DVC stage exits non-zero.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tcl.compute import Units, serial_units
from tcl.data.quarantine import Quarantine
from tcl.data.schema import RECORD_SCHEMA
from tcl.data.store import atomic_write_bytes
from tcl.data.validation.batches import plan_batches, platform_parts, validate_batch
from tcl.data.validation.suite import BatchResult, ValidateConfig

log = logging.getLogger(__name__)


class ValidationFailed(RuntimeError):
    """The records of a platform failed validation beyond what the params tolerate."""


def _share(stats: dict[str, Any]) -> float | None:
    if stats["unexpected_count"] is None or not stats["element_count"]:
        return None
    return stats["unexpected_count"] / stats["element_count"]


@dataclass
class ValidationSummary:
    platform: str
    rows: int = 0
    failed_rows: int = 0
    max_failed_share: float = 0.0
    expectations: dict[str, dict[str, Any]] = field(default_factory=dict)
    quarantined_by_expectation: dict[str, int] = field(default_factory=dict)
    table_level_failures: list[str] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)
    parts: int = 0

    @property
    def failed_share(self) -> float:
        return self.failed_rows / self.rows if self.rows else 0.0

    @property
    def passed(self) -> bool:
        return not self.table_level_failures and self.failed_share <= self.max_failed_share

    def to_json(self) -> dict[str, Any]:
        return {"platform": self.platform, "passed": self.passed, "rows": self.rows,
                "valid_rows": self.rows - self.failed_rows, "failed_rows": self.failed_rows,
                "failed_share": self.failed_share, "max_failed_share": self.max_failed_share,
                "parts": self.parts, "table_level_failures": self.table_level_failures,
                "quarantined_by_expectation": self.quarantined_by_expectation,
                "expectations": {name: {**st, "unexpected_share": _share(st)}
                                 for name, st in self.expectations.items()},
                "paths": self.paths}

    def describe(self) -> str:
        """Readable lines: the verdict, then every failing expectation with its counts."""
        lines = [f"validation of platform '{self.platform}': {self.failed_rows} of {self.rows} rows failed "
                 f"({self.failed_share:.2%}; allowed {self.max_failed_share:.2%})"]
        for name, st in self.expectations.items():
            if not st["success"]:
                what = f"{st['type']}({st['column']})" if st["column"] else st["type"]
                lines.append(f"  FAILED {name} [{what}]: unexpected {st['unexpected_count']} of "
                             f"{st['element_count']}" + (f", observed {st['observed_value']!r:.120}"
                                                         if st["unexpected_count"] is None else ""))
        if self.table_level_failures:
            lines.append(f"  table-level failures: {', '.join(self.table_level_failures)}")
        return "\n".join(lines)

    def merge(self, batch: BatchResult) -> None:
        self.rows += batch.rows
        self.failed_rows += len(batch.failed)
        for names in batch.failed.values():
            for n in names:
                self.quarantined_by_expectation[n] = self.quarantined_by_expectation.get(n, 0) + 1
        for name, st in batch.stats.items():
            acc = self.expectations.setdefault(name, {**st, "element_count": 0, "unexpected_count": None})
            acc["success"] = acc["success"] and st["success"]
            if st["element_count"] is not None:
                acc["element_count"] = (acc["element_count"] or 0) + st["element_count"]
            if st["unexpected_count"] is not None:
                acc["unexpected_count"] = (acc["unexpected_count"] or 0) + st["unexpected_count"]
            if not st["success"]:
                acc["observed_value"] = st["observed_value"]
                acc["partial_unexpected_list"] = st["partial_unexpected_list"]
                acc["exception"] = acc.get("exception") or st["exception"]
            if not st["success"] and not st["row_level"] and name not in self.table_level_failures:
                self.table_level_failures.append(name)


def validate_platform(platform: str, params: dict[str, Any], *, stores: list[str | Path],
                      validated_root: str | Path = "data/validated",
                      quarantine_dir: str | Path = "data/quarantine",
                      report_dir: str | Path = "reports/validation", track: bool = True,
                      units: Units = serial_units) -> ValidationSummary:
    """Validate every record of `platform` in `stores`; raise ValidationFailed past the threshold.

    `units` runs the batches (`validate_batch`): in this process by default, or on Dask
    workers (tcl.compute); their outcomes are written in batch order either way."""
    cfg = ValidateConfig.from_params(params)
    parts = platform_parts(stores, platform)
    if not parts:
        raise ValidationFailed(f"no records for platform '{platform}' under {[str(s) for s in stores]}")
    validated = Path(validated_root) / f"platform={platform}.parquet"
    tmp = validated.with_name(f".{validated.name}.tmp")
    report = Path(report_dir) / f"{platform}.json"
    ge_report = Path(report_dir) / f"{platform}.ge.json"
    qpath = Path(quarantine_dir) / f"validate-{platform}.jsonl"
    for p in (validated.parent, report.parent, qpath.parent):
        p.mkdir(parents=True, exist_ok=True)
    # Redone from scratch, never appended to; a killed run leaves no earlier output looking current.
    for p in (qpath, validated, report, ge_report):
        p.unlink(missing_ok=True)

    summary = ValidationSummary(platform, max_failed_share=cfg.max_failed_share, parts=len(parts),
                                paths={"validated": str(validated), "quarantine": str(qpath),
                                       "report": str(report), "ge_result": str(ge_report)})
    ge_results = []
    try:
        with Quarantine(quarantine_dir, f"validate-{platform}") as quarantine, \
                pq.ParquetWriter(tmp, RECORD_SCHEMA, compression="zstd") as writer:
            jobs = ({"parts": group, "duplicates": duplicates, "cfg": cfg}
                    for group, duplicates in plan_batches(parts, cfg.batch_rows))
            for outcome in units(validate_batch, jobs):
                summary.merge(outcome.result)
                ge_results.append(outcome.result.ge_result)
                for entry in outcome.quarantine:
                    quarantine.add(*entry)
                writer.write_table(outcome.passed)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    atomic_write_bytes(report, (json.dumps(summary.to_json(), indent=2, sort_keys=True) + "\n").encode())
    atomic_write_bytes(ge_report, (json.dumps(ge_results, indent=1, default=str) + "\n").encode())
    if summary.passed:
        os.replace(tmp, validated)
    else:
        tmp.unlink(missing_ok=True)
    if track:
        log_to_mlflow(summary, cfg, params, report, ge_report)
    if not summary.passed:
        raise ValidationFailed(summary.describe() + f"\n  quarantined rows: {qpath}\n  report: {report}")
    log.info(summary.describe())
    return summary


def log_to_mlflow(summary: ValidationSummary, cfg: ValidateConfig, params: dict[str, Any],
                  report: Path, ge_report: Path) -> str | None:
    """One MLflow run for this validation (a failed validation is a FAILED run, with its artifacts);
    returns its run id, None when tracking is off."""
    from tcl import tracking

    with tracking.run(params, f"validate-{summary.platform}",
                      {"stage": "validate", "platform": summary.platform,
                       "passed": str(summary.passed).lower()}) as run:
        run.status = "FINISHED" if summary.passed else "FAILED"
        tracking.log_params({"max_failed_share": cfg.max_failed_share, "min_steps": cfg.min_steps,
                             "max_steps": cfg.max_steps, "max_mean_sec": cfg.max_mean_sec,
                             "batch_rows": cfg.batch_rows, "parts": summary.parts})
        metrics = {"rows": summary.rows, "failed_rows": summary.failed_rows,
                   "failed_share": summary.failed_share}
        for name, st in summary.expectations.items():
            key = name.replace(":", "_")
            metrics[f"success.{key}"] = float(st["success"])
            if st["unexpected_count"] is not None:
                metrics[f"unexpected.{key}"] = st["unexpected_count"]
        tracking.log_metrics(metrics)
        tracking.log_artifact(str(report), artifact_path="validation")
        tracking.log_artifact(str(ge_report), artifact_path="validation")
    return run.run_id
