"""Collection throughput: programs/s with the next batch built while this one is timed, or not.

`collect.builder.cpus` decides it (tcl/collect/measure.py, `LocalMeasurer.can_overlap`): builder cores
that include the runner's build a batch and then time it; cores apart from the runner's build batch
k+1 while batch k is timed. This replays the first `--tasks` catalog tasks of `--from` (their saved
pools, `--programs` each) on `--platform` into scratch stores, once per setting and `--rounds` times
alternating (A B A B: drift of the machine hits both), and prints programs/s per setting (mean and
spread over rounds) and the Spearman rank correlation of the latencies the two settings measured for
the same programs (a faster setting must not change the labels). The search stays on
`collect.search_cpus`, as in `make collect`.

    python benchmarks/bench_collect.py [--platform emr-avx2-1c] [--from emr-avx512-1c] [--tasks 4]
                                       [--programs 32] [--rounds 2] [--update-report]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flows import _tvm_first  # noqa: E402,F401  (before MLflow: see flows/_tvm_first.py)
from benchmarks._out import add_out_args, mean_std, out_path, provenance, provenance_line  # noqa: E402
from tcl.collect.catalog import load_tasks_by_key  # noqa: E402
from tcl.collect.collector import replay_task  # noqa: E402
from tcl.collect.measure import make_measurer, pinned_to  # noqa: E402
from tcl.config import load_params  # noqa: E402
from tcl.data.store import RecordStore, atomic_write_bytes  # noqa: E402
from tcl.platforms import get_platform  # noqa: E402

REPORT = "reports/bench_collect.md"


def settings(collect: dict) -> dict[str, dict]:
    """The two builder settings: the params' cores (with the runner's: no overlap) and every search core
    but the runner's (build-ahead)."""
    run = set(collect["runner"].get("cpus") or [])
    others = sorted(set(collect.get("search_cpus") or []) - run)
    if not run or not others:
        raise SystemExit("collect.runner.cpus and collect.search_cpus must name different cores to compare")
    return {"build, then time": {**collect["builder"], "cpus": sorted(run | set(others))},
            "build ahead": {**collect["builder"], "cpus": others}}


def replay(tasks, pools, platform, builder_cfg, runner_cfg, batch_size, root: Path) -> tuple[float, dict]:
    """Seconds to replay every pool (the measurer started before the clock) and {program id: mean latency}."""
    store = RecordStore(root)
    measurer = make_measurer(platform, builder_cfg, runner_cfg)
    start = time.perf_counter()
    for task in tasks:
        replay_task(task, platform, pools[task.key], store, measurer, batch_size, lambda n: None)
    seconds = time.perf_counter() - start
    table = store.read(platform.name, columns=["program_id", "mean_sec"]).to_pydict()
    return seconds, dict(zip(table["program_id"], table["mean_sec"]))


def spearman(a: list[float], b: list[float]) -> float:
    ranks = [np.argsort(np.argsort(x)) for x in (a, b)]
    return float(np.corrcoef(*ranks)[0, 1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platform", default="emr-avx2-1c", help="where the programs are timed (this host's)")
    ap.add_argument("--from", dest="source", default="emr-avx512-1c", help="the store partition whose catalog "
                    "and workloads give the tasks")
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--programs", type=int, default=32, help="programs of each task's pool")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--params", default="params.yaml")
    add_out_args(ap, REPORT)
    args = ap.parse_args()

    params = load_params(args.params)
    collect = params["collect"]
    platform = get_platform(params, args.platform)
    records = RecordStore("data/records")
    by_key = load_tasks_by_key(records, args.source)
    order = sorted(records.tasks(args.source), key=lambda r: r.get("order", 0))
    tasks, pools = [], {}
    for row in order:
        pool = records.pool(row["task_key"]) or []
        if len(pool) >= args.programs and row["task_key"] in by_key:
            tasks.append(by_key[row["task_key"]])
            pools[row["task_key"]] = pool[:args.programs]
        if len(tasks) == args.tasks:
            break
    configs = settings(collect)
    rates: dict[str, list[float]] = {name: [] for name in configs}
    latency: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp, pinned_to(tuple(collect.get("search_cpus") or ())):
        for r in range(args.rounds):
            for i, (name, builder_cfg) in enumerate(configs.items()):
                secs, lat = replay(tasks, pools, platform, builder_cfg, collect["runner"],
                                   int(collect["batch_size"]), Path(tmp) / f"round{r}-setting{i}")
                rates[name].append(len(lat) / secs)
                latency.setdefault(name, lat)
                print(f"round {r + 1}: {name} (builder cores {builder_cfg['cpus']}): {len(lat)} programs in "
                      f"{secs:.1f} s = {len(lat) / secs:.2f} programs/s", flush=True)
    a, b = latency.values()
    both = [p for p in a if p in b and a[p] is not None and b[p] is not None]
    n = sum(len(p) for p in pools.values())
    rows = {name: {"programs_per_s": r, "builder_cpus": configs[name]["cpus"]} for name, r in rates.items()}
    report = {**provenance(__file__), "platform": platform.name, "tasks": [t.network + ":" + t.name for t in tasks],
              "programs": n, "runner_cpus": collect["runner"].get("cpus"), "settings": rows,
              "spearman_latency": spearman([a[p] for p in both], [b[p] for p in both]), "paired_programs": len(both)}
    lines = ["| setting | builder cores | programs/s (mean +- std over rounds) | per round |", "|---|---|---|---|"]
    for name, row in rows.items():
        mean, std = mean_std(row["programs_per_s"])
        lines.append(f"| {name} | {row['builder_cpus']} | {mean:.2f} +- {std:.2f} "
                     f"| {', '.join(f'{x:.2f}' for x in row['programs_per_s'])} |")
    md = "\n".join([f"# Collection throughput on {platform.name}", "", *lines, "",
                    f"- {n} programs ({args.programs} of each of {len(tasks)} tasks: {', '.join(report['tasks'])}), "
                    f"timed on cores {report['runner_cpus']}, {args.rounds} rounds alternating the settings.",
                    f"- Spearman of the two settings' latencies over {len(both)} programs: "
                    f"{report['spearman_latency']:.4f}.", f"- {provenance_line(report)}", ""])
    print(md)
    out = out_path(args, REPORT)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, md.encode())
    atomic_write_bytes(out.with_suffix(".json"), json.dumps(report, indent=1).encode())


if __name__ == "__main__":
    main()
