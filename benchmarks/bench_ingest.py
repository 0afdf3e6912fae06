"""Ingest throughput and memory on a realistic, large Ansor log directory.

Tenset ships ~52M Ansor records; ingestion must stream them in bounded memory.
No such data set is on this machine, so this script MAKES one from the real
records of TVM's example log `resnet-50-NHWC-B1-llvm.json` (26 measured programs
of 26 ResNet-50 tasks, AVX2 CPU):

* one file per task (as Tenset's `measure_records/<platform>/`), records dealt out
  round-robin over the 26 tasks;
* each record is a real line with its schedule resampled: every `SP` (split)
  step gets new tile lengths with the SAME product (the product's prime factors
  are redistributed at random over the tile levels, or the lengths are permuted),
  so every split stays valid for its loop; `auto_unroll_max_step` pragmas are
  redrawn from {0, 16, 64, 512}; the other steps (and the follow-splits that refer
  to the splits) are kept as they are;
* costs are the real ones times one lognormal factor (sigma 0.5) per record with
  per-repeat noise (sigma 0.05); ~2% of records are failed measurements
  (error_no 4 with Ansor's 1e10 cost), as real logs have; timestamps count up.

Then it ingests the directory with `tcl.data.ingest.ingest_ansor_dir` (no
progress bar) and prints records/s, MB/s and the peak RSS of the process
(`resource.getrusage`; `--tracemalloc` adds the Python-heap peak, ~2x slower).

`--runner` picks where the files are ingested (tcl.compute): `serial` in this process,
`dask` one Prefect task per file on a LocalCluster of `--workers` processes
(prefect-dask's DaskTaskRunner; the wall time includes starting and stopping the
cluster, not Prefect's API server, which a flow has running already), `both` one after
the other into separate stores, then checks that they hold the same bytes. The peak
RSS is this process's (the Dask workers are processes of their own).

    python benchmarks/bench_ingest.py [--records 1000000] [--chunk-size 10000] [--keep DIR]
                                      [--runner serial|dask|both] [--workers 2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "ansor" / "resnet-50-NHWC-B1-llvm.json"
UNROLL = (0, 16, 64, 512)


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def resample_split(lengths: list, rng: random.Random) -> list:
    """New tile lengths with the same product (so the split stays valid)."""
    if not lengths or any(not isinstance(x, int) or x < 1 for x in lengths):
        return lengths
    if rng.random() < 0.3:
        return rng.sample(lengths, len(lengths))
    new = [1] * len(lengths)
    for p in _prime_factors(_product(lengths)):
        new[rng.randrange(len(new))] *= p
    return new


def _product(xs: list[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def mutate(record: dict, rng: random.Random, timestamp: int) -> dict:
    """A resampled copy of one real Ansor record (see the module docstring)."""
    steps = []
    for step in record["i"][1][1]:
        if step[0] == "SP":
            step = [*step[:4], resample_split(step[4], rng), step[5]]
        elif step[0] == "PR" and step[3].startswith("auto_unroll_max_step$"):
            step = [*step[:3], f"auto_unroll_max_step${rng.choice(UNROLL)}"]
        steps.append(step)
    costs, error_no, all_cost, _ = record["r"]
    if rng.random() < 0.02:
        costs, error_no = [1e10] * len(costs), 4
    else:
        scale = rng.lognormvariate(0.0, 0.5)
        costs = [c * scale * rng.lognormvariate(0.0, 0.05) for c in costs]
        error_no = 0
    return {"i": [record["i"][0], [record["i"][1][0], steps]],
            "r": [costs, error_no, all_cost, timestamp], "v": record.get("v", "v0.6")}


def generate(out_dir: Path, n_records: int, seed: int, fixture: Path = FIXTURE) -> int:
    """Write `n_records` resampled records, one file per task; returns bytes written."""
    records = [json.loads(ln) for ln in fixture.read_text().splitlines() if ln.startswith("{")]
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    handles = [open(out_dir / f"task-{i:03d}.json", "w") for i in range(len(records))]
    written = 0
    try:
        for k in range(n_records):
            i = k % len(records)
            line = json.dumps(mutate(records[i], rng, 1_606_960_872 + k)) + "\n"
            handles[i].write(line)
            written += len(line)
    finally:
        for h in handles:
            h.close()
    return written


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def ingest(work: Path, runner: str, workers: int, chunk_size: int, size: int) -> dict[str, str]:
    """Ingest work/logs into work/<runner>/ and print the figures; returns the sha1 of every output file."""
    from tcl.compute import ComputeSettings, run_units
    from tcl.data.ingest import ingest_ansor_dir

    out = work / runner
    settings = ComputeSettings(runner=runner, workers=workers, threads_per_worker=1)
    t0 = time.perf_counter()
    summary = run_units(settings, "bench-ingest", lambda units: ingest_ansor_dir(
        work / "logs", platform="bench-cpu", store_root=out / "store", quarantine_dir=out / "quarantine",
        chunk_size=chunk_size, progress=False, units=units))
    dt = time.perf_counter() - t0
    store_mb = sum(p.stat().st_size for p in (out / "store").rglob("*.parquet")) / 1e6
    how = "serial" if runner == "serial" else f"dask, {workers} worker processes"
    print(f"[{how}] ingested {summary.records_now:,} records in {dt:.1f} s: "
          f"{summary.records_now / dt:,.0f} records/s, {size / 1e6 / dt:,.1f} MB/s; "
          f"{summary.quarantined_now} quarantined; parquet {store_mb:,.0f} MB")
    return {str(p.relative_to(out)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file() and p.name != ".writer.lock"}


def warm_prefect() -> None:
    """Start Prefect's ephemeral API before timing (a stage's flow has it running already)."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # as flows/_env.py: closed network
    from prefect import flow

    flow(name="bench-warm-up")(lambda: None)()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--chunk-size", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=Path, default=None, help="work in this directory and keep it")
    ap.add_argument("--tracemalloc", action="store_true")
    ap.add_argument("--runner", choices=("serial", "dask", "both"), default="serial")
    ap.add_argument("--workers", type=int, default=2, help="dask: worker processes of the local cluster")
    args = ap.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench_ingest_"))
    try:
        t0 = time.perf_counter()
        size = generate(work / "logs", args.records, args.seed)
        print(f"generated {args.records:,} records ({size / 1e6:,.0f} MB, 26 files) "
              f"in {time.perf_counter() - t0:.1f} s; peak RSS so far {rss_mb():,.0f} MB")
        if args.tracemalloc:
            import tracemalloc
            tracemalloc.start()
        runners = ("serial", "dask") if args.runner == "both" else (args.runner,)
        if "dask" in runners:
            warm_prefect()
        outputs = {r: ingest(work, r, args.workers, args.chunk_size, size) for r in runners}
        print(f"peak RSS {rss_mb():,.0f} MB (chunk size {args.chunk_size:,})")
        if len(outputs) == 2:
            same = outputs["serial"] == outputs["dask"]
            print(f"serial and dask outputs: {len(outputs['serial'])} files, "
                  + ("byte-identical" if same else "DIFFERENT"))
            if not same:
                raise SystemExit(1)
        if args.tracemalloc:
            print(f"tracemalloc peak {tracemalloc.get_traced_memory()[1] / 2**20:,.0f} MiB")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
