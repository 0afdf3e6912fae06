"""What the knowledge base costs the repository: the dataset card's "Repository" figures.

The DVC remote lives in the repository (`dvc-store/`, git is the only storage these machines
keep), so every pushed version of every DVC output stays in git history for good. These
figures say where the bytes are and how they grow:

* `remote_by_output`: bytes of the remote by the DVC output that references them in dvc.lock
  (raw records, retests, ... and the derived artifacts), and what no current output references
  (earlier versions, kept by git anyway);
* `bytes_per_10k_programs`: what 10,000 more measured programs add, from the store itself:
  the compacted record parts (per platform measured) and the pools (once per program drawn,
  shared by every platform);
* `git`: the packed repository, and a real `git clone --no-local` of it (seconds, bytes on disk).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml

from .store import RecordStore

# Outputs that are measurements (never recomputable without the machine): always pushed.
RAW_OUTPUTS = ("data/records", "data/retest", "data/tenset", "data/tuning")
UNREFERENCED = "(not in dvc.lock: earlier versions)"


def _object(remote: Path, md5: str) -> Path:
    return remote / "files" / "md5" / md5[:2] / md5[2:]


def _listing(repo: Path, remote: Path, md5: str) -> Path | None:
    """A directory output's file list: the remote's, or the local cache's when the card runs before
    `dvc push` (then the files already pushed from the previous version still belong to this output)."""
    return next((f for f in (_object(remote, md5), _object(repo / ".dvc" / "cache", md5)) if f.is_file()), None)


def object_owners(lock_path: str | Path, remote_dir: str | Path) -> dict[str, str]:
    """Remote object key (md5 without the '/') -> the output of dvc.lock or a .dvc file that references it."""
    remote = Path(remote_dir)
    lock = yaml.safe_load(Path(lock_path).read_text()) if Path(lock_path).exists() else {}
    outs = [o for stage in ((lock or {}).get("stages") or {}).values() for o in stage.get("outs") or []]
    repo = Path(lock_path).parent
    for dvc_file in _dvc_files(repo):   # outputs added with `dvc add`: paths relative to the .dvc file
        for o in (yaml.safe_load(dvc_file.read_text()) or {}).get("outs") or []:
            outs.append({**o, "path": (dvc_file.parent.relative_to(repo) / str(o.get("path", ""))).as_posix()})
    owner: dict[str, str] = {}
    for out in outs:
        md5, path = out.get("md5"), out.get("path")
        if not md5 or not path:
            continue
        path = _group(path)
        owner.setdefault(md5, path)
        listing = _listing(repo, remote, md5)
        if md5.endswith(".dir") and listing is not None:
            for entry in json.loads(listing.read_text()):
                owner.setdefault(entry["md5"], path)
    return owner


def _remote_objects(remote: Path):
    return (f for f in (remote / "files" / "md5").rglob("*") if f.is_file())


def remote_by_output(lock_path: str | Path, remote_dir: str | Path) -> dict[str, int]:
    """Bytes of the DVC remote per output path of dvc.lock (a file shared by two outputs counts once)."""
    remote = Path(remote_dir)
    if not remote.is_dir():
        return {}
    owner = object_owners(lock_path, remote)
    sizes: dict[str, int] = {}
    for f in _remote_objects(remote):
        key = owner.get(f.parent.name + f.name, UNREFERENCED)
        sizes[key] = sizes.get(key, 0) + f.stat().st_size
    return dict(sorted(sizes.items(), key=lambda kv: -kv[1]))


def prune_remote(lock_path: str | Path, remote_dir: str | Path) -> tuple[int, int]:
    """Delete the remote's objects that neither dvc.lock nor a .dvc file references; (files, bytes) removed.

    The remote is a folder of this repository: an earlier version stays in git history with the commit
    whose dvc.lock names it (checking that commit out brings its objects back for `dvc pull`), so
    keeping it in the working tree only makes every fresh clone check it out again."""
    remote = Path(remote_dir)
    if not remote.is_dir():
        return 0, 0
    owner = object_owners(lock_path, remote)
    unlisted = [k for k in owner if k.endswith(".dir") and _listing(Path(lock_path).parent, remote, k) is None]
    if unlisted:  # its files would look unreferenced: nothing is removed
        raise RuntimeError(f"{remote}: the file lists of {', '.join(owner[k] for k in unlisted)} ({', '.join(unlisted)}) "
                           "are neither in the remote nor in the local cache: `dvc push` them first")
    files = size = 0
    for f in list(_remote_objects(remote)):
        if f.parent.name + f.name not in owner:
            size += f.stat().st_size
            f.unlink()
            files += 1
    return files, size


def _group(path: str) -> str:
    """One row per family of outputs: `data/validated/platform=x.parquet` -> `data/validated`."""
    for prefix in ("data/validated/", "data/quarantine/", "data/samples/", "models/"):
        if path.startswith(prefix) and path != "models/transfer":
            return prefix.rstrip("/")
    return path


def _dvc_files(repo: Path) -> list[Path]:
    """Every .dvc file of the working tree, committed or not: a `dvc add` pushed before its commit keeps its objects."""
    res = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.dvc"], cwd=repo,
                         capture_output=True, text=True)
    return [repo / line for line in res.stdout.splitlines() if line] if res.returncode == 0 else []


def bytes_per_10k_programs(records_root: str | Path) -> dict[str, float]:
    """Bytes 10,000 programs add: record parts per platform that measures them, and their pool."""
    store = RecordStore(records_root)
    part_bytes = part_rows = 0
    for platform in store.platforms():
        parts = store.parts(platform)
        part_bytes += sum(p.stat().st_size for p in parts)
        part_rows += sum(pq.ParquetFile(p).metadata.num_rows for p in parts)
    pools = sorted((Path(records_root) / "_pools").glob("*.parquet"))
    pool_bytes = sum(p.stat().st_size for p in pools)
    pool_rows = sum(pq.ParquetFile(p).metadata.num_rows for p in pools)
    return {"records_per_platform": round(1e4 * part_bytes / part_rows) if part_rows else 0,
            "pool": round(1e4 * pool_bytes / pool_rows) if pool_rows else 0}


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def git_figures(repo: str | Path) -> dict[str, Any]:
    """The packed repository's size and a real clone of its HEAD ({} outside a git repository)."""
    repo = Path(repo).resolve()
    res = subprocess.run(["git", "count-objects", "-v"], cwd=repo, capture_output=True, text=True)
    if res.returncode:
        return {}
    counts = dict(line.split(": ", 1) for line in res.stdout.splitlines() if ": " in line)
    out: dict[str, Any] = {"pack_bytes": 1024 * (int(counts.get("size-pack", 0)) + int(counts.get("size", 0)))}
    tmp = Path(tempfile.mkdtemp(prefix="tcl-clone-"))
    try:
        start = time.perf_counter()
        cloned = subprocess.run(["git", "clone", "-q", "--no-local", str(repo), str(tmp / "c")],
                                capture_output=True, text=True)
        if cloned.returncode == 0:
            out["clone_seconds"] = round(time.perf_counter() - start, 2)
            out["clone_bytes"] = _dir_bytes(tmp / "c")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def footprint(records_root: str | Path, lock_path: str | Path, remote_dir: str | Path | None,
              repo: str | Path | None) -> dict[str, Any]:
    by_output = remote_by_output(lock_path, remote_dir) if remote_dir else {}
    raw = sum(v for k, v in by_output.items() if k.startswith(RAW_OUTPUTS))
    return {"remote_by_output": by_output, "remote_raw_bytes": raw,
            "remote_derived_bytes": sum(v for k, v in by_output.items()
                                        if not k.startswith(RAW_OUTPUTS) and k != UNREFERENCED),
            "bytes_per_10k_programs": bytes_per_10k_programs(records_root),
            "git": git_figures(repo) if repo else {}}


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Remove earlier versions from the in-repository DVC remote "
                                             "(after `dvc push`; git history keeps them).")
    ap.add_argument("--lock", default="dvc.lock")
    ap.add_argument("--remote", default="dvc-store")
    args = ap.parse_args()
    n, b = prune_remote(args.lock, args.remote)
    print(f"{args.remote}: removed {n} objects no output references ({b / 1e6:.1f} MB)")
