"""Input kinds: what one instance size means for a network, and where `collect` lists the sizes.

A workload instance is a network at one size (`resnet50@224`). The size is one number for
every kind but video, whose clips are `<frames>x<side>` (`r3d18@8x112`):

| kind | input | size | `collect` key |
|---|---|---|---|
| image | (batch, 3, size, size) float | pixels per side | `image_sizes` |
| tokens | (batch, size) token ids | sequence length | `seq_lens` |
| audio | (batch, channels, size) float | samples (waveform) or frames (mel) | `audio_lens` |
| video | (batch, 3, frames, side, side) float | `<frames>x<side>` | `clip_sizes` |
| decode | one token id + a K/V cache of `size` positions | cache length | `cache_lens` |
| tabular | (batch x size, features) floats + ids | rows scored at once | `tabular_rows` |

`collect.sizes_by_network` overrides the kind's list for one network.
"""

from __future__ import annotations

import re
from typing import Any, Union

Size = Union[int, tuple[int, int]]

SIZE_KEYS = {"image": "image_sizes", "tokens": "seq_lens", "audio": "audio_lens", "video": "clip_sizes",
             "decode": "cache_lens", "tabular": "tabular_rows"}

_CLIP = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")


def parse_size(kind: str, value: Any) -> Size:
    """One instance size of a network of `kind`: a positive int, or (frames, side) for video."""
    if kind not in SIZE_KEYS:
        raise ValueError(f"unknown input kind {kind!r}; known: {sorted(SIZE_KEYS)}")
    if kind == "video":
        if isinstance(value, tuple) and len(value) == 2:
            value = size_label(value)
        m = _CLIP.match(str(value))
        if not m or int(m[1]) < 1 or int(m[2]) < 1:
            raise ValueError(f"video size {value!r}: expected '<frames>x<side>', e.g. '8x112'")
        return int(m[1]), int(m[2])
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{kind} size {value!r}: expected a positive integer")
    return value


def size_label(size: Size) -> str:
    """How a size is written in an instance name: `224`, `8x112`."""
    return f"{size[0]}x{size[1]}" if isinstance(size, tuple) else str(size)


def sizes_for(cfg: dict[str, Any], network: str, kind: str) -> list[Size]:
    """The sizes `cfg` (params' `collect`) gives `network`: `sizes_by_network`, else its kind's list."""
    raw = (cfg.get("sizes_by_network") or {}).get(network) or cfg.get(SIZE_KEYS[kind])
    if not raw:
        raise ValueError(f"collect: no input sizes for network '{network}' ({kind} input: set "
                         f"collect.{SIZE_KEYS[kind]} or collect.sizes_by_network.{network})")
    return [parse_size(kind, v) for v in raw]


def instance_name(network: str, size: Size) -> str:
    """A workload instance: `resnet50` at 224 -> `resnet50@224`."""
    return f"{network}@{size_label(size)}"


def split_instance(instance: str) -> tuple[str, Size | None]:
    """`r3d18@4x96` -> ('r3d18', (4, 96)), `resnet50@224` -> ('resnet50', 224), `resnet50` -> ('resnet50', None);
    a size that does not fit the network's input kind is a ValueError naming the instance."""
    from .networks import input_kind

    network, _, label = instance.partition("@")
    if not label:
        return network, None
    kind = input_kind(network)
    try:
        return network, parse_size(kind, int(label) if kind != "video" and label.isdigit() else label)
    except ValueError as exc:
        raise ValueError(f"workload instance {instance!r}: {exc}") from None


def base_network(instance: str) -> str:
    """`resnet50@224` -> `resnet50` (names without a size are returned as they are)."""
    return instance.split("@", 1)[0]
