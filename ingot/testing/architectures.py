"""Real architectures in plain ``torch.nn`` (random weights), shared by the benchmarks (``benchmarks/models.py``,
real sizes) and the tests (``tests/models``, small sizes). Importing this module imports torch (the
classes subclass ``nn.Module``); `ingot.testing` itself does not.

Note: torchvision is not installable here (no network), so each network is written out following
torchvision's / the paper's structure. Every class takes width/depth knobs so that the tests can
build a reduced version that keeps the characteristic ops (DenseNet's concat + BN-ReLU-conv,
Inception's parallel branches, SqueezeNet's fire modules and ceil-mode pools, ShuffleNetV2's channel
shuffle, SE blocks with hardswish/SiLU, GPT-2's causal mask and tanh-GELU, ViT's patch embedding) while
compiling in a few seconds. ``build(name, size)`` is the one entry point; ``FULL`` lists the real-size
models with their input shapes.

Example:
    >>> module, x = build("squeezenet1_1", "small")      # doctest: +SKIP
    >>> module(torch.from_numpy(x)).shape                  # doctest: +SKIP
    torch.Size([1, 10])
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["build", "NAMES", "randomize_bn"]


def _conv_bn(cin, cout, k, stride=1, pad=0, groups=1, act=nn.ReLU):
    layers = [nn.Conv2d(cin, cout, k, stride, pad, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*(layers + ([act()] if act is not None else [])))


# -- ResNet-50 ----------------------------------------------------------------------------------


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    """torchvision's resnet50 (v1.5: stride on the 3x3), ``layers=(3, 4, 6, 3)``."""

    def __init__(self, layers=(3, 4, 6, 3), base=64, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, base, 7, 2, 3, bias=False), nn.BatchNorm2d(base), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], base
        for i, n in enumerate(layers):
            width = base * 2 ** i
            for j in range(n):
                blocks.append(Bottleneck(cin, width, 2 if j == 0 and i > 0 else 1))
                cin = width * 4
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        y = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


# -- MobileNetV2 --------------------------------------------------------------------------------


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
        layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
                   nn.ReLU6(), nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    """torchvision's mobilenet_v2 (width 1.0): (t, c, n, s) settings, 1280-wide head."""

    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))

    def __init__(self, classes=1000, scale=1.0):
        super().__init__()
        c = lambda v: max(8, int(v * scale))  # noqa: E731
        cin = c(32)
        layers = [nn.Conv2d(3, cin, 3, 2, 1, bias=False), nn.BatchNorm2d(cin), nn.ReLU6()]
        for t, ch, n, s in self.SETTINGS:
            for j in range(n):
                layers.append(InvertedResidual(cin, c(ch), s if j == 0 else 1, t))
                cin = c(ch)
        last = c(1280)
        layers += [nn.Conv2d(cin, last, 1, bias=False), nn.BatchNorm2d(last), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(last, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# -- a tiny conv net ----------------------------------------------------------------------------


class TinyConvNet(nn.Module):
    """Stem conv, depthwise conv, 1x1 projection with a residual, global mean, classifier: the smallest
    network with each conv kind a CNN export has (for dynamic-shape tests).

    Example:
        >>> TinyConvNet()(torch.zeros(2, 3, 16, 16)).shape
        torch.Size([2, 10])
    """

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pw = nn.Conv2d(16, 16, 1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.stem(x))
        y = y + self.pw(torch.clamp(self.dw(y), 0.0, 6.0))
        return self.fc(y.mean((2, 3)))


# -- BERT encoder -------------------------------------------------------------------------------


class Encoder(nn.Module):
    """BERT-base-style encoder stack (post-LN, GELU), input = embeddings (batch, seq, hidden)."""

    def __init__(self, layers=12, hidden=768, heads=12, ffn=3072):
        super().__init__()
        layer = nn.TransformerEncoderLayer(hidden, heads, ffn, dropout=0.0, activation="gelu", batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, x):
        return self.enc(x)


# -- DenseNet-121 -------------------------------------------------------------------------------


class DenseLayer(nn.Module):
    """BN-ReLU-conv1x1 (bottleneck to ``bn_size * growth``) then BN-ReLU-conv3x3 to ``growth`` channels."""

    def __init__(self, cin, growth, bn_size):
        super().__init__()
        self.body = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, bn_size * growth, 1, bias=False),
                                  nn.BatchNorm2d(bn_size * growth), nn.ReLU(),
                                  nn.Conv2d(bn_size * growth, growth, 3, 1, 1, bias=False))

    def forward(self, feats):
        # torchvision concatenates every earlier feature map before each layer.
        return self.body(torch.cat(feats, 1))


class DenseNet(nn.Module):
    """torchvision's densenet121: growth 32, blocks (6, 12, 24, 16), transitions halve the channels."""

    def __init__(self, growth=32, blocks=(6, 12, 24, 16), init=64, bn_size=4, classes=1000, small_stem=False):
        super().__init__()
        if small_stem:
            self.stem = nn.Sequential(nn.Conv2d(3, init, 3, 1, 1, bias=False), nn.BatchNorm2d(init), nn.ReLU())
        else:
            self.stem = nn.Sequential(nn.Conv2d(3, init, 7, 2, 3, bias=False), nn.BatchNorm2d(init), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
        self.blocks, self.transitions = nn.ModuleList(), nn.ModuleList()
        c = init
        for i, n in enumerate(blocks):
            layers = nn.ModuleList()
            for j in range(n):
                layers.append(DenseLayer(c + j * growth, growth, bn_size))
            self.blocks.append(layers)
            c += n * growth
            if i != len(blocks) - 1:
                self.transitions.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False),
                                                      nn.AvgPool2d(2, 2)))
                c //= 2
        self.norm = nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        y = self.stem(x)
        for i, layers in enumerate(self.blocks):
            feats = [y]
            for layer in layers:
                feats.append(layer(feats))
            y = torch.cat(feats, 1)
            if i < len(self.transitions):
                y = self.transitions[i](y)
        y = F.relu(self.norm(y))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


# -- GoogLeNet (Inception v1) -------------------------------------------------------------------


class Inception(nn.Module):
    """Four parallel branches concatenated: 1x1 | 1x1-3x3 | 1x1-3x3 | pool-1x1 (torchvision's GoogLeNet
    uses 3x3 where the paper has 5x5). ``pool="avg"`` gives Inception-v3's average-pool branch."""

    def __init__(self, cin, c1, c3r, c3, c5r, c5, cp, pool="max"):
        super().__init__()
        self.b1 = _conv_bn(cin, c1, 1)
        self.b2 = nn.Sequential(_conv_bn(cin, c3r, 1), _conv_bn(c3r, c3, 3, pad=1))
        self.b3 = nn.Sequential(_conv_bn(cin, c5r, 1), _conv_bn(c5r, c5, 3, pad=1))
        pool_layer = nn.MaxPool2d(3, 1, 1, ceil_mode=True) if pool == "max" else nn.AvgPool2d(3, 1, 1)
        self.b4 = nn.Sequential(pool_layer, _conv_bn(cin, cp, 1))

    def forward(self, x):
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


class GoogLeNet(nn.Module):
    """torchvision's googlenet (no aux heads): stem, 9 inception modules, ceil-mode max-pools.

    ``scale`` divides every width; ``stages`` keeps the first inception modules only (small versions).
    """

    CFG = ((192, 64, 96, 128, 16, 32, 32), (256, 128, 128, 192, 32, 96, 64), "M",
           (480, 192, 96, 208, 16, 48, 64), (512, 160, 112, 224, 24, 64, 64), (512, 128, 128, 256, 24, 64, 64),
           (512, 112, 144, 288, 32, 64, 64), (528, 256, 160, 320, 32, 128, 128), "M",
           (832, 256, 160, 320, 32, 128, 128), (832, 384, 192, 384, 48, 128, 128))

    def __init__(self, classes=1000, scale=1, stages=None, pool="max"):
        super().__init__()
        s = lambda v: max(4, v // scale)  # noqa: E731
        self.stem = nn.Sequential(_conv_bn(3, s(64), 7, 2, 3), nn.MaxPool2d(3, 2, ceil_mode=True),
                                  _conv_bn(s(64), s(64), 1), _conv_bn(s(64), s(192), 3, pad=1),
                                  nn.MaxPool2d(3, 2, ceil_mode=True))
        layers, c = [], s(192)
        for item in self.CFG[:stages]:
            if item == "M":
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=True))
                continue
            _, c1, c3r, c3, c5r, c5, cp = (s(v) for v in item)
            layers.append(Inception(c, c1, c3r, c3, c5r, c5, cp, pool))
            c = c1 + c3 + c5 + cp
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.body(self.stem(x)), 1), 1))


# -- VGG-19 -------------------------------------------------------------------------------------


class VGG(nn.Module):
    """torchvision's vgg19 (no BN): 16 stacked 3x3 convs in 5 max-pooled stages, 4096-wide FC head.

    ``pool_to`` is the adaptive-average-pool size before the classifier (7 in torchvision; None skips it).
    """

    CFG19 = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M")

    def __init__(self, cfg=CFG19, fc=4096, classes=1000, scale=1, pool_to=7):
        super().__init__()
        layers, c = [], 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, v // scale, 3, 1, 1), nn.ReLU()]
                c = v // scale
        self.features = nn.Sequential(*layers)
        self.pool_to = pool_to
        flat = c * (pool_to or 1) ** 2
        self.classifier = nn.Sequential(nn.Linear(flat, fc), nn.ReLU(), nn.Dropout(), nn.Linear(fc, fc), nn.ReLU(),
                                        nn.Dropout(), nn.Linear(fc, classes))

    def forward(self, x):
        y = self.features(x)
        if self.pool_to:
            y = F.adaptive_avg_pool2d(y, self.pool_to)
        return self.classifier(torch.flatten(y, 1))


# -- SqueezeNet 1.1 -----------------------------------------------------------------------------


class Fire(nn.Module):
    """Squeeze 1x1 then two parallel expand convs (1x1 and 3x3) concatenated."""

    def __init__(self, cin, squeeze, e1, e3):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.e1, self.e3 = nn.Conv2d(squeeze, e1, 1), nn.Conv2d(squeeze, e3, 3, padding=1)

    def forward(self, x):
        s = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.e1(s)), F.relu(self.e3(s))], 1)


class SqueezeNet(nn.Module):
    """torchvision's squeezenet1_1: fire modules between ceil-mode 3x3/2 max-pools, conv classifier."""

    CFG = ((16, 64), (16, 64), "M", (32, 128), (32, 128), "M", (48, 192), (48, 192), (64, 256), (64, 256))

    def __init__(self, classes=1000, scale=1, stages=None):
        super().__init__()
        s = lambda v: max(4, v // scale)  # noqa: E731
        layers, c = [nn.Conv2d(3, s(64), 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True)], s(64)
        for item in self.CFG[:stages]:
            if item == "M":
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=True))
                continue
            layers.append(Fire(c, s(item[0]), s(item[1]), s(item[1])))
            c = 2 * s(item[1])
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(), nn.Conv2d(c, classes, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


# -- ShuffleNetV2 -------------------------------------------------------------------------------


def channel_shuffle(x, groups):
    b, c, h, w = x.shape
    return x.view(b, groups, c // groups, h, w).transpose(1, 2).reshape(b, c, h, w)


class ShuffleUnit(nn.Module):
    """ShuffleNetV2's unit: stride 1 splits the channels in half (identity | 1x1-dw3x3-1x1), stride 2
    runs two branches on the whole input; both concatenate and shuffle the channels."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        half = cout // 2
        bin_ = cin if stride > 1 else half
        if stride > 1:
            self.left = nn.Sequential(_conv_bn(cin, cin, 3, stride, 1, groups=cin, act=None), _conv_bn(cin, half, 1))
        self.right = nn.Sequential(_conv_bn(bin_, half, 1), _conv_bn(half, half, 3, stride, 1, groups=half, act=None),
                                   _conv_bn(half, half, 1))

    def forward(self, x):
        if self.stride == 1:
            a, b = x.chunk(2, dim=1)
            out = torch.cat([a, self.right(b)], 1)
        else:
            out = torch.cat([self.left(x), self.right(x)], 1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """torchvision's shufflenet_v2_x1_0: repeats (4, 8, 4), channels (24, 116, 232, 464, 1024)."""

    def __init__(self, repeats=(4, 8, 4), channels=(24, 116, 232, 464, 1024), classes=1000):
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(3, channels[0], 3, 2, 1), nn.MaxPool2d(3, 2, 1))
        layers, c = [], channels[0]
        for n, cout in zip(repeats, channels[1:-1]):
            for j in range(n):
                layers.append(ShuffleUnit(c, cout, 2 if j == 0 else 1))
                c = cout
        self.stages = nn.Sequential(*layers)
        self.head = _conv_bn(c, channels[-1], 1)
        self.fc = nn.Linear(channels[-1], classes)

    def forward(self, x):
        y = self.head(self.stages(self.stem(x)))
        return self.fc(y.mean([2, 3]))


# -- MobileNetV3 / EfficientNet (SE blocks) -----------------------------------------------------


class SqueezeExcite(nn.Module):
    """Global average pool, 1x1 reduce + ReLU/SiLU, 1x1 expand + (hard)sigmoid gate, channel-wise scale."""

    def __init__(self, c, reduced, act=nn.ReLU, gate=nn.Hardsigmoid):
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(c, reduced, 1), nn.Conv2d(reduced, c, 1)
        self.act, self.gate = act(), gate()

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.expand(self.act(self.reduce(s))))


class MBConv(nn.Module):
    """Inverted residual with an optional SE block: 1x1 expand, kxk depthwise, SE, 1x1 project."""

    def __init__(self, cin, hidden, cout, k, stride, se, act, gate, se_act=nn.ReLU, se_ratio=4):
        super().__init__()
        layers = []
        if hidden != cin:
            layers.append(_conv_bn(cin, hidden, 1, act=act))
        layers.append(_conv_bn(hidden, hidden, k, stride, k // 2, groups=hidden, act=act))
        if se:
            base = cin if gate is nn.Sigmoid else hidden   # EfficientNet reduces from the block input width
            layers.append(SqueezeExcite(hidden, max(4, base // se_ratio), se_act, gate))
        layers.append(_conv_bn(hidden, cout, 1, act=None))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV3(nn.Module):
    """torchvision's mobilenet_v3_small blocks (k, hidden, out, SE, hardswish, stride), hardswish head."""

    CFG = ((3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2), (3, 88, 24, False, False, 1),
           (5, 96, 40, True, True, 2), (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
           (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1), (5, 288, 96, True, True, 2),
           (5, 576, 96, True, True, 1), (5, 576, 96, True, True, 1))

    def __init__(self, classes=1000, scale=1, blocks=None, last=1024):
        super().__init__()
        s = lambda v: max(8, v // scale)  # noqa: E731
        self.stem = _conv_bn(3, s(16), 3, 2, 1, act=nn.Hardswish)
        layers, c = [], s(16)
        for k, hidden, out, se, hs, stride in self.CFG[:blocks]:
            layers.append(MBConv(c, s(hidden), s(out), k, stride, se, nn.Hardswish if hs else nn.ReLU,
                                 nn.Hardsigmoid))
            c = s(out)
        self.blocks = nn.Sequential(*layers)
        self.head = _conv_bn(c, s(6 * 96) if blocks is None else 6 * c, 1, act=nn.Hardswish)
        width = s(6 * 96) if blocks is None else 6 * c
        self.fc = nn.Sequential(nn.Linear(width, s(last)), nn.Hardswish(), nn.Dropout(), nn.Linear(s(last), classes))

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.head(self.blocks(self.stem(x))), 1), 1))


class EfficientNet(nn.Module):
    """EfficientNet-B0: MBConv stages (expand, k, stride, out, repeats) with SiLU and sigmoid SE blocks."""

    CFG = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
           (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))

    def __init__(self, classes=1000, scale=1, stages=None, depth=None):
        super().__init__()
        s = lambda v: max(8, v // scale)  # noqa: E731
        self.stem = _conv_bn(3, s(32), 3, 2, 1, act=nn.SiLU)
        layers, c = [], s(32)
        for expand, k, stride, out, n in self.CFG[:stages]:
            for j in range(n if depth is None else min(n, depth)):
                layers.append(MBConv(c, c * expand, s(out), k, stride if j == 0 else 1, True, nn.SiLU, nn.Sigmoid,
                                     nn.SiLU))
                c = s(out)
        self.blocks = nn.Sequential(*layers)
        self.head = _conv_bn(c, 4 * c if stages else s(1280), 1, act=nn.SiLU)
        self.fc = nn.Linear(4 * c if stages else s(1280), classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.head(self.blocks(self.stem(x))), 1), 1))


# -- GPT-2 decoder ------------------------------------------------------------------------------


class GPT2Block(nn.Module):
    """Pre-LN decoder block: causal multi-head self-attention (one fused qkv projection), tanh-GELU MLP."""

    def __init__(self, hidden, heads, ctx):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc, self.out = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)).view(1, 1, ctx, ctx))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    """GPT-2 (124M: 12 layers, hidden 768, 12 heads): token + position embeddings, decoder blocks,
    final LayerNorm, logits through the tied embedding matrix. Input: int64 token ids (batch, seq)."""

    def __init__(self, vocab=50257, ctx=1024, hidden=768, heads=12, layers=12):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, hidden), nn.Embedding(ctx, hidden)
        self.blocks = nn.Sequential(*(GPT2Block(hidden, heads, ctx) for _ in range(layers)))
        self.ln = nn.LayerNorm(hidden)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], dtype=torch.int64).unsqueeze(0)
        y = self.ln(self.blocks(self.wte(ids) + self.wpe(pos)))
        return y @ self.wte.weight.t()


# -- ViT ----------------------------------------------------------------------------------------


class ViT(nn.Module):
    """ViT-B/16: conv patch embedding, class token, learned position embedding, pre-LN encoder, head."""

    def __init__(self, image=224, patch=16, hidden=768, heads=12, layers=12, mlp=3072, classes=1000):
        super().__init__()
        self.patch = nn.Conv2d(3, hidden, patch, patch)
        n = (image // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, hidden) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, hidden) * 0.02)
        layer = nn.TransformerEncoderLayer(hidden, heads, mlp, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ln, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, classes)

    def forward(self, x):
        y = self.patch(x).flatten(2).transpose(1, 2)
        y = torch.cat([self.cls.expand(x.shape[0], -1, -1), y], 1) + self.pos
        return self.head(self.ln(self.enc(y))[:, 0])


# -- the registry -------------------------------------------------------------------------------


def randomize_bn(module: nn.Module, seed: int = 1) -> nn.Module:
    """Random BatchNorm statistics/affine (fresh BN layers are identities, which hides folding bugs).

    Example:
        >>> m = randomize_bn(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)))   # doctest: +SKIP
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return module


def _image(n):
    return ("image", (1, 3, n, n))


# name: (full-size factory, full input, small factory, small input). Inputs: ("image", shape) is a
# standard-normal float32 tensor, ("tokens", shape, vocab) int64 token ids.
_ZOO = {
    "resnet50": (lambda: ResNet(), _image(224), lambda: ResNet((1, 1, 1, 1), 8, 10), _image(32)),
    "mobilenet_v2": (lambda: MobileNetV2(), _image(224), lambda: MobileNetV2(10, 0.25), _image(32)),
    "bert": (lambda: Encoder(), ("embeddings", (1, 128, 768)), lambda: Encoder(1, 32, 4, 64),
             ("embeddings", (1, 8, 32))),
    "densenet121": (lambda: DenseNet(), _image(224),
                    lambda: DenseNet(8, (1, 1), 16, 2, 10, small_stem=True), _image(16)),
    "googlenet": (lambda: GoogLeNet(), _image(224), lambda: GoogLeNet(10, 16, 1, pool="avg"), _image(48)),
    "vgg19": (lambda: VGG(), _image(224),
              lambda: VGG((16, 16, "M", 32, 32, "M"), 64, 10, pool_to=2), _image(8)),
    "squeezenet1_1": (lambda: SqueezeNet(), _image(224), lambda: SqueezeNet(10, 8, stages=4), _image(47)),
    "shufflenet_v2": (lambda: ShuffleNetV2(), _image(224),
                      lambda: ShuffleNetV2((1, 1), (8, 16, 32, 64), 10), _image(32)),
    "mobilenet_v3_small": (lambda: MobileNetV3(), _image(224), lambda: MobileNetV3(10, 4, blocks=2, last=32),
                           _image(32)),
    "efficientnet_b0": (lambda: EfficientNet(), _image(224), lambda: EfficientNet(10, 4, stages=2, depth=1),
                        _image(32)),
    "gpt2": (lambda: GPT2(), ("tokens", (1, 128), 50257), lambda: GPT2(64, 16, 32, 4, 1), ("tokens", (1, 8), 64)),
    "vit_b16": (lambda: ViT(), _image(224), lambda: ViT(16, 4, 32, 4, 1, 64, 10), _image(16)),
}

NAMES = tuple(_ZOO)


def build(name: str, size: str = "full", seed: int = 0):
    """``(module in eval mode, example input as numpy)`` for the architecture ``name`` at ``size``
    ("full": the real network at 224x224 / its real sequence length; "small": a reduced version for CI).

    Example:
        >>> m, x = build("vgg19", "small")        # doctest: +SKIP
        >>> x.shape                                # doctest: +SKIP
        (1, 3, 16, 16)
    """
    if name not in _ZOO:
        raise KeyError(f"unknown architecture {name!r}; choose from {', '.join(NAMES)}")
    if size not in ("full", "small"):
        raise ValueError(f"size must be 'full' or 'small', got {size!r}")
    full, full_in, small, small_in = _ZOO[name]
    torch.manual_seed(seed)
    module = randomize_bn((full if size == "full" else small)(), seed + 1).eval()
    spec = full_in if size == "full" else small_in
    rng = np.random.default_rng(seed)
    if spec[0] == "tokens":
        x = rng.integers(0, spec[2], spec[1]).astype("int64")
    else:
        x = rng.standard_normal(spec[1]).astype("float32")
    return module, x
