"""Active mode: on a platform with no data, measure only what the sampler picks, round by round.

The candidate pool is the saved, unmeasured program pools of the chosen tasks (drawn
once by the collector on the source platform), tokenized with the shared tokenizer
and the new platform's hardware row. Each round the cost model is retrained on what
has been measured so far and the sampler picks the next programs, which the
collector's replay measures into the active store. A crashed run resumes: programs
already in the store are read back, not measured again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..collect.catalog import load_tasks_by_key
from ..collect.collector import replay_task
from ..data.metaschedule import trace_to_steps
from ..data.schema import make_program_id
from ..data.store import RecordStore
from ..features.tokenizer import Tokenizer
from ..platforms import Platform
from .rounds import RoundLog, SampleRun, sample_rounds
from .scorer import ModelScorer
from .settings import SamplingSettings


@dataclass
class CandidatePool:
    """Unmeasured programs of several tasks, flat: row i is program `texts[i]` of task `task_key[i]`."""

    texts: list[str]
    task_key: np.ndarray
    op_type: np.ndarray
    program_id: np.ndarray
    x: np.ndarray

    @property
    def group(self) -> np.ndarray:
        return np.unique(self.task_key, return_inverse=True)[1]


def candidate_pool(store: RecordStore, tasks: dict[str, Any], tokenizer: Tokenizer, spec: list[float]) -> CandidatePool:
    """The saved pools of `tasks` (task_key -> Task), tokenized for the target platform."""
    texts, keys, ops = [], [], []
    for key, task in tasks.items():
        pool = store.pool(key)
        if pool is None:
            raise FileNotFoundError(f"{store.root}/_pools/{key}.parquet is missing: no pool was drawn for "
                                    f"task {task.name} (run the collect stage, or dvc pull)")
        texts += pool
        keys += [key] * len(pool)
        ops += [task.op_type] * len(pool)
    x = tokenizer.transform([trace_to_steps(json.loads(t)) for t in texts], spec)
    return CandidatePool(texts=texts, task_key=np.asarray(keys, dtype=str), op_type=np.asarray(ops, dtype=str),
                         program_id=np.asarray([make_program_id(k, t) for k, t in zip(keys, texts)], dtype=str),
                         x=x)


def measured_labels(active: RecordStore, platform: str, pool: CandidatePool) -> tuple[np.ndarray, np.ndarray]:
    """(measured?, 1 / mean latency or 0 for a failure) per pool row, from the active store."""
    table = active.read(platform, columns=["program_id", "mean_sec", "error_code"])
    speed = {pid: (1.0 / m if not err and m else 0.0) for pid, m, err in
             zip(*(table.column(c).to_pylist() for c in ("program_id", "mean_sec", "error_code")))}
    measured = np.asarray([pid in speed for pid in pool.program_id])
    return measured, np.asarray([speed.get(pid, 0.0) for pid in pool.program_id])


def sample_active(platform: Platform, params: dict[str, Any], settings: SamplingSettings, seed: int,
                  records: RecordStore, active: RecordStore, task_keys: list[str], tokenizer: Tokenizer,
                  measurer, on_progress: Callable[[int], None],
                  on_round: Callable[[RoundLog], None] | None = None) -> tuple[SampleRun, CandidatePool, np.ndarray]:
    """Run the rounds on `platform`, measuring each round's picks; returns the run, the pool and its labels."""
    source = params["collect"]["source"]
    known = load_tasks_by_key(records, source)
    missing = [k for k in task_keys if k not in known]
    if missing:
        raise KeyError(f"tasks {missing[:3]} are not in {records.root}/platform={source}/_tasks.jsonl")
    tasks = {k: known[k] for k in task_keys}
    pool = candidate_pool(records, tasks, tokenizer, platform.spec_vector)
    _, labels = measured_labels(active, platform.name, pool)  # the scorer reads this array as it fills
    batch = int(params["collect"].get("batch_size", 16))

    def measure(picks: np.ndarray) -> None:
        for key in np.unique(pool.task_key[picks]):
            rows = picks[pool.task_key[picks] == key]
            active.save_workload(platform.name, key, _workload_json(tasks[key]))
            replay_task(tasks[key], platform, [pool.texts[i] for i in rows], active, measurer, batch, on_progress)
        labels[:] = measured_labels(active, platform.name, pool)[1]

    scorer = ModelScorer(pool.x, labels, pool.group, settings.model, settings.train_config(params, seed),
                         settings.hparams(params), settings.ensemble)
    with active.exclusive_writer(f"active sampling of {platform.name}"):
        run = sample_rounds(settings.sampler(seed), pool.op_type, pool.task_key, settings.rate, settings.rounds,
                            settings.first_batch, seed, scorer, label=measure, on_round=on_round)
    return run, pool, labels


def _workload_json(task) -> str:
    import tvm

    return tvm.ir.save_json(task.mod)
