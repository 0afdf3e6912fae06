"""Measure where you are: grow the knowledge base on this machine's platforms, keeping the work.

`make collect` (and the `grow/<platform>` Prefect deployment) runs `grow`: it finds the
platforms whose `host` is this CPU (host.py; a new CPU stops with the entries to declare),
then measures what the store lacks for them, the whole catalog of `collect` (tier 1 too),
exactly as the collect stage would, restricted to those platforms. Measurements stay on
`collect.runner.cpus` (one core), the search on `search_cpus`.

Every `every_min` minutes, at the end of a task (when the store holds only whole, compacted
files and the collector holds its lock), a checkpoint keeps the work beyond this machine:

    dvc commit -f collect      # data/records into the DVC cache, dvc.lock updated
    dvc push collect           # to the default remote (dvc-store/ in this repository)
    prune the remote           # of earlier versions, when it is in the repository (tcl.data.footprint)
    git commit -- dvc.lock <remote dir>   # when the remote lives in the repository

so a machine that goes away mid-collection loses at most the last ~20 minutes. A checkpoint
that fails (a remote not reachable, git busy) is logged and retried at the next one: the
measurements are in the store either way, and the next run resumes from it.
"""

from __future__ import annotations

import configparser
import logging
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..data.footprint import prune_remote
from ..data.store import RecordStore
from .collector import CollectSummary, collect_pools, measure_task
from .host import require_host_platforms

log = logging.getLogger(__name__)


def remote_dir_in_repo(repo: Path) -> Path | None:
    """The default DVC remote's directory when it lies inside `repo` (then git keeps it), else None."""
    cfg = configparser.ConfigParser()
    cfg.read([repo / ".dvc" / "config", repo / ".dvc" / "config.local"])
    name = cfg.get("core", "remote", fallback=None)
    # DVC writes the section as ['remote "name"'], quotes included; older configs without them
    sections = [s for s in (f"'remote \"{name}\"'", f"remote \"{name}\"") if cfg.has_section(s)]
    if not name or not sections:
        return None
    url = cfg.get(sections[0], "url", fallback="")
    if "://" in url:
        return None
    path = (repo / ".dvc" / url).resolve()
    try:
        path.relative_to(repo.resolve())
    except ValueError:
        return None
    return path


@dataclass
class Checkpointer:
    """Commits and pushes the collect stage's output every `every_s` seconds (called between tasks)."""

    repo: Path
    every_s: float = 20 * 60
    push: bool = True
    git: bool = True
    stage: str = "collect"
    clock: Callable[[], float] = time.monotonic
    git_retries: int = 10
    last: float = field(default=0.0)
    done: list[str] = field(default_factory=list)  # the checkpoints' git commit messages

    def __post_init__(self) -> None:
        self.last = self.clock()

    def __call__(self, tasks_done: int, tasks_total: int) -> None:
        if self.clock() - self.last >= self.every_s:
            self.checkpoint(f"{tasks_done}/{tasks_total} catalog tasks done")

    def _run(self, *cmd: str) -> bool:
        res = subprocess.run(cmd, cwd=self.repo, capture_output=True, text=True)
        if res.returncode:
            log.warning("checkpoint: `%s` failed (%d): %s", " ".join(cmd), res.returncode,
                        (res.stderr or res.stdout).strip()[-500:])
        return res.returncode == 0

    def checkpoint(self, note: str) -> bool:
        """One checkpoint; True when everything it was asked to do succeeded."""
        self.last = self.clock()
        ok = self._run("dvc", "commit", "-f", "-q", self.stage)
        if ok and self.push:
            ok = self._run("dvc", "push", "-q", self.stage)
            remote = remote_dir_in_repo(self.repo)
            if ok and remote is not None:
                try:  # earlier versions leave the working tree (git history keeps them)
                    prune_remote(self.repo / "dvc.lock", remote)
                except RuntimeError as err:
                    log.warning("checkpoint: the remote is not pruned: %s", err)
        if ok and self.git:
            ok = self._git_commit(f"collect checkpoint: {note}")
        steps = ["dvc commit"] + (["dvc push"] if self.push else []) + (["git commit"] if self.git else [])
        if ok:
            log.info("collect checkpoint: %s (%s)", note, ", ".join(steps))
        else:
            log.warning("collect checkpoint: %s failed; the next one tries again (the store keeps the records)", note)
        return ok

    def _git_commit(self, message: str) -> bool:
        paths = ["dvc.lock"]
        remote = remote_dir_in_repo(self.repo)
        if remote is not None and self.push:
            paths.append(str(remote.relative_to(self.repo.resolve())))
        for attempt in range(self.git_retries):
            if (self.repo / ".git" / "index.lock").exists():  # another git command (a colleague's) is running
                time.sleep(min(2 ** attempt, 30))
                continue
            if not self._run("git", "add", "--", *paths):
                continue
            if not subprocess.run(["git", "diff", "--cached", "--quiet", "--", *paths], cwd=self.repo).returncode:
                return True  # nothing new since the last checkpoint
            if self._run("git", "commit", "-q", "-m", message, "--", *paths):
                self.done.append(message)
                return True
        return False


# The params the collect stage depends on (dvc.yaml): a checkpoint's dvc.lock records them.
STAGE_PARAMS = ("seed", "collect", "workloads", "platforms")


def uncommitted_params(repo: Path, params_path: str | Path) -> list[str]:
    """The collect stage's params sections that differ between `params_path` and git's HEAD.

    A checkpoint commits dvc.lock with the params it ran with; if params.yaml is not committed
    too, a clone would find the lock out of date and `dvc repro` would run collect again."""
    import yaml

    rel = Path(params_path).resolve().relative_to(repo.resolve()).as_posix()
    res = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=repo, capture_output=True, text=True)
    head = yaml.safe_load(res.stdout) if res.returncode == 0 else {}
    now = yaml.safe_load(Path(params_path).read_text()) or {}
    return [k for k in STAGE_PARAMS if (head or {}).get(k) != now.get(k)]


def grow(params: dict[str, Any], store_root: str | Path = "data/records", *, repo: str | Path = ".",
         every_min: float = 20.0, push: bool = True, git: bool = True, progress: bool = True,
         measure: Callable[..., tuple[int, int]] = measure_task, only: str | None = None,
         params_path: str | Path | None = None, platforms: list[str] | None = None) -> list[CollectSummary]:
    """Measure what the knowledge base lacks on this machine's platforms, checkpointing as it goes.

    `only`, a platform name, must be one of this machine's (a deployment pinned to a host's pool
    fails at once on a worker of another machine); all of this machine's platforms are measured,
    or just `platforms` (this machine's too) when the time is short and one ISA matters most: the
    pools are drawn on `collect.source` all the same.
    With git checkpoints and `params_path`, the collect stage's params must be committed first."""
    if git and params_path is not None:
        changed = uncommitted_params(Path(repo), params_path)
        if changed:
            raise RuntimeError(f"{params_path}: sections {changed} differ from the last commit; commit them first "
                               f"(git commit -m '...' -- {params_path}), so that every checkpoint's dvc.lock "
                               "matches a committed params file, or run with --no-git")
    here = require_host_platforms(params)
    if only is not None and only not in here:
        raise RuntimeError(f"platform '{only}' is not measured on this machine (its platforms: {here})")
    if platforms:
        foreign = [p for p in platforms if p not in here]
        if foreign:
            raise RuntimeError(f"platforms {foreign} are not measured on this machine (its platforms: {here})")
        here = [p for p in here if p in platforms]
    local = {**params, "collect": {**params["collect"], "platforms": here}}
    log.info("this machine measures %s", here)
    ckpt = Checkpointer(Path(repo), every_s=every_min * 60, push=push, git=git) if (git or push) else None
    summaries = collect_pools(local, RecordStore(store_root), progress, measure=measure, on_task_done=ckpt)
    if ckpt is not None:
        ckpt.checkpoint("collection finished" if summaries else "nothing to measure")
    return summaries
