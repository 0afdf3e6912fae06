"""Benchmark networks written from scratch in PyTorch (no torchvision on this stack).

These are the networks of the TLP/TCL evaluations (ResNet-18/50, MobileNet-V2,
ResNeXt-50 32x4d, BERT-tiny/base) and more families for training data (VGG-16,
DenseNet-121, EfficientNet-B0, ViT-S/16, a GPT-2-style decoder; families.py adds detection,
segmentation, audio, video, LLM and recommendation models). Only their operator graphs matter here: the
weights are random but deterministic, because tuning tasks depend on shapes, not values.
Input sizes are parameters so the default pipeline stays small.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

BERT_VOCAB = 1000  # small on purpose: the embedding table is a constant in the Relax module

__all__ = ["NETWORKS", "BERT_VOCAB", "build_network", "input_kind", "is_image_network"]


# --------------------------------------------------------------------------- CNN parts
def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    """Conv (no bias: BN follows) + BatchNorm, the unit every CNN here is made of."""
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    )


class _BasicBlock(nn.Module):
    """ResNet-18/34 block: two 3x3 convs and an identity (or 1x1 projection) shortcut."""

    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(
            _conv_bn(cin, planes, 3, stride), nn.ReLU(inplace=True), _conv_bn(planes, planes, 3)
        )
        out = planes * self.expansion
        self.shortcut = _conv_bn(cin, out, 1, stride) if stride != 1 or cin != out else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.shortcut(x))


class _Bottleneck(nn.Module):
    """ResNet-50 / ResNeXt block: 1x1 reduce, 3x3 (grouped for ResNeXt), 1x1 expand."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int, groups: int = 1, base_width: int = 64):
        super().__init__()
        width = int(planes * base_width / 64) * groups
        out = planes * self.expansion
        self.body = nn.Sequential(
            _conv_bn(cin, width, 1), nn.ReLU(inplace=True),
            _conv_bn(width, width, 3, stride, groups=groups), nn.ReLU(inplace=True),
            _conv_bn(width, out, 1),
        )
        self.shortcut = _conv_bn(cin, out, 1, stride) if stride != 1 or cin != out else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.shortcut(x))


class ResNet(nn.Module):
    """ImageNet-style ResNet/ResNeXt: 7x7 stem, max-pool, four stages, avg-pool, classifier."""

    def __init__(self, block: type, layers: list[int], num_classes: int = 1000,
                 groups: int = 1, base_width: int = 64):
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(3, 64, 7, 2), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, stride=2, padding=1))
        stages, cin = [], 64
        for i, n in enumerate(layers):
            planes = 64 * 2**i
            for j in range(n):
                stride = 2 if i > 0 and j == 0 else 1
                if block is _Bottleneck:
                    stages.append(block(cin, planes, stride, groups, base_width))
                else:
                    stages.append(block(cin, planes, stride))
                cin = planes * block.expansion
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class _InvertedResidual(nn.Module):
    """MobileNet-V2 block: 1x1 expand, 3x3 depthwise, 1x1 linear projection."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [_conv_bn(cin, hidden, 1), nn.ReLU6(inplace=True)]
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU6(inplace=True),
                   _conv_bn(hidden, cout, 1)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    """MobileNet-V2 (width 1.0), the inverted-residual settings of the paper's Table 2."""

    SETTINGS = [  # expansion t, channels c, repeats n, first stride s
        (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
        (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
    ]

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [_conv_bn(3, 32, 3, 2), nn.ReLU6(inplace=True)]
        cin = 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(_InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += [_conv_bn(cin, 1280, 1), nn.ReLU6(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


# --------------------------------------------------------------------------- more CNNs
class VGG(nn.Module):
    """VGG-16 with batch norm: 13 3x3 convs in five stages, max-pools, three dense layers."""

    CHANNELS = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for c in self.CHANNELS:
            if c == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [_conv_bn(cin, c, 3), nn.ReLU(inplace=True)]
                cin = c
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(512 * 7 * 7, 4096), nn.ReLU(inplace=True),
                                        nn.Linear(4096, 4096), nn.ReLU(inplace=True),
                                        nn.Linear(4096, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # torchvision's fixed 7x7 pooling keeps the classifier's shape at any input size
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 7), 1))


class _DenseLayer(nn.Module):
    """DenseNet bottleneck layer (pre-activation): BN-ReLU-1x1 conv, BN-ReLU-3x3 conv, concat."""

    def __init__(self, cin: int, growth: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.BatchNorm2d(cin), nn.ReLU(inplace=True), nn.Conv2d(cin, 4 * growth, 1, bias=False),
            nn.BatchNorm2d(4 * growth), nn.ReLU(inplace=True),
            nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.body(x)], dim=1)


class DenseNet(nn.Module):
    """DenseNet-121 (growth 32, blocks 6-12-24-16, transitions halve channels and size)."""

    def __init__(self, blocks: tuple[int, ...] = (6, 12, 24, 16), growth: int = 32, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [_conv_bn(3, 64, 7, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, padding=1)]
        c = 64
        for i, n in enumerate(blocks):
            for _ in range(n):
                layers.append(_DenseLayer(c, growth))
                c += growth
            if i < len(blocks) - 1:
                layers += [nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, c // 2, 1, bias=False),
                           nn.AvgPool2d(2)]
                c //= 2
        layers += [nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class _MBConv(nn.Module):
    """EfficientNet block: 1x1 expand, k x k depthwise, squeeze-and-excitation, 1x1 project (SiLU)."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [_conv_bn(cin, hidden, 1), nn.SiLU()]
        layers += [_conv_bn(hidden, hidden, k, stride, groups=hidden), nn.SiLU()]
        self.expand_dw = nn.Sequential(*layers)
        squeeze = max(1, cin // 4)
        self.se = nn.Sequential(nn.Conv2d(hidden, squeeze, 1), nn.SiLU(), nn.Conv2d(squeeze, hidden, 1),
                                nn.Sigmoid())
        self.project = _conv_bn(hidden, cout, 1)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.expand_dw(x)
        y = self.project(y * self.se(F.adaptive_avg_pool2d(y, 1)))
        return x + y if self.residual else y


class EfficientNetB0(nn.Module):
    """EfficientNet-B0: the MBConv stages of the paper's Table 1 (3x3 and 5x5 depthwise, SE)."""

    STAGES = [  # expansion, channels, repeats, first stride, kernel
        (1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3),
        (6, 112, 3, 1, 5), (6, 192, 4, 2, 5), (6, 320, 1, 1, 3),
    ]

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [_conv_bn(3, 32, 3, 2), nn.SiLU()]
        cin = 32
        for t, c, n, s, k in self.STAGES:
            for i in range(n):
                layers.append(_MBConv(cin, c, k, s if i == 0 else 1, t))
                cin = c
        layers += [_conv_bn(cin, 1280, 1), nn.SiLU()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# --------------------------------------------------------------------------- BERT parts
class _SelfAttention(nn.Module):
    """Multi-head self-attention written out (Q/K/V dense, batched matmuls, softmax)."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden size {hidden} is not divisible by {heads} heads")
        self.heads, self.head_dim = heads, hidden // heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.out = nn.Linear(hidden, hidden)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        return x.reshape(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        b, _, s, _ = ctx.shape
        return self.out(ctx.permute(0, 2, 1, 3).reshape(b, s, self.heads * self.head_dim))


class _EncoderLayer(nn.Module):
    """Post-norm Transformer encoder layer as in BERT (attention, GELU feed-forward)."""

    def __init__(self, hidden: int, heads: int, intermediate: int):
        super().__init__()
        self.attn = _SelfAttention(hidden, heads)
        self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ff1, self.ff2 = nn.Linear(hidden, intermediate), nn.Linear(intermediate, hidden)
        self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.ff2(F.gelu(self.ff1(x))))


class Bert(nn.Module):
    """BERT encoder: token + position + segment embeddings, N layers, tanh pooler on [CLS]."""

    def __init__(self, layers: int, hidden: int, heads: int, vocab: int = BERT_VOCAB,
                 max_positions: int = 512):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(max_positions, hidden)
        self.segment = nn.Parameter(torch.randn(hidden) * 0.02)  # all tokens in segment 0
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.Sequential(*(_EncoderLayer(hidden, heads, 4 * hidden) for _ in range(layers)))
        self.pooler = nn.Linear(hidden, hidden)
        self.max_positions = max_positions

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.norm(self.tokens(ids) + self.positions(pos) + self.segment)
        x = self.layers(x)
        return torch.tanh(self.pooler(x[:, 0]))


# --------------------------------------------------------------------------- pre-norm Transformers
class _PreNormBlock(nn.Module):
    """Pre-norm Transformer block (ViT, GPT-2): x + attn(LN(x)), x + MLP(LN(x)); causal for GPT-2."""

    def __init__(self, hidden: int, heads: int, causal: bool, max_positions: int = 1024):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.heads, self.causal = heads, causal
        if causal:  # a constant, not built in forward: TVM's importer cannot legalize torch.full here
            self.register_buffer("mask", torch.triu(torch.full((max_positions, max_positions), -1e9), 1),
                                 persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(h // self.heads)
        if self.causal:
            scores = scores + self.mask[:s, :s]
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).reshape(b, s, h)
        x = x + self.proj(ctx)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    """Vision Transformer (ViT-S/16 by default): 16x16 patch embedding, class token, pre-norm blocks."""

    def __init__(self, layers: int = 12, hidden: int = 384, heads: int = 6, patch: int = 16,
                 num_classes: int = 1000, max_patches: int = 1024):
        super().__init__()
        self.patch = nn.Conv2d(3, hidden, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, hidden) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, max_patches + 1, hidden) * 0.02)
        self.blocks = nn.Sequential(*(_PreNormBlock(hidden, heads, causal=False) for _ in range(layers)))
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)
        x = self.blocks(x + self.pos[:, : x.shape[1]])
        return self.head(self.norm(x[:, 0]))


class GPT2(nn.Module):
    """GPT-2-style decoder (small: 12 layers, 768 hidden, 12 heads): causal pre-norm blocks, tied LM head."""

    def __init__(self, layers: int = 12, hidden: int = 768, heads: int = 12, vocab: int = BERT_VOCAB,
                 max_positions: int = 1024):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(max_positions, hidden)
        self.blocks = nn.Sequential(*(_PreNormBlock(hidden, heads, causal=True, max_positions=max_positions)
                                      for _ in range(layers)))
        self.norm = nn.LayerNorm(hidden)
        self.max_positions = max_positions

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.norm(self.blocks(self.tokens(ids) + self.positions(pos)))
        return torch.matmul(x, self.tokens.weight.t())


class TinyCNN(nn.Module):
    """Two conv-BN-ReLU layers, global pooling and a classifier: a handful of tasks, for
    smoke runs and tests where a real network would take too long to tune."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(_conv_bn(3, 8, 3), nn.ReLU(), _conv_bn(8, 16, 3, stride=2), nn.ReLU())
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).mean(dim=(2, 3)))


# --------------------------------------------------------------------------- registry
NETWORKS: dict[str, Callable[[], nn.Module]] = {
    "resnet18": lambda: ResNet(_BasicBlock, [2, 2, 2, 2]),
    "resnet50": lambda: ResNet(_Bottleneck, [3, 4, 6, 3]),
    "mobilenet_v2": MobileNetV2,
    "resnext50": lambda: ResNet(_Bottleneck, [3, 4, 6, 3], groups=32, base_width=4),
    "bert_tiny": lambda: Bert(layers=2, hidden=128, heads=2),
    "bert_base": lambda: Bert(layers=12, hidden=768, heads=12),
    "vgg16": VGG,
    "densenet121": DenseNet,
    "efficientnet_b0": EfficientNetB0,
    "vit_s16": ViT,
    "gpt2": GPT2,
    "tiny_cnn": TinyCNN,
}


TOKEN_NETWORKS = ("bert_tiny", "bert_base", "gpt2")

# The families of issue 28 (detection, segmentation, audio, video, LLM blocks, recommendation, ...)
# live in families.py, which builds on the parts above: imported here, after them, to register them.
from .families import FAMILIES, FAMILY_KINDS  # noqa: E402

NETWORKS.update(FAMILIES)


def input_kind(name: str) -> str:
    """What the network takes (`inputs.SIZE_KEYS`): image, tokens, audio, video, decode or tabular."""
    if name in TOKEN_NETWORKS:
        return "tokens"
    return FAMILY_KINDS.get(name, "image")


def is_image_network(name: str) -> bool:
    """Whether the network takes images (else token ids or another input kind)."""
    return input_kind(name) == "image"


def build_network(name: str, *, batch: int, image_size: int = 32, seq_len: int = 16, size=None
                  ) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The model in eval mode with seed-0 weights, and matching example inputs.

    Images are (batch, 3, image_size, image_size) float32; token networks take (batch, seq_len)
    int64 ids below BERT_VOCAB. `size`, when given, is the instance size in the network's own
    kind (`inputs.py`: pixels, tokens, samples, `<frames>x<side>`, cache length, rows) and
    replaces image_size/seq_len. The global torch RNG state is left untouched.
    """
    from .inputs import parse_size

    if name not in NETWORKS:
        raise ValueError(f"unknown network '{name}'; known networks: {sorted(NETWORKS)}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    kind = input_kind(name)
    if size is not None:
        size = parse_size(kind, size)
        image_size = seq_len = size
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = NETWORKS[name]().eval()
        if hasattr(model, "example_inputs"):  # a family network: its inputs follow from one size
            if size is None and kind not in ("image", "tokens"):
                raise ValueError(f"network '{name}' takes {kind} inputs: give its size (size=...)")
            inputs = model.example_inputs(batch, image_size if kind == "image" else size if size else seq_len)
        elif kind == "image":
            if image_size < 1:
                raise ValueError(f"image_size must be >= 1, got {image_size}")
            inputs = (torch.randn(batch, 3, image_size, image_size),)
        else:
            if not 1 <= seq_len <= model.max_positions:
                raise ValueError(f"seq_len must be in [1, {model.max_positions}], got {seq_len}")
            inputs = (torch.randint(0, BERT_VOCAB, (batch, seq_len), dtype=torch.int64),)
    return model, inputs
