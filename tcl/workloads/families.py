"""More network families for the knowledge base (issue 28): workloads unlike the classic CNNs.

Detection and segmentation (decoders, nearest/bilinear upsampling, transposed and dilated
convolutions, pixel shuffle), audio (1-D convolutions on waveforms and mel frames), video
(3-D and (2+1)-D convolutions), vision transformers and MLP-Mixer, LLM decoder blocks (RMSNorm,
rotary embeddings, SwiGLU, grouped-query attention; prefill at a sequence length and one decode
step against a KV cache of a given length), recommendation models (embedding tables, MLPs, feature
interactions) and newer mobile CNNs. Written from the papers' layer tables, smaller where a
full-size layer would make random schedules run for seconds on one core; only shapes matter.

A network whose input is not an image or a token sequence is listed in `FAMILY_KINDS` and builds
its own example inputs from one instance size (`example_inputs(batch, size)`): see `inputs.py`.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from .networks import BERT_VOCAB, ViT, _conv_bn

# --------------------------------------------------------------------------- detection / segmentation


class _ConvBNAct(nn.Sequential):
    """Conv2d + BatchNorm (folded on import) + an activation; `dilation` keeps the size."""

    def __init__(self, cin: int, cout: int, k: int = 3, stride: int = 1, dilation: int = 1, groups: int = 1,
                 act: type[nn.Module] = nn.ReLU):
        super().__init__(nn.Conv2d(cin, cout, k, stride=stride, padding=dilation * (k // 2), dilation=dilation,
                                   groups=groups, bias=False),
                         nn.BatchNorm2d(cout), act())


class UNet(nn.Module):
    """U-Net (segmentation): four encoder levels, 2x2 transposed-conv upsampling, skip concatenation."""

    def __init__(self, widths: tuple[int, ...] = (32, 64, 128, 256), classes: int = 21):
        super().__init__()
        self.down = nn.ModuleList()
        cin = 3
        for w in widths:
            self.down.append(nn.Sequential(_ConvBNAct(cin, w), _ConvBNAct(w, w)))
            cin = w
        self.up, self.merge = nn.ModuleList(), nn.ModuleList()
        for w in reversed(widths[:-1]):
            self.up.append(nn.ConvTranspose2d(cin, w, 2, stride=2))
            self.merge.append(nn.Sequential(_ConvBNAct(2 * w, w), _ConvBNAct(w, w)))
            cin = w
        self.head = nn.Conv2d(cin, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for i, level in enumerate(self.down):
            x = level(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        for up, merge, skip in zip(self.up, self.merge, reversed(skips[:-1])):
            x = merge(torch.cat([up(x), skip], dim=1))
        return self.head(x)


class DeepLabV3(nn.Module):
    """DeepLab-v3 (segmentation): a dilated ResNet-style backbone at output stride 8, ASPP with
    atrous rates 6/12/18 and image pooling, bilinear upsampling back to the input size."""

    def __init__(self, classes: int = 21, width: int = 32):
        super().__init__()
        w = width
        self.backbone = nn.Sequential(
            _ConvBNAct(3, w, 3, 2), _ConvBNAct(w, w), nn.MaxPool2d(3, 2, padding=1),   # /4
            _ConvBNAct(w, 2 * w), _ConvBNAct(2 * w, 4 * w, 3, 2),                        # /8
            _ConvBNAct(4 * w, 4 * w, dilation=2), _ConvBNAct(4 * w, 8 * w, dilation=2),
            _ConvBNAct(8 * w, 8 * w, dilation=4))
        c = 8 * w
        self.aspp = nn.ModuleList([_ConvBNAct(c, 4 * w, 1)] + [_ConvBNAct(c, 4 * w, 3, dilation=r) for r in (6, 12, 18)])
        self.pool = _ConvBNAct(c, 4 * w, 1)
        self.project = _ConvBNAct(5 * 4 * w, 4 * w, 1)
        self.head = nn.Conv2d(4 * w, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size = x.shape[-2:]
        f = self.backbone(x)
        pooled = self.pool(F.adaptive_avg_pool2d(f, 1)).expand(-1, -1, f.shape[2], f.shape[3])
        y = self.project(torch.cat([b(f) for b in self.aspp] + [pooled], dim=1))
        return F.interpolate(self.head(y), size=size, mode="bilinear", align_corners=False)


class YoloTiny(nn.Module):
    """YOLOv3-tiny-style detector: conv + leaky ReLU + max-pool stages (the last with stride 1),
    two detection heads, the second on nearest-upsampled features concatenated with a skip."""

    def __init__(self, anchors: int = 3, classes: int = 20):
        super().__init__()
        act = lambda: nn.LeakyReLU(0.1)  # noqa: E731
        out = anchors * (5 + classes)
        chans = [16, 32, 64, 128, 256]
        layers: list[nn.Module] = []
        cin = 3
        for c in chans:
            layers += [_ConvBNAct(cin, c, act=act), nn.MaxPool2d(2)]
            cin = c
        self.body = nn.Sequential(*layers[:-2])   # ... up to the 256-channel conv at /16
        self.route = layers[-2]                   # the /16 features the second head reuses
        self.tail = nn.Sequential(nn.MaxPool2d(2), _ConvBNAct(256, 512, act=act),
                                  nn.ZeroPad2d((0, 1, 0, 1)), nn.MaxPool2d(2, stride=1),
                                  _ConvBNAct(512, 1024, act=act), _ConvBNAct(1024, 256, 1, act=act))
        self.head1 = nn.Sequential(_ConvBNAct(256, 512, act=act), nn.Conv2d(512, out, 1))
        self.lateral = _ConvBNAct(256, 128, 1, act=act)
        self.head2 = nn.Sequential(_ConvBNAct(128 + 256, 256, act=act), nn.Conv2d(256, out, 1))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        skip = self.route(self.body(x))
        y = self.tail(skip)
        up = F.interpolate(self.lateral(y), scale_factor=2, mode="nearest")
        return self.head1(y), self.head2(torch.cat([up, skip], dim=1))


class ESPCN(nn.Module):
    """ESPCN super-resolution (x3): 5x5 and 3x3 convs with tanh, then a sub-pixel (pixel shuffle) layer."""

    def __init__(self, scale: int = 3, width: int = 64):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, width, 5, padding=2), nn.Tanh(),
                                  nn.Conv2d(width, width // 2, 3, padding=1), nn.Tanh(),
                                  nn.Conv2d(width // 2, 3 * scale * scale, 3, padding=1))
        self.shuffle = nn.PixelShuffle(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.shuffle(self.body(x)))


# --------------------------------------------------------------------------- mobile CNNs


class _SqueezeExcite(nn.Module):
    def __init__(self, c: int, squeeze: int, gate: type[nn.Module] = nn.Hardsigmoid):
        super().__init__()
        self.fc = nn.Sequential(nn.Conv2d(c, squeeze, 1), nn.ReLU(), nn.Conv2d(squeeze, c, 1), gate())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.fc(F.adaptive_avg_pool2d(x, 1))


class _MobileV3Block(nn.Module):
    def __init__(self, cin: int, k: int, hidden: int, cout: int, se: bool, hs: bool, stride: int):
        super().__init__()
        act = nn.Hardswish if hs else nn.ReLU
        layers: list[nn.Module] = []
        if hidden != cin:
            layers.append(_ConvBNAct(cin, hidden, 1, act=act))
        layers.append(_ConvBNAct(hidden, hidden, k, stride, groups=hidden, act=act))
        if se:
            layers.append(_SqueezeExcite(hidden, max(8, hidden // 4)))
        layers.append(_conv_bn(hidden, cout, 1))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV3Small(nn.Module):
    """MobileNet-V3-Small: the paper's Table 2 (hard-swish, squeeze-excite with hard-sigmoid gates)."""

    SETTINGS = [  # kernel, expansion size, out, SE, hard-swish, stride
        (3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2), (3, 88, 24, False, False, 1),
        (5, 96, 40, True, True, 2), (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
        (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1), (5, 288, 96, True, True, 2),
        (5, 576, 96, True, True, 1), (5, 576, 96, True, True, 1),
    ]

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [_ConvBNAct(3, 16, 3, 2, act=nn.Hardswish)]
        cin = 16
        for k, hidden, cout, se, hs, s in self.SETTINGS:
            layers.append(_MobileV3Block(cin, k, hidden, cout, se, hs, s))
            cin = cout
        layers.append(_ConvBNAct(cin, 576, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Linear(1024, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


def _channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    b, c, h, w = x.shape
    return x.reshape(b, groups, c // groups, h, w).transpose(1, 2).reshape(b, c, h, w)


class _ShuffleUnit(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.stride = stride
        branch = cout // 2
        if stride > 1:
            self.left = nn.Sequential(_conv_bn(cin, cin, 3, stride, groups=cin), _ConvBNAct(cin, branch, 1))
        right_in = cin if stride > 1 else branch
        self.right = nn.Sequential(_ConvBNAct(right_in, branch, 1), _conv_bn(branch, branch, 3, stride, groups=branch),
                                   _ConvBNAct(branch, branch, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            a, b = x.chunk(2, dim=1)
            y = torch.cat([a, self.right(b)], dim=1)
        else:
            y = torch.cat([self.left(x), self.right(x)], dim=1)
        return _channel_shuffle(y, 2)


class ShuffleNetV2(nn.Module):
    """ShuffleNet-V2 1.0x: channel split, depthwise 3x3, channel shuffle; stages of 4-8-4 units."""

    def __init__(self, stages: tuple[int, ...] = (4, 8, 4), chans: tuple[int, ...] = (116, 232, 464),
                 num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [_ConvBNAct(3, 24, 3, 2), nn.MaxPool2d(3, 2, padding=1)]
        cin = 24
        for n, c in zip(stages, chans):
            for i in range(n):
                layers.append(_ShuffleUnit(cin, c, 2 if i == 0 else 1))
                cin = c
        layers.append(_ConvBNAct(cin, 1024, 1))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class _ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(x).permute(0, 2, 3, 1)  # channels last for LayerNorm and the pointwise MLP
        y = self.fc2(F.gelu(self.fc1(self.norm(y)))) * self.gamma
        return x + y.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    """ConvNeXt (Tiny's widths, fewer blocks in stage 3): 4x4 patchify stem, 7x7 depthwise convs,
    channels-last LayerNorm and GELU MLPs, 2x2 stride-2 downsampling between stages."""

    def __init__(self, depths: tuple[int, ...] = (2, 2, 4, 2), dims: tuple[int, ...] = (96, 192, 384, 768),
                 num_classes: int = 1000):
        super().__init__()
        self.stages = nn.ModuleList()
        self.downs = nn.ModuleList([nn.Conv2d(3, dims[0], 4, stride=4)] +
                                   [nn.Conv2d(dims[i], dims[i + 1], 2, stride=2) for i in range(len(dims) - 1)])
        self.stem_norm = nn.LayerNorm(dims[0], eps=1e-6)
        self.down_norms = nn.ModuleList(nn.LayerNorm(d, eps=1e-6) for d in dims[:-1])  # before each downsampling
        for d, n in zip(dims, depths):
            self.stages.append(nn.Sequential(*(_ConvNeXtBlock(d) for _ in range(n))))
        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = nn.Linear(dims[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def channels_last_norm(norm: nn.Module, t: torch.Tensor) -> torch.Tensor:
            return norm(t.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

        for i, (down, stage) in enumerate(zip(self.downs, self.stages)):
            if i == 0:  # the stem's norm comes after its conv, the others' before theirs
                x = channels_last_norm(self.stem_norm, down(x))
            else:
                x = down(channels_last_norm(self.down_norms[i - 1], x))
            x = stage(x)
        return self.head(self.norm(x.mean(dim=(2, 3))))


class MLPMixer(nn.Module):
    """MLP-Mixer (S/16 widths, 4 layers): per-patch embedding, token-mixing MLPs on transposed
    patches, channel-mixing MLPs, LayerNorm; no attention at all."""

    def __init__(self, layers: int = 4, hidden: int = 512, patch: int = 16, token_mlp: int = 256,
                 channel_mlp: int = 2048, num_classes: int = 1000):
        super().__init__()
        self.patch = nn.Conv2d(3, hidden, patch, stride=patch)
        self.token_mlp, self.channel_mlp, self.layers = token_mlp, channel_mlp, layers
        self.norms1 = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers))
        self.norms2 = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers))
        self.ch1 = nn.ModuleList(nn.Linear(hidden, channel_mlp) for _ in range(layers))
        self.ch2 = nn.ModuleList(nn.Linear(channel_mlp, hidden) for _ in range(layers))
        self.tok1 = self.tok2 = None  # built lazily: the token MLP's width depends on the patch count
        self.norm, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, num_classes)
        self.patch_size = patch

    def build_for(self, patches: int) -> "MLPMixer":
        g = torch.Generator().manual_seed(patches)
        self.tok1 = nn.ParameterList(nn.Parameter(torch.randn(self.token_mlp, patches, generator=g) * 0.02)
                                     for _ in range(self.layers))
        self.tok2 = nn.ParameterList(nn.Parameter(torch.randn(patches, self.token_mlp, generator=g) * 0.02)
                                     for _ in range(self.layers))
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)  # (b, patches, hidden)
        for i in range(self.layers):
            y = self.norms1[i](x).transpose(1, 2)     # (b, hidden, patches): mix along the patches
            x = x + torch.matmul(F.gelu(torch.matmul(y, self.tok1[i].t())), self.tok2[i].t()).transpose(1, 2)
            x = x + self.ch2[i](F.gelu(self.ch1[i](self.norms2[i](x))))
        return self.head(self.norm(x).mean(dim=1))

    def example_inputs(self, batch: int, size: int) -> tuple[torch.Tensor, ...]:
        self.build_for((size // self.patch_size) ** 2)
        return (torch.randn(batch, 3, size, size),)


# --------------------------------------------------------------------------- audio (1-D convolutions)


class M5(nn.Module):
    """M5 (Dai et al. 2017) raw-waveform classifier: a 80-tap stride-4 conv1d, then 3-tap conv1d
    stages with max-pooling, global average pooling."""


    def __init__(self, classes: int = 35, width: int = 64):
        super().__init__()
        chans = [width, width, 2 * width, 4 * width]
        layers: list[nn.Module] = [nn.Conv1d(1, chans[0], 80, stride=4), nn.BatchNorm1d(chans[0]), nn.ReLU(),
                                   nn.MaxPool1d(4)]
        for cin, cout in zip(chans, chans[1:]):
            layers += [nn.Conv1d(cin, cout, 3, padding=1), nn.BatchNorm1d(cout), nn.ReLU(), nn.MaxPool1d(4)]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(chans[-1], classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).mean(dim=2))

    def example_inputs(self, batch: int, size: int) -> tuple[torch.Tensor, ...]:
        return (torch.randn(batch, 1, size),)   # `size` samples of a mono waveform


class _EncoderBlock(nn.Module):
    """Pre-norm Transformer encoder block with separate Q/K/V projections (wav2vec 2.0, Whisper)."""

    def __init__(self, hidden: int, heads: int, ff: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(hidden, ff), nn.Linear(ff, hidden)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        y = self.norm1(x)
        q, k, v = (p(y).reshape(b, s, self.heads, h // self.heads).transpose(1, 2) for p in (self.q, self.k, self.v))
        att = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(h // self.heads), dim=-1)
        x = x + self.o(torch.matmul(att, v).transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Wav2Vec2(nn.Module):
    """wav2vec 2.0 (base's feature encoder, a smaller Transformer): seven conv1d layers (kernels
    10,3,3,3,3,2,2, strides 5,2,2,2,2,2,2; 320x down-sampling, GroupNorm on the first), a
    grouped conv1d positional embedding (kernel 128, 16 groups), pre-norm encoder blocks."""


    def __init__(self, layers: int = 2, hidden: int = 384, heads: int = 6, conv_dim: int = 256):
        super().__init__()
        convs: list[nn.Module] = []
        cin = 1
        for i, (k, s) in enumerate(zip((10, 3, 3, 3, 3, 2, 2), (5, 2, 2, 2, 2, 2, 2))):
            convs.append(nn.Conv1d(cin, conv_dim, k, stride=s, bias=False))
            if i == 0:
                convs.append(nn.GroupNorm(conv_dim, conv_dim))
            convs.append(nn.GELU())
            cin = conv_dim
        self.features = nn.Sequential(*convs)
        self.norm = nn.LayerNorm(conv_dim)
        self.project = nn.Linear(conv_dim, hidden)
        self.pos_conv = nn.Conv1d(hidden, hidden, 128, padding=64, groups=16)
        self.blocks = nn.Sequential(*(_EncoderBlock(hidden, heads, 4 * hidden) for _ in range(layers)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.project(self.norm(self.features(x).transpose(1, 2)))   # (b, frames, hidden)
        pos = F.gelu(self.pos_conv(f.transpose(1, 2)))[:, :, : f.shape[1]].transpose(1, 2)
        return self.blocks(f + pos)

    def example_inputs(self, batch: int, size: int) -> tuple[torch.Tensor, ...]:
        return (torch.randn(batch, 1, size),)


class WhisperEncoder(nn.Module):
    """Whisper-tiny's audio encoder: two 3-tap conv1d on 80 mel channels (the second stride 2),
    GELU, sinusoidal positions, four pre-norm encoder blocks (384 hidden, 6 heads)."""


    def __init__(self, mels: int = 80, hidden: int = 384, heads: int = 6, layers: int = 4, max_frames: int = 3000):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, hidden, 3, padding=1)
        self.conv2 = nn.Conv1d(hidden, hidden, 3, stride=2, padding=1)
        pos = torch.arange(max_frames // 2)[:, None] * torch.exp(-math.log(10000) * torch.arange(hidden // 2) / (hidden // 2))
        self.register_buffer("pos", torch.cat([pos.sin(), pos.cos()], dim=1), persistent=False)
        self.blocks = nn.Sequential(*(_EncoderBlock(hidden, heads, 4 * hidden) for _ in range(layers)))
        self.norm = nn.LayerNorm(hidden)
        self.mels = mels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.conv2(F.gelu(self.conv1(x)))).transpose(1, 2)
        return self.norm(self.blocks(x + self.pos[: x.shape[1]]))

    def example_inputs(self, batch: int, size: int) -> tuple[torch.Tensor, ...]:
        return (torch.randn(batch, self.mels, size),)   # `size` mel frames (10 ms each)


# --------------------------------------------------------------------------- video (3-D convolutions)


def _clip_inputs(batch: int, size: tuple[int, int]) -> tuple[torch.Tensor, ...]:
    frames, side = size
    return (torch.randn(batch, 3, frames, side, side),)


class _Block3d(nn.Module):
    """R3D basic block: two 3x3x3 convs (or (2+1)-D pairs) with BN and a projected shortcut."""

    def __init__(self, cin: int, cout: int, stride: int, factorized: bool):
        super().__init__()

        def conv(a: int, b: int, s: int) -> nn.Module:
            if not factorized:
                return nn.Conv3d(a, b, 3, stride=s, padding=1, bias=False)
            mid = (a * b * 27) // (a * 9 + 3 * b)   # R(2+1)D: as many parameters as the 3-D conv
            return nn.Sequential(nn.Conv3d(a, mid, (1, 3, 3), stride=(1, s, s), padding=(0, 1, 1), bias=False),
                                 nn.BatchNorm3d(mid), nn.ReLU(),
                                 nn.Conv3d(mid, b, (3, 1, 1), stride=(s, 1, 1), padding=(1, 0, 0), bias=False))

        self.body = nn.Sequential(conv(cin, cout, stride), nn.BatchNorm3d(cout), nn.ReLU(),
                                  conv(cout, cout, 1), nn.BatchNorm3d(cout))
        self.shortcut = (nn.Sequential(nn.Conv3d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm3d(cout))
                         if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.shortcut(x))


class R3D(nn.Module):
    """R3D-18 / R(2+1)D-18 (Tran et al. 2018) at half width: a 3x7x7 stem (or its (2+1)-D split),
    four stages of two blocks, 3-D global average pooling."""


    def __init__(self, factorized: bool = False, width: int = 32, classes: int = 400):
        super().__init__()
        if factorized:
            stem = nn.Sequential(nn.Conv3d(3, 45, (1, 7, 7), stride=(1, 2, 2), padding=(0, 3, 3), bias=False),
                                 nn.BatchNorm3d(45), nn.ReLU(),
                                 nn.Conv3d(45, width, (3, 1, 1), padding=(1, 0, 0), bias=False))
        else:
            stem = nn.Conv3d(3, width, (3, 7, 7), stride=(1, 2, 2), padding=(1, 3, 3), bias=False)
        layers: list[nn.Module] = [stem, nn.BatchNorm3d(width), nn.ReLU()]
        cin = width
        for i, c in enumerate((width, 2 * width, 4 * width, 8 * width)):
            layers += [_Block3d(cin, c, 1 if i == 0 else 2, factorized), _Block3d(c, c, 1, factorized)]
            cin = c
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(F.adaptive_avg_pool3d(self.features(x), 1), 1))

    def example_inputs(self, batch: int, size: tuple[int, int]) -> tuple[torch.Tensor, ...]:
        return _clip_inputs(batch, size)


# --------------------------------------------------------------------------- LLM decoder blocks


class _RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


class _LlamaBlock(nn.Module):
    """Llama decoder block: RMSNorm, rotary Q/K, grouped-query attention, SwiGLU feed-forward."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, ff: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.norm1, self.norm2 = _RMSNorm(hidden), _RMSNorm(hidden)
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.kv = nn.Linear(hidden, 2 * kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)
        self.gate_up = nn.Linear(hidden, 2 * ff, bias=False)
        self.down = nn.Linear(ff, hidden, bias=False)

    def attend(self, x, cos, sin, past_k=None, past_v=None, mask=None):
        b, s, h = x.shape
        y = self.norm1(x)
        q = self.q(y).reshape(b, s, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(y).reshape(b, s, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        if past_k is not None:
            k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        rep = self.heads // self.kv_heads
        k = k[:, :, None].expand(b, self.kv_heads, rep, k.shape[2], self.head_dim).reshape(b, self.heads, -1, self.head_dim)
        v = v[:, :, None].expand(b, self.kv_heads, rep, v.shape[2], self.head_dim).reshape(b, self.heads, -1, self.head_dim)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores + mask
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, h)
        x = x + self.o(ctx)
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Llama(nn.Module):
    """A Llama-style decoder (4 layers, 768 hidden, 12 query / 4 key-value heads, SwiGLU 2048).

    `decode=False` (`llama`): prefill, token ids (batch, seq_len) with a causal mask.
    `decode=True` (`llama_decode`): one new token per sequence attending to a KV cache of `size`
    earlier positions, given as inputs: the matrix-vector shapes of generation."""

    def __init__(self, layers: int = 4, hidden: int = 768, heads: int = 12, kv_heads: int = 4, ff: int = 2048,
                 vocab: int = BERT_VOCAB, max_positions: int = 2048, decode: bool = False):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(_LlamaBlock(hidden, heads, kv_heads, ff) for _ in range(layers))
        self.norm = _RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        d = hidden // heads
        freqs = torch.arange(max_positions)[:, None] * (10000.0 ** (-torch.arange(0, d, 2) / d))
        self.register_buffer("cos", torch.cat([freqs.cos()] * 2, dim=-1), persistent=False)
        self.register_buffer("sin", torch.cat([freqs.sin()] * 2, dim=-1), persistent=False)
        self.register_buffer("mask", torch.triu(torch.full((max_positions, max_positions), -1e9), 1),
                             persistent=False)
        self.max_positions, self.decode, self.kv_heads, self.head_dim = max_positions, decode, kv_heads, d

    def forward(self, ids: torch.Tensor, *cache: torch.Tensor) -> torch.Tensor:
        s = ids.shape[1]
        x = self.tokens(ids)
        if not self.decode:
            cos, sin = self.cos[:s], self.sin[:s]
            for blk in self.blocks:
                x = blk.attend(x, cos, sin, mask=self.mask[:s, :s])
        else:
            past = cache[0].shape[3]
            cos, sin = self.cos[past: past + s], self.sin[past: past + s]
            for i, blk in enumerate(self.blocks):
                x = blk.attend(x, cos, sin, cache[0][i], cache[1][i])
        return self.lm_head(self.norm(x))

    def example_inputs(self, batch: int, size: int) -> tuple[torch.Tensor, ...]:
        """Prefill: (batch, `size`) token ids. Decode: one token id per sequence and a
        (layers, batch, kv_heads, `size`, head_dim) K and V cache."""
        if not 1 <= size < self.max_positions:
            raise ValueError(f"{'cache' if self.decode else 'sequence'} length must be in "
                             f"[1, {self.max_positions - 1}], got {size}")
        if not self.decode:
            return (torch.randint(0, BERT_VOCAB, (batch, size), dtype=torch.int64),)
        shape = (len(self.blocks), batch, self.kv_heads, size, self.head_dim)
        return (torch.randint(0, BERT_VOCAB, (batch, 1), dtype=torch.int64), torch.randn(shape), torch.randn(shape))


# --------------------------------------------------------------------------- recommendation


class DLRM(nn.Module):
    """DLRM (Naumov et al. 2019), small: 13 dense features through a bottom MLP, 8 embedding tables
    (1000 rows, 64 wide), pairwise dot-product interactions (a batched matmul), a top MLP."""


    def __init__(self, dense: int = 13, tables: int = 8, rows: int = 1000, dim: int = 64):
        super().__init__()
        self.dense_features, self.tables = dense, tables
        self.bottom = nn.Sequential(nn.Linear(dense, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                                    nn.Linear(256, dim), nn.ReLU())
        self.emb = nn.ModuleList(nn.Embedding(rows, dim) for _ in range(tables))
        n = tables + 1
        self.register_buffer("pairs", torch.triu_indices(n, n, 1)[0] * n + torch.triu_indices(n, n, 1)[1],
                             persistent=False)
        self.top = nn.Sequential(nn.Linear(dim + n * (n - 1) // 2, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                                 nn.Linear(256, 1))
        self.rows = rows

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        feats = torch.stack([x] + [e(sparse[:, i]) for i, e in enumerate(self.emb)], dim=1)   # (b, n, dim)
        inter = torch.bmm(feats, feats.transpose(1, 2)).flatten(1)[:, self.pairs]
        return torch.sigmoid(self.top(torch.cat([x, inter], dim=1)))

    def example_inputs(self, batch: int, size: int) -> tuple[torch.Tensor, ...]:
        """`size` rows (samples scored at once; `batch` multiplies them): dense floats and one id per table."""
        n = batch * size
        return torch.randn(n, self.dense_features), torch.randint(0, self.rows, (n, self.tables), dtype=torch.int64)


class DCNv2(nn.Module):
    """DCN-v2 (Wang et al. 2021): embeddings of 26 categorical fields (16 wide) and 13 dense
    features, three full-rank cross layers x0 * (W x + b) + x beside a deep MLP, a linear head."""


    def __init__(self, dense: int = 13, fields: int = 26, rows: int = 1000, dim: int = 16, cross: int = 3):
        super().__init__()
        self.dense_features, self.fields, self.rows = dense, fields, rows
        self.emb = nn.Embedding(fields * rows, dim)
        self.register_buffer("offsets", torch.arange(fields) * rows, persistent=False)
        width = dense + fields * dim
        self.cross = nn.ModuleList(nn.Linear(width, width) for _ in range(cross))
        self.deep = nn.Sequential(nn.Linear(width, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU())
        self.head = nn.Linear(width + 256, 1)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        x0 = torch.cat([dense, self.emb(sparse + self.offsets).flatten(1)], dim=1)
        x = x0
        for layer in self.cross:
            x = x0 * layer(x) + x
        return torch.sigmoid(self.head(torch.cat([x, self.deep(x0)], dim=1)))

    def example_inputs(self, batch: int, size: int) -> tuple[torch.Tensor, ...]:
        n = batch * size
        return torch.randn(n, self.dense_features), torch.randint(0, self.rows, (n, self.fields), dtype=torch.int64)


# --------------------------------------------------------------------------- registry

FAMILIES = {
    "unet": UNet,
    "deeplab_v3": DeepLabV3,
    "yolo_tiny": YoloTiny,
    "espcn": ESPCN,
    "mobilenet_v3": MobileNetV3Small,
    "shufflenet_v2": ShuffleNetV2,
    "convnext": ConvNeXt,
    "mlp_mixer": MLPMixer,
    "deit_tiny": lambda: ViT(layers=12, hidden=192, heads=3),
    "m5": M5,
    "wav2vec2": Wav2Vec2,
    "whisper_enc": WhisperEncoder,
    "r3d18": R3D,
    "r2plus1d18": lambda: R3D(factorized=True),
    "llama": Llama,
    "llama_decode": lambda: Llama(decode=True),
    "dlrm": DLRM,
    "dcn_v2": DCNv2,
}

# Input kind of each family network that does not take images (see inputs.py).
FAMILY_KINDS = {"m5": "audio", "wav2vec2": "audio", "whisper_enc": "audio", "r3d18": "video",
                "r2plus1d18": "video", "llama": "tokens", "llama_decode": "decode", "dlrm": "tabular",
                "dcn_v2": "tabular"}
