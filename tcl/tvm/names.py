"""What a name in `tune.cost_models` means: TVM's built-in model, or a learned one and how it adapts.

    xgb, random              TVM's own cost models (xgb learns each task from scratch)
    tcl, tenset_mlp, ckd     a registered model, frozen while tuning
    tcl+moa, tenset_mlp+ft   ... adapting online (tcl.tvm.online: ft, moa)
    pretrained_xgb+boost     the registered `<prefix>-xgb-<platform>` growing per-task trees

`pretrained_xgb` is the tuning name of the train stage's `xgb` model: "xgb" alone is
TVM's xgb, the baseline every table compares with.
"""

from __future__ import annotations

from dataclasses import dataclass

BUILTIN_COST_MODELS = ("xgb", "random")
REGISTERED_AS = {"pretrained_xgb": "xgb"}  # tuning name -> the registered model's name


@dataclass(frozen=True)
class CostModelName:
    name: str          # as written: "tcl+moa"
    base: str          # the learned model as the tuning stage names it: "tcl", "pretrained_xgb"
    registered: str    # its registered model's name: "tcl", "xgb"
    adaptation: str    # "frozen", "ft", "moa", "boost"; "" for TVM's built-ins

    @property
    def builtin(self) -> bool:
        return self.name in BUILTIN_COST_MODELS


def parse_cost_model(name: str) -> CostModelName:
    """Split `name` into model and adaptation; ValueError naming the valid forms."""
    from .online import ADAPTERS

    if name in BUILTIN_COST_MODELS:
        return CostModelName(name, name, name, "")
    base, _, adaptation = name.partition("+")
    adaptation = adaptation or "frozen"
    if not base or adaptation not in ADAPTERS:
        raise ValueError(f"tune.cost_models: {name!r} is not a cost model name; use one of {BUILTIN_COST_MODELS} "
                         f"(TVM's), or a learned model optionally followed by +<adaptation> with adaptation in "
                         f"{sorted(ADAPTERS)}, e.g. 'tcl+moa' or 'pretrained_xgb+boost'")
    if base in BUILTIN_COST_MODELS:
        raise ValueError(f"tune.cost_models: {name!r}: TVM's {base} does not take +{adaptation} "
                         "(a pretrained XGB is 'pretrained_xgb+boost')")
    return CostModelName(name, base, REGISTERED_AS.get(base, base), adaptation)
