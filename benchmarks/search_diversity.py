"""How widely each tuning run of bench_tune.py measured its tasks' design spaces (tcl.tvm.diversity).

Reads the MetaSchedule databases bench_tune.py keeps under <out>/<network>/seed<k>/<run>/<platform>/ and
prints, per run directory, the mean over tasks of the sketches and of the share of differing decisions
among each task's first `--first` measured programs, with the spread over seeds; tasks with fewer measured
programs are left out. One MLflow run (stage=search_diversity) logs the report.

    python benchmarks/search_diversity.py --root reports/bench_tune_zen5 --networks resnet50 bert_base \\
        --seeds 0 1 --runs xgb pretrained_xgb+boost pretrained_xgb+boost+draft-psa9a0fb0 [--update-report]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._out import add_out_args, mean_std, out_path, provenance, provenance_line, write_report  # noqa: E402

REPORT = "reports/search_diversity"


def run_programs(run_dir: Path, platform: str) -> dict[str, list[str]] | None:
    """Each task's measured programs in the order the run measured them (failed builds and unreadable lines
    left out); None for a run whose database was not kept (runs before bench_tune kept them)."""
    from tcl.data.ms_database import read_ms_database_table

    databases = [p.parent for p in (run_dir / platform).glob("*/database_tuning_record.json")]
    if not databases:
        return None
    if len(databases) > 1:
        raise ValueError(f"{run_dir / platform}: expected one tuning database, found {len(databases)}")
    table = read_ms_database_table(databases[0], platform=platform)
    programs: dict[str, list[str]] = defaultdict(list)
    for key, program, error in zip(*(table.column(c).to_pylist() for c in ("task_key", "program", "error_code"))):
        if not error:
            programs[key].append(program)
    return programs


def measure(root: Path, networks, seeds, runs, platform: str, first: int) -> dict:
    from tcl.tvm.diversity import task_diversity

    rows = []
    for network in networks:
        for run in runs:
            per_seed = []
            for seed in seeds:
                run_dir = root / network / f"seed{seed}" / run
                programs = run_programs(run_dir, platform)
                if programs is None:
                    continue
                figures = [task_diversity(p[:first]) for p in programs.values() if len(p) >= first]
                if not figures:  # a run still in its first rounds: no task measured `first` programs yet
                    continue
                per_seed.append((seed, len(figures), float(np.mean([s for s, _ in figures])),
                                 float(np.nanmean([d for _, d in figures]))))
            if per_seed:
                row = {"network": network, "run": run, "seeds": [p[0] for p in per_seed],
                       "tasks": [p[1] for p in per_seed]}
                for column, key in ((2, "sketches"), (3, "differing")):
                    values = [p[column] for p in per_seed]
                    mean, std = mean_std(values)
                    row.update({key: values, f"{key}_mean": mean, f"{key}_std": std})
                rows.append(row)
    return {"platform": platform, "first": first, "rows": rows}


def render(report: dict) -> str:
    lines = [f"Each task's first {report['first']} measured programs on {report['platform']}; mean over tasks, "
             "then mean +- sample std over seeds.", "",
             "| network | run | seeds | tasks | sketches per task | differing decisions (same sketch) |",
             "|---|---|---|---|---|---|"]
    for r in report["rows"]:
        lines.append(f"| {r['network']} | {r['run']} | {len(r['seeds'])} | {r['tasks'][0]} | "
                     f"{r['sketches_mean']:.2f} +- {r['sketches_std']:.2f} | "
                     f"{r['differing_mean']:.3f} +- {r['differing_std']:.3f} |")
    return "\n".join(lines + ["", provenance_line(report)]) + "\n"


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["rows"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.45 * len(rows) + 1.5), sharey=True)
    labels = [f"{r['network']}: {r['run']}" for r in rows]
    for ax, key, title in ((axes[0], "sketches", "sketches per task"), (axes[1], "differing", "differing decisions")):
        ax.barh(labels, [r[f"{key}_mean"] for r in rows], xerr=[r[f"{key}_std"] for r in rows], color="tab:blue")
        ax.set_xlabel(title)
    axes[0].invert_yaxis()
    fig.suptitle(f"What each run measured: the first {report['first']} programs of each task")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=Path("reports/bench_tune_zen5"), help="bench_tune.py's --out")
    ap.add_argument("--platform", default="host-avx512-1c")
    ap.add_argument("--networks", nargs="+", required=True)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--runs", nargs="+", required=True, help="run directories under <network>/seed<k>/")
    ap.add_argument("--first", type=int, default=24, help="programs per task read (tasks with fewer: left out)")
    add_out_args(ap, REPORT)
    args = ap.parse_args(argv)

    from tcl import tracking
    from tcl.config import load_params

    report = measure(args.root, args.networks, args.seeds, args.runs, args.platform, args.first)
    if not report["rows"]:
        raise SystemExit(f"{args.root}: none of the runs {args.runs} is there for {args.networks}, seeds {args.seeds}")
    report.update(provenance(__file__, argv))
    md = render(report)
    print(md)
    base = out_path(args, REPORT)
    base.mkdir(parents=True, exist_ok=True)
    with tracking.run(load_params(), "search-diversity", {"stage": "search_diversity"}):
        write_report(base / "summary", report, "Search diversity of tuning runs", md, plot, tracking)


if __name__ == "__main__":
    main()
