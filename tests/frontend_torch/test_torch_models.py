"""PyTorch importer: small models imported with torch.export, compiled with ingot.graph.build and
compared with PyTorch eager outputs (rtol/atol 1e-4)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.frontend.torch import from_exported_program, from_fx  # noqa: E402

nn = torch.nn
F = torch.nn.functional


def _compile(mod):
    return G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"]


def _numpy(out):
    return tuple(o.numpy() for o in out) if isinstance(out, tuple) else out.numpy()


def _check(module, args, dynamic_shapes=None, more_args=(), **kwargs):
    """Import ``module`` exported on ``args``, run it on ``args`` (and each tuple in ``more_args``,
    which must fit the dynamic shapes) and compare with PyTorch."""
    module = module.eval()
    ep = torch.export.export(module, tuple(args), dynamic_shapes=dynamic_shapes)
    mod, params = from_exported_program(ep, **kwargs)
    if params:
        mod = G.transform.BindParams("main", params)(mod)
    run = _compile(mod)
    for inputs in [tuple(args)] + list(more_args):
        with torch.no_grad():
            expected = module(*inputs)
        got = _numpy(run(*[a.numpy() for a in inputs]))
        expected = tuple(e.numpy() for e in expected) if isinstance(expected, tuple) else expected.numpy()
        if isinstance(expected, tuple):
            for g, e in zip(got, expected):
                np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)
        else:
            assert got.shape == expected.shape
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    return mod


def _randomize_bn(module):
    # Fresh BatchNorms have mean 0 / var 1: give them real statistics so the test means something.
    g = torch.Generator().manual_seed(1)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return module


def setup_module():
    torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(32, 64), nn.Linear(64, 10)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.gelu(self.fc1(x))), dim=-1)


def test_mlp_dynamic_batch():
    batch = torch.export.Dim("batch", min=1, max=64)
    mod = _check(MLP(), (torch.randn(3, 32),), dynamic_shapes={"x": {0: batch}},
                 more_args=[(torch.randn(8, 32),), (torch.randn(1, 32),)])
    sinfo = mod["main"].params[0].struct_info
    assert str(sinfo.shape[0]) == "batch" and sinfo.shape[1] == 32
    assert str(mod["main"].ret_struct_info) == 'R.Tensor((batch, 10), dtype="float32")'


class ConvBnRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


def test_conv_bn_relu_keep_params_as_input():
    module = _randomize_bn(ConvBnRelu())
    ep = torch.export.export(module.eval(), (torch.randn(1, 3, 16, 16),))
    mod, params = from_exported_program(ep, keep_params_as_input=True)
    names = [p.name_hint for p in mod["main"].params]
    assert names[0] == "x" and set(names[1:]) == set(params)
    assert "b_bn_num_batches_tracked" not in params  # unused buffers are not parameters
    _check(module, (torch.randn(1, 3, 16, 16),), keep_params_as_input=True)


class BasicBlock(nn.Module):
    """ResNet's basic block with a strided 1x1 downsample."""

    def __init__(self, cin=8, cout=16, stride=2):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        self.pool = nn.MaxPool2d(3, 2, 1)

    def forward(self, x):
        x = self.pool(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = F.relu(out + self.down(x))
        return torch.flatten(F.adaptive_avg_pool2d(out, (1, 1)), 1)


def test_resnet_basic_block_dynamic_batch():
    batch = torch.export.Dim("batch", min=1, max=32)
    _check(_randomize_bn(BasicBlock()), (torch.randn(2, 8, 16, 16),), dynamic_shapes={"x": {0: batch}},
           more_args=[(torch.randn(3, 8, 16, 16),)])


def test_resnet_basic_block_core_aten():
    # After run_decompositions: convolution, _native_batch_norm_legit_no_training + getitem,
    # max_pool2d_with_indices, mean.dim, view.
    _check(_randomize_bn(BasicBlock()), (torch.randn(1, 8, 16, 16),), run_decompositions=True)


class MobileNetBlock(nn.Module):
    """Inverted residual: 1x1 expand, 3x3 depthwise, 1x1 project, residual."""

    def __init__(self, c=8, expand=4):
        super().__init__()
        hidden = c * expand
        self.expand = nn.Sequential(nn.Conv2d(c, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(hidden, hidden, 3, 1, 1, groups=hidden, bias=False),
                                nn.BatchNorm2d(hidden), nn.Hardswish())
        self.project = nn.Sequential(nn.Conv2d(hidden, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.project(self.dw(self.expand(x)))


def test_mobilenet_depthwise_block():
    _check(_randomize_bn(MobileNetBlock()), (torch.randn(1, 8, 12, 12),))


def _encoder_layer():
    return nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)


def test_transformer_encoder_layer():
    # nn.MultiheadAttention inside: linear, unflatten, select, view, transpose, sdpa, layer_norm.
    _check(_encoder_layer(), (torch.randn(2, 6, 32),))


def test_transformer_encoder_layer_dynamic_batch():
    layer = _encoder_layer()
    batch = torch.export.Dim("batch", min=1, max=16)
    mod = _check(layer, (torch.randn(2, 6, 32),), dynamic_shapes={"src": {0: batch}},
                 more_args=[(torch.randn(3, 6, 32),)])
    assert str(mod["main"].params[0].struct_info) == 'R.Tensor((batch, 6, 32), dtype="float32")'


class Attention(nn.Module):
    """Hand-written causal attention with a CLS token expanded over the (dynamic) batch."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.cls = nn.Parameter(torch.randn(1, 1, dim))

    def forward(self, x):
        b, n, d = x.shape
        x = torch.cat([self.cls.expand(b, -1, -1), x], dim=1)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, n + 1, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=False)
        att = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        y2 = att.softmax(-1) @ v
        y = (y + y2).transpose(1, 2).reshape(b, n + 1, d)
        return self.out(y)[:, 0]


def test_handwritten_attention_with_cls_token_dynamic_batch():
    batch = torch.export.Dim("batch", min=1, max=16)
    _check(Attention(), (torch.randn(2, 5, 16),), dynamic_shapes={"x": {0: batch}},
           more_args=[(torch.randn(4, 5, 16),)])


def test_from_fx_symbolic_trace():
    gm = torch.fx.symbolic_trace(MLP().eval())
    mod, params = from_fx(gm, [(("n", 32), "float32")])
    assert not params
    assert str(mod["main"].params[0].struct_info) == 'R.Tensor((n, 32), dtype="float32")'
    x = torch.randn(4, 32)
    np.testing.assert_allclose(_compile(mod)(x.numpy()).numpy(), gm(x).detach().numpy(), rtol=1e-4, atol=1e-4)
