"""What the tokenizer makes of the collected data: a worked example, the length/width
distributions the crop sizes are chosen from, and the duplicate rate (distinct
programs whose cropped feature matrices collide; TLP reports 1.4% on Tenset).

    python benchmarks/feature_report.py --platform host-avx512-2c
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tcl.features.tokenizer import Tokenizer, sequence_stats  # noqa: E402


def duplicate_rate(x: np.ndarray, programs: list[str]) -> tuple[float, int]:
    """Share of distinct programs whose feature matrix equals another distinct program's."""
    first_of: dict[bytes, str] = {}
    colliding = set()
    for matrix, program in zip(x, programs):
        key = matrix.tobytes()
        other = first_of.setdefault(key, program)
        if other != program:
            colliding.update((other, program))
    distinct = len(set(programs))
    return len(colliding) / distinct if distinct else 0.0, distinct


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", default="host-avx512-2c")
    ap.add_argument("--example", type=int, default=0, help="row of the validated table to show")
    args = ap.parse_args()
    table = pq.read_table(f"data/validated/platform={args.platform}.parquet")
    tokenizer = Tokenizer.load("data/features/tokenizer.json")
    steps = table.column("steps").to_pylist()
    stats = sequence_stats(steps)
    print(f"{stats['programs']} programs on {args.platform}")
    print("primitives per program:", {k: round(v, 1) for k, v in stats["length"].items()})
    print("args per primitive:    ", {k: round(v, 1) for k, v in stats["width"].items()})
    rows, cols = tokenizer.feature_shape
    print(f"crop: {rows - 1} primitive rows + 1 hardware row, {cols} columns "
          f"({tokenizer.kind_width} kind columns + {tokenizer.arg_width} argument columns)")
    lengths = np.array([len(s) for s in steps])
    print(f"programs longer than {rows - 1} primitives (cropped): {np.mean(lengths > rows - 1):.1%}")

    from tcl.config import load_params
    from tcl.platforms import get_platform

    spec = get_platform(load_params(), args.platform).spec_vector
    x = tokenizer.transform(steps, [spec])
    rate, distinct = duplicate_rate(x, table.column("program").to_pylist())
    print(f"duplicate rate: {rate:.2%} of {distinct} distinct programs share their cropped features with another")

    row = table.slice(args.example, 1).to_pylist()[0]
    print(f"\nworked example: {row['network']} / {row['task_name']} ({row['op_type']}), "
          f"mean {row['mean_sec'] * 1e6:.1f} us")
    print("trace JSON (first 600 chars):", row["program"][:600])
    print("primitives (kind, nums, strs):")
    for i, st in enumerate(row["steps"][:rows - 1]):
        print(f"  {i:2d} {st['kind']:<20} {st['nums']} {st['strs']}")
    np.set_printoptions(precision=2, suppress=True, linewidth=200)
    print(f"feature matrix {x.shape[1]}x{x.shape[2]} (row 0 = hardware row):")
    print(x[args.example])


if __name__ == "__main__":
    main()
