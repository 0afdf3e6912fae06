"""Dataset layer: one record schema that every reader emits, and the store that holds it."""
