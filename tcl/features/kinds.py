"""What a cost model reads (its input kind) and the featurizer that makes that input from programs.

A model class names its kind (`input_kind = TOKENS`); a bundle saves and loads the featurizer of that
kind through `featurizer_class`, so a new kind of input is one featurizer class decorated with
`@register_featurizer` (it declares `input_kind` and the `file_name` it is saved under).
"""

from __future__ import annotations

TOKENS = "tokens"        # our schedule-primitive tokens + hardware row (tcl.features.tokenizer)
PER_STORE = "per_store"  # TVM's PerStoreFeature, padded stores (tcl.features.per_store)
PACM = "pacm"            # PerStoreFeature + temporal dataflow blocks, packed (tcl.features.dataflow)

FEATURIZERS: dict[str, type] = {}


def register_featurizer(cls: type) -> type:
    """Class decorator: the featurizer of `cls.input_kind`."""
    kind = cls.input_kind
    if kind in FEATURIZERS:
        raise ValueError(f"input kind {kind!r} already has a featurizer ({FEATURIZERS[kind].__name__})")
    FEATURIZERS[kind] = cls
    return cls


def featurizer_class(kind: str, where: str = "") -> type:
    """The featurizer class of an input kind; ValueError naming `where` (a file) and the known kinds."""
    from . import dataflow, per_store, tokenizer  # noqa: F401  (their featurizers register themselves)

    if kind not in FEATURIZERS:
        raise ValueError(f"{where + ': ' if where else ''}unknown input kind {kind!r} "
                         f"(known: {sorted(FEATURIZERS)})")
    return FEATURIZERS[kind]
