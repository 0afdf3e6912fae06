"""Training-recipe search: Optuna proposes optimizer and model settings, each trial trains a model on the
train split and is scored on the validation split, one nested MLflow run per trial under the caller's run.

The held-out test split never steers the search (the recipe would be tuned to the networks it is judged
on): the caller scores the chosen recipe on it once, next to the default recipe
(benchmarks/search_recipe.py).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .. import tracking
from ..models.losses import KINDS as LOSSES
from ..train.evaluate import gate_top1
from ..train.loop import TrainConfig, fit, model_hparams

# What a trial may change, by name: ("log", low, high) a float on a log scale, ("int", low, high), or
# ("choice", [values]). `hparams.<key>` is a model constructor argument (params.yaml train.hparams.<model>).
OPTIMIZER_SPACE: dict[str, tuple] = {
    "lr": ("log", 1e-4, 3e-3),
    "batch_size": ("choice", [256, 512, 1024]),
    "weight_decay": ("choice", [0.0, 1e-5, 1e-4]),
    "loss": ("choice", list(LOSSES)),
}
MAMBA_SPACE = {"hparams.n_layer": ("int", 1, 3), "hparams.d_state": ("choice", [8, 16, 32]),
               "hparams.expand": ("choice", [1, 2])}
MODEL_SPACES: dict[str, dict[str, tuple]] = {"tcl": MAMBA_SPACE, "tcl_stores": MAMBA_SPACE}


def default_space(model_name: str) -> dict[str, tuple]:
    return {**OPTIMIZER_SPACE, **MODEL_SPACES.get(model_name, {})}


def suggest(trial, space: dict[str, tuple]) -> dict[str, Any]:
    """One value per key of `space`, drawn by the Optuna trial."""
    out = {}
    for name, (kind, *args) in space.items():
        if kind == "log":
            out[name] = trial.suggest_float(name, args[0], args[1], log=True)
        elif kind == "int":
            out[name] = trial.suggest_int(name, args[0], args[1])
        elif kind == "choice":
            out[name] = trial.suggest_categorical(name, args[0])
        else:
            raise ValueError(f"recipe space {name}: unknown kind {kind!r} (log, int, choice)")
    return out


def split_recipe(recipe: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(TrainConfig overrides, model hyperparameters) of a flat recipe."""
    hparams = {k.removeprefix("hparams."): v for k, v in recipe.items() if k.startswith("hparams.")}
    return {k: v for k, v in recipe.items() if not k.startswith("hparams.")}, hparams


@dataclass
class Trial:
    number: int
    recipe: dict[str, Any]
    validation_top1: float   # mean per task (the promotion gate's figure); NaN when training diverged
    seconds: float


def train_recipe(model_name: str, recipe: dict[str, Any], params: dict[str, Any], train: dict[str, np.ndarray],
                 *, epochs: int, seed: int, feat_dim: int, seq_len: int | None, threads: int | None = None):
    """A model of `model_name` trained on `train` with `recipe` over the params' defaults."""
    from ..models import build_model

    overrides, hparams = split_recipe(recipe)
    cfg = TrainConfig.from_params(params, model_name, epochs=epochs, seed=seed, threads=threads, **overrides)
    base = model_hparams(params, model_name)
    model = build_model(model_name, feat_dim=feat_dim, seq_len=seq_len, seed=seed, **{**base, **hparams})
    fit(model, train["x"], train["label"], train["group"], cfg)
    return model


def search_recipe(model_name: str, params: dict[str, Any], train: dict[str, np.ndarray],
                  validation: dict[str, np.ndarray], *, trials: int, epochs: int, seed: int = 0,
                  space: dict[str, tuple] | None = None, feat_dim: int, seq_len: int | None,
                  threads: int | None = None, log: Callable[[str], None] = print) -> list[Trial]:
    """`trials` recipes drawn by Optuna's TPE sampler (seeded), each trained and scored on `validation`;
    every trial is a nested MLflow run (tag stage=recipe) of the run the caller has open."""
    import optuna

    from ..models.base import predict

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = space or default_space(model_name)
    out: list[Trial] = []

    def objective(trial) -> float:
        recipe = suggest(trial, space)
        start = time.perf_counter()
        with tracking.run(params, f"recipe-{model_name}-{trial.number}", {"stage": "recipe", "model": model_name},
                          nested=True):
            tracking.log_params({**recipe, "epochs": epochs, "seed": seed})
            model = train_recipe(model_name, recipe, params, train, epochs=epochs, seed=seed, feat_dim=feat_dim,
                                 seq_len=seq_len, threads=threads)
            top1 = gate_top1(validation, predict(model, validation["x"]))
            if math.isfinite(top1):
                tracking.log_metric("validation_top1_mean_task", top1)
        out.append(Trial(trial.number, recipe, top1, time.perf_counter() - start))
        log(f"trial {trial.number}: validation top-1 {top1:.3f} {recipe}")
        return top1 if math.isfinite(top1) else -1.0

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    study.optimize(objective, n_trials=trials)
    return out


def best_trial(trials: list[Trial]) -> Trial:
    scored = [t for t in trials if math.isfinite(t.validation_top1)]
    if not scored:
        raise ValueError("no recipe trial trained to a finite validation score")
    return max(scored, key=lambda t: t.validation_top1)
