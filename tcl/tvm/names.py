"""What a name in `tune.cost_models` means: TVM's built-in model, or a learned one and how it adapts,
and the search modifiers that go with either.

    xgb, random              TVM's own cost models (xgb learns each task from scratch)
    tcl, tenset_mlp, ckd     a registered model, frozen while tuning
    tcl_stores_joint         ... trained once on every platform's programs (tcl.train.joint)
    tcl+moa, tenset_mlp+ft   ... adapting online (tcl.tvm.online: ft, moa)
    pretrained_xgb+boost     the registered `<prefix>-xgb-<platform>` with per-task trees grown on its scores
    pretrained_xgb_kb+boost  ... fitted on every platform of the target's ISA (tcl.train.kb_prior: `xgb_kb`)
    tenset_mlp+boost         ... the same trees on top of any model on TVM's PerStoreFeature
    ...+draft                PSA drafts, the model verifies the top candidates (tcl.tvm.draft)
    ...+moses                tasks stop being measured once they settle (tcl.tvm.controller)
    <learned>+guard          per task, TVM's XGB takes over while it ranks the task better, and from the
                             start on an operator type the model never trained on (tcl.tvm.guard)
    <learned>+handoff        the model picks each task's first tune.guard.handoff_batches batches, TVM's XGB
                             (learning from every measurement) the rest (tcl.tvm.guard)
    tenset_mlp,pretrained_xgb  learned models that read the same input, their scores summed, frozen
                             (tcl.tvm.ensemble); with +boost, per-task trees grown on the sum

e.g. `tcl+moa+draft+moses`, `xgb+draft`. `pretrained_xgb` is the tuning name of the train stage's
`xgb` model: "xgb" alone is TVM's xgb, the baseline every table compares with.
"""

from __future__ import annotations

from dataclasses import dataclass

BUILTIN_COST_MODELS = ("xgb", "random")
REGISTERED_AS = {"pretrained_xgb": "xgb", "pretrained_xgb_kb": "xgb_kb"}  # tuning name -> registered name
MODIFIERS = ("draft", "moses", "guard", "handoff")
ENSEMBLE_SEP = ","


@dataclass(frozen=True)
class CostModelName:
    name: str          # as written: "tcl+moa+draft"
    base: str          # the model as the tuning stage names it: "tcl", "pretrained_xgb", "xgb"
    registered: str    # its registered model's name: "tcl", "xgb"
    adaptation: str    # "frozen", "ft", "moa", "boost"; "" for TVM's built-ins
    modifiers: tuple[str, ...] = ()  # search modifiers, in MODIFIERS order

    @property
    def builtin(self) -> bool:
        return self.base in BUILTIN_COST_MODELS

    @property
    def draft(self) -> bool:
        return "draft" in self.modifiers

    @property
    def moses(self) -> bool:
        return "moses" in self.modifiers

    @property
    def guard(self) -> bool:
        return "guard" in self.modifiers

    @property
    def handoff(self) -> bool:
        return "handoff" in self.modifiers

    @property
    def members(self) -> tuple[str, ...]:
        """The learned models an ensemble sums (`tenset_mlp,pretrained_xgb`); the one model otherwise."""
        return tuple(self.base.split(ENSEMBLE_SEP))


def learned_model_names() -> set[str]:
    """What a learned model may be called: every registered cost model (tcl.models), the same trained on
    every platform at once (`tcl_stores_joint`, tcl.train.joint) and every transfer method (tcl.transfer),
    the train stage's `xgb` as `pretrained_xgb`, the kb_prior stage's `xgb_kb` as `pretrained_xgb_kb`."""
    from ..models import MODELS
    from ..tracking.names import joint_name, kb_name
    from ..train.kb_prior import MODEL as KB_MODEL
    from ..transfer import TRANSFER_METHODS

    inverse = {registered: tuning for tuning, registered in REGISTERED_AS.items()}
    return {inverse.get(n, n) for n in (*MODELS, *map(joint_name, MODELS), kb_name(KB_MODEL), *TRANSFER_METHODS)}


def parse_cost_model(name: str, known_base: bool = True) -> CostModelName:
    """Split `name` into model, adaptation and modifiers; ValueError naming the valid forms. With
    `known_base` (params' tune.cost_models) the model must be TVM's or a registered one; a caller tuning
    with cost models of its own (tune_side_by_side's factories) names them as it likes."""
    from .online import ADAPTERS

    base, *rest = name.split("+")
    modifiers = tuple(m for m in MODIFIERS if m in rest)
    adaptations = [t for t in rest if t not in MODIFIERS]
    if not base or len(adaptations) > 1 or any(a not in ADAPTERS for a in adaptations) \
            or len(modifiers) + len(adaptations) != len(rest) or base in MODIFIERS:
        raise ValueError(f"tune.cost_models: {name!r} is not a cost model name; use one of {BUILTIN_COST_MODELS} "
                         f"(TVM's), or a learned model optionally followed by +<adaptation> with adaptation in "
                         f"{sorted(ADAPTERS)}, either optionally followed by +<modifier> with modifier in "
                         f"{list(MODIFIERS)}, e.g. 'tcl+moa', 'pretrained_xgb+boost', 'tcl+moa+draft+moses'")
    if ENSEMBLE_SEP in base:
        return _parse_ensemble(name, base, adaptations, modifiers, known_base)
    if known_base and base not in BUILTIN_COST_MODELS and base not in learned_model_names():
        raise ValueError(f"tune.cost_models: {name!r}: no cost model is called {base!r}; TVM's are "
                         f"{list(BUILTIN_COST_MODELS)}, the learned ones {sorted(learned_model_names())}")
    if base in BUILTIN_COST_MODELS:
        if adaptations:
            raise ValueError(f"tune.cost_models: {name!r}: TVM's {base} does not take +{adaptations[0]} "
                             "(a pretrained XGB is 'pretrained_xgb+boost')")
        if "guard" in modifiers or "handoff" in modifiers:
            raise ValueError(f"tune.cost_models: {name!r}: +guard and +handoff put TVM's xgb beside a learned "
                             f"model; TVM's {base} has nothing to guard or hand over")
        return CostModelName(name, base, base, "", modifiers)
    return CostModelName(name, base, REGISTERED_AS.get(base, base), (adaptations or ["frozen"])[0], modifiers)


def _parse_ensemble(name: str, base: str, adaptations: list[str], modifiers: tuple[str, ...],
                    known_base: bool) -> CostModelName:
    members = base.split(ENSEMBLE_SEP)
    if len(set(members)) != len(members) or not all(members) or any(m in BUILTIN_COST_MODELS for m in members):
        raise ValueError(f"tune.cost_models: {name!r}: an ensemble is two or more distinct learned models joined "
                         f"by '{ENSEMBLE_SEP}' (TVM's {list(BUILTIN_COST_MODELS)} cannot be members), "
                         "e.g. 'tenset_mlp,pretrained_xgb'")
    unknown = [m for m in members if known_base and m not in learned_model_names()]
    if unknown:
        raise ValueError(f"tune.cost_models: {name!r}: no learned model is called {unknown[0]!r}; the learned ones "
                         f"are {sorted(learned_model_names())}")
    from .online.base import prior_adaptations

    takes_prior = prior_adaptations()
    if adaptations and adaptations[0] not in takes_prior:
        raise ValueError(f"tune.cost_models: {name!r}: an ensemble is scored {' or '.join(takes_prior)}; "
                         f"+{adaptations[0]} trains one model's network (tcl.tvm.online)")
    registered = ENSEMBLE_SEP.join(REGISTERED_AS.get(m, m) for m in members)
    return CostModelName(name, base, registered, (adaptations or ["frozen"])[0], modifiers)
