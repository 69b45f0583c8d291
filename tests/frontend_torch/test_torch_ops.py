"""PyTorch importer: operator coverage in one compiled module, imported IR vs hand-built IR,
weight-only subgraphs evaluated by PyTorch, and the errors (all unsupported ops at once)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ingot import graph as G  # noqa: E402
from ingot.frontend import ConversionError, UnsupportedOpsError  # noqa: E402
from ingot.frontend.torch import (  # noqa: E402
    UnsupportedTorchOpsError, find_unsupported, from_exported_program, supported_ops,
)
from ingot.ir import structural_equal  # noqa: E402

nn = torch.nn
F = torch.nn.functional


def _export(module, *args, **kwargs):
    return torch.export.export(module.eval(), args, **kwargs)


class ManyOps(nn.Module):
    """One module touching most converters (each output is compared with PyTorch)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.conv1d = nn.Conv1d(6, 4, 3, padding=1)
        self.gn = nn.GroupNorm(2, 6)
        self.w = nn.Parameter(torch.randn(8, 5))
        self.b = nn.Parameter(torch.randn(5))

    def forward(self, x, ids, mask):
        outs = []
        outs.append(torch.cat([x[:, 1:5:2], x.select(1, -1).unsqueeze(1), x.narrow(2, 2, 3).sum(-1, keepdim=True)
                               .expand(-1, -1, 8)], dim=1))
        a, b, c = x.chunk(3, dim=1)
        outs.append(torch.stack([a, c], dim=0) - b)
        outs.append(sum(t.squeeze(1) for t in x.split([1, 5], dim=1)[0:1]) * x.unbind(1)[2])
        outs.append(F.pad(x, (1, 2, 0, 1), value=0.5))
        outs.append(x.masked_fill(mask, -1.0) + torch.where(mask, x, 0.0))
        outs.append(x.var(-1, keepdim=True, unbiased=False) + x.std(1, keepdim=True))
        outs.append(x.pow(3) + x ** 2 + x.clamp(-0.5, 0.5) + F.hardsigmoid(x) + F.leaky_relu(x, 0.2)
                    + F.softplus(x) + F.silu(x) + F.relu6(x) + torch.sigmoid(x) * torch.tanh(x))
        outs.append(self.emb(ids) + 1.0)
        outs.append(x.max(dim=-1).values + x.amax(1).sum() + x.mean((1, 2)).unsqueeze(-1))
        outs.append(x.permute(2, 0, 1).transpose(0, 1).reshape(2, -1))
        outs.append((x > 0).float() + (x <= 0.5).to(torch.float32) * 2 + (1 - x) / (x.abs() + 1))
        outs.append((ids // 3).float() + ids.float() / 3 + ids.remainder(3) + torch.remainder(x, 0.3).sum())
        outs.append(self.conv1d(x) + F.group_norm(x.unsqueeze(-1), 2).squeeze(-1).sum(1, keepdim=True))
        outs.append(torch.addmm(self.b, x.reshape(-1, 8), self.w) + torch.matmul(x, self.w).reshape(-1, 5))
        outs.append(torch.bmm(x, x.transpose(1, 2)) + torch.zeros_like(x[..., :6]) + torch.ones(6))
        outs.append(F.layer_norm(x, (8,)) + F.gelu(x, approximate="tanh") + torch.cumsum(x, dim=2))
        outs.append(self.gn(x.unsqueeze(-1)).squeeze(-1) + torch.rsqrt(x * x + 1) + torch.exp(-x.abs()))
        outs.append(F.elu(x, 0.5) + F.normalize(x, dim=-1) + x[:, ids[0, :3] % 6].sum(1, keepdim=True))
        return tuple(outs)


class Pools(nn.Module):
    def forward(self, x):
        return (F.max_pool2d(x, 3, 2, 1, ceil_mode=True), F.avg_pool2d(x, 2, ceil_mode=True, count_include_pad=False),
                F.avg_pool2d(x, 3, 1, 1), F.adaptive_avg_pool2d(x, (2, 2)), F.log_softmax(x, 1),
                F.conv2d(x, torch.ones(3, 1, 3, 3), padding="same", groups=3))


@pytest.mark.parametrize("module, make_args", [
    (ManyOps, lambda: (torch.randn(2, 6, 8), torch.randint(0, 10, (2, 5)), torch.randn(2, 6, 8) > 0)),
    (Pools, lambda: (torch.randn(1, 3, 9, 9),)),
])
def test_ops_vs_pytorch(module, make_args):
    import ingot

    torch.manual_seed(0)
    m = module().eval()
    args = make_args()
    mod, _ = from_exported_program(_export(m, *args))
    got = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](*[a.numpy() for a in args])
    with torch.no_grad():
        expected = m(*args)
    assert len(got) == len(expected)
    for index, (g, e) in enumerate(zip(got, expected)):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-4, atol=1e-4, err_msg=f"output {index}")


def test_imported_ir_matches_hand_built_ir():
    class M(nn.Module):
        def forward(self, x):
            return torch.relu(x).transpose(0, 1) * 2.0

    mod, params = from_exported_program(_export(M(), torch.randn(2, 3)))
    assert params == {}
    x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(G.op.relu(x))
            lv1 = bb.emit(G.op.permute_dims(lv0, (1, 0)))
            lv2 = bb.emit(G.op.multiply(lv1, G.const(np.array(2.0, "float32"))))
            gv = bb.emit_output(lv2)
        bb.emit_func_output(gv)
    assert structural_equal(mod["main"], bb.get()["main"])


def test_weight_only_subgraphs_are_evaluated_by_pytorch():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 4))

        def forward(self, x):
            # flip/triu have no converter; on a weight only they are folded at import time.
            return x @ torch.triu(self.w.flip(0)) + torch.arange(4, dtype=torch.float32)

    m = M()
    ep = _export(m, torch.randn(2, 4))
    assert find_unsupported(ep) == {}
    mod, _ = from_exported_program(ep)
    const = [b.value.args[1] for b in mod["main"].body.blocks[0].bindings if isinstance(b.value, G.Call)
             and b.value.op.name == "matmul"][0]
    np.testing.assert_allclose(const.data, torch.triu(m.w.flip(0)).detach().numpy())
    # With the weights as inputs the same ops touch a graph input: now they need converters.
    assert set(find_unsupported(ep, keep_params_as_input=True)) == {"aten.flip.default", "aten.triu.default"}


def test_unsupported_ops_are_all_listed_with_counts():
    class M(nn.Module):
        def forward(self, x):
            y = x.flip(0) + x.flip(1)
            return torch.topk(y, 2).values, torch.triu(y)

    ep = _export(M(), torch.randn(4, 4))
    with pytest.raises(UnsupportedTorchOpsError) as info:
        from_exported_program(ep)
    err = info.value
    assert isinstance(err, UnsupportedOpsError)
    assert err.ops == {"aten.flip.default": ["flip", "flip_1"], "aten.topk.default": ["topk"],
                       "aten.triu.default": ["triu"]}
    first = str(err).splitlines()[0]
    assert "3 unsupported operator type(s)" in first and "aten.flip.default (2 nodes, e.g. flip, flip_1)" in first
    assert "supported_ops()" in str(err)


def test_training_mode_batch_norm_is_a_clear_error():
    bn = nn.BatchNorm2d(3).train()
    ep = torch.export.export(bn, (torch.randn(2, 3, 4, 4),))
    with pytest.raises(ConversionError, match=r"eval\(\)"):
        from_exported_program(ep)


def test_not_an_exported_program():
    with pytest.raises(ConversionError, match="torch.export.export"):
        from_exported_program(nn.Linear(2, 2))


def test_supported_ops_lists_the_table():
    ops = supported_ops()
    for key in ("aten.convolution.default", "aten.linear.default", "aten.scaled_dot_product_attention.default",
                "aten._native_batch_norm_legit_no_training.default", "aten.view.default", "operator.getitem"):
        assert key in ops
