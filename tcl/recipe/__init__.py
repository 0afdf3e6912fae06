"""Searching the training recipe of a cost model (Optuna trials as nested MLflow runs): tcl.recipe.search."""

from .search import Trial, best_trial, default_space, search_recipe, split_recipe, train_recipe

__all__ = ["Trial", "best_trial", "default_space", "search_recipe", "split_recipe", "train_recipe"]
