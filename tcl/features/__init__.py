"""Features: schedule-primitive tokens + a hardware row (TLP §4, TCL §5.1).

A program's steps become a (rows + 1, cols) float32 matrix: 26x22 on CPU,
41x20 on GPU with the papers' defaults. Vocabularies and scales are fitted on
training data only and saved as JSON next to the model that uses them.
"""

from tcl.features.hardware import HardwareNormalizer
from tcl.features.tokenizer import (HW_ROW, PAD_ID, PAPER_SHAPES, UNK_ID, Tokenizer, sequence_stats,
                                    trace_steps)

__all__ = ["HW_ROW", "PAD_ID", "PAPER_SHAPES", "UNK_ID", "HardwareNormalizer", "Tokenizer",
           "sequence_stats", "trace_steps"]
