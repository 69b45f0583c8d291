"""Winograd convolution F(m×m, 3×3) for NHWC conv2d with stride 1 (Lavin & Gray, 2016).

Note (why): a 3×3 conv computes each m×m output tile with 9·m² multiply-adds per (input, output)
channel pair; Winograd's minimal filtering computes it with α² = (m + 2)² by moving to a transformed
domain where the convolution is an element-wise product:

    Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A          d: an α×α input tile, g: the 3×3 filter

Summed over input channels, the element-wise products become α² independent GEMMs
``M[ξ] = V[ξ] · U[ξ]`` (tiles × C by C × O), so the multiply count drops by 9m²/α² (2.25× for
F(2,3), 4× for F(4,3)) and the work is dense GEMM at the micro-kernel's speed. The price: two
transforms over the activations (cheap, memory-bound) and weights α²/9 times larger (4× for
F(4,3)), plus rounding: the transform matrices have entries up to 5 (F(4,3)), so results differ
from the direct conv by a few ulps of the largest partial sums (~1e-6 relative for F(4,3) in float32;
F(6,3) is not offered: its entries reach 5.25·4.25 and its error 1e-4).

The weight transform ``U = G g Gᵀ`` runs once, at compile time, in float64 (`transform_weight`,
called by `ingot.graph.transform.PackWeights` on constant weights; TVM's
``contrib_conv2d_winograd_without_weight_transform``). The kernel (`conv2d_nhwc_winograd`) is a
chain of TE stages; all but the padding carry the block annotation ``winograd`` so that
`ingot.ops.schedule.winograd_rule` recognizes them:

    pad_temp   the input zero-padded to a whole number of tiles
    input      V[ξ, t, c] = (Bᵀ d_t B)[ξ]                 ξ = e·α + u, t = tile, c = channel
    gemm       M[ξ, t, o] = Σ_c V[ξ, t, c] · U[ξ, o / P, c, o % P]      (U packed in P-wide panels)
    output     Y_tile[t, i, j, o] = (Aᵀ M_t A)[i, j]
    crop       Y[n, y, x, o] = Y_tile[tile of (y, x), y % m, x % m, o]   (the op's output)

(each transform preceded by its first 1-D pass, ``input_rows`` / ``output_rows``: below).

A run-time batch (symbolic N; H, W and the channels static: the tile grid does not depend on N) gives
every stage a leading image axis and a tile axis of one image's tiles (`_per_image`): below the image
loop each stage is the batch-1 kernel, so the default schedule plans it as batch 1 and runs images one
after the other (a model exported with a dynamic batch gets its static twin's Winograd plan, #17).

Each 2-D transform is separable (``Bᵀ d B = Bᵀ (d B)``) and written as two stages, two 1-D passes:

    input_rows   T[a, j, t, c] = (d_t B)[a, j]        along each row a of the α×α tile
    input        V[i·α + j, t, c] = (Bᵀ T)[i, j]      along each column j of T
    output_rows  S[e, j, t, o] = (M_t A)[e, j]        α × m
    output       Y_tile[t, i·m + j, o] = (Aᵀ S)[i, j]

A pass holds α inputs and α (or m) outputs at a time; the one-pass form (all α² positions of a
tile as straight-line sums over the whole tile) keeps α² partial sums live, more than AVX2's 16
vector registers (and, for F(4, 3), than AVX-512's 32), and spills. The schedule chooses per CPU
(`ingot.ops.schedule.winograd`): it computes each first pass per (tile, channel vector) into a
small local tile, or inlines it into its second pass, which gives back the one-pass form.
The passes are written out with their constant coefficients (zeros skipped, ±1 without a
multiply), one expression per output of a pass, selected by a ``Select`` on its index: once the
schedule unrolls that index, `Simplify` folds each copy to its own short sum.

Example:
    >>> import numpy as np
    >>> at, g, bt = winograd_matrices(2)
    >>> d, w = np.random.rand(4), np.random.rand(3)
    >>> bool(np.allclose(at @ ((g @ w) * (bt @ d)), np.correlate(d, w, "valid")))
    True
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from ingot import tir
from ingot.ir import as_const_int, convert
from ingot.ir.transform import PassContext, register_pass_config

from ._window import conv_window
from .nn import pad_hw

__all__ = ["winograd_matrices", "choose_tile", "transform_weight", "untransform_weight", "conv2d_nhwc_winograd",
           "WINOGRAD_TILES", "STAGE_KEY", "TILE_GRID_KEY", "WinogradTilePolicy", "TILE_POLICY_CONFIG"]

#: Output tile sizes m offered (F(m×m, 3×3)); see the module note for why not 6.
WINOGRAD_TILES = (2, 4)
#: Block annotation naming a stage of the Winograd kernel ("input", "gemm", "output", "crop").
STAGE_KEY = "winograd"
#: Block annotation of the input stage: the tile grid (N, TH, TW) that its tile axis flattens.
TILE_GRID_KEY = "winograd_tile_grid"
_KERNEL = 3
#: Interpolation points of the Cook-Toom construction, in the usual order (∞ is added last).
_POINTS = (Fraction(0), Fraction(1), Fraction(-1), Fraction(2), Fraction(-2), Fraction(1, 2), Fraction(-1, 2))


def _poly_mul(a: list, b: list) -> list:
    out = [Fraction(0)] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            out[i + j] += x * y
    return out


@lru_cache(maxsize=None)
def _exact_matrices(m: int, r: int) -> tuple:
    """(Aᵀ, G, Bᵀ) as tuples of Fractions (Cook-Toom with the points 0, ±1, ±2, ±1/2 and ∞)."""
    n = m + r - 2  # finite points; α = n + 1
    if n > len(_POINTS):
        raise ValueError(f"winograd_matrices: F({m}, {r}) needs {n} finite points; at most {len(_POINTS)} are known")
    pts = _POINTS[:n]
    at = tuple(tuple(p ** i for p in pts) + (Fraction(int(i == m - 1)),) for i in range(m))
    g_rows = []
    for j, a in enumerate(pts):
        den = Fraction(1)
        for k, b in enumerate(pts):
            if k != j:
                den *= a - b
        g_rows.append(tuple(a ** k / den for k in range(r)))
    g_rows.append(tuple(Fraction(int(k == r - 1)) for k in range(r)))
    bt_rows = []
    for j in range(n + 1):
        # Row j < n: the coefficients of Π_{k≠j} (x - a_k); row n (the point ∞): of Π_k (x - a_k).
        coeffs = [Fraction(1)]
        for k, b in enumerate(pts):
            if k != j:
                coeffs = _poly_mul(coeffs, [-b, Fraction(1)])
        bt_rows.append(tuple(coeffs) + (Fraction(0),) * (n + 1 - len(coeffs)))
    return at, tuple(g_rows), tuple(bt_rows)


def winograd_matrices(m: int, r: int = _KERNEL) -> "tuple[np.ndarray, np.ndarray, np.ndarray]":
    """The transform matrices ``(Aᵀ [m, α], G [α, r], Bᵀ [α, α])`` of F(m, r), α = m + r - 1, as float64:
    ``Aᵀ ((G g) ⊙ (Bᵀ d))`` is the valid correlation of a length-α ``d`` with a length-r ``g``.

    Example:
        >>> at, g, bt = winograd_matrices(4)
        >>> at.shape, g.shape, bt.shape
        ((4, 6), (6, 3), (6, 6))
        >>> [float(v) for v in bt[0]]
        [4.0, 0.0, -5.0, 0.0, 1.0, 0.0]
    """
    return tuple(np.array([[float(v) for v in row] for row in mat]) for mat in _exact_matrices(m, r))


#: Below this many output rows/columns Winograd loses inside a model: too few tiles to amortize the
#: transforms, and α²/9 times the weight traffic from L3/DRAM. `python benchmarks/winograd.py --layers
#: --model` (BENCHMARKS.md, session 5): F(2, 3) at 7×7 is 1.27× faster alone (678 vs 861 µs) but makes
#: the model 0.5 ms slower (29.27 vs 28.79 ms; its weights are 1.8× larger).
MIN_WINOGRAD_SIZE = 14
#: From this size up F(4, 3) (4× fewer multiplies) beats F(2, 3) (2.25×). At 14×14 F(4, 3) wins alone
#: (406 vs 478 µs, 256 channels) but loses in the model, its weights 4× larger (same run: F(2, 3) at
#: 14×14 27.60 ms, F(4, 3) 28.79 ms, direct 30.61 ms, ONNX Runtime 28.05 ms).
MIN_F4_SIZE = 28
#: Fewer channels than this leave the GEMMs too small to pay for the transforms.
MIN_WINOGRAD_CHANNELS = 32


@dataclass(frozen=True)
class WinogradTilePolicy:
    """The output sizes `choose_tile` picks tiles by (defaults: the measured `MIN_WINOGRAD_SIZE`,
    `MIN_F4_SIZE`); a build takes another one through its pass context, as benchmarks/winograd.py
    compares them: ``PassContext(config={TILE_POLICY_CONFIG: WinogradTilePolicy(min_f4_size=14)})``.

    Example:
        >>> WinogradTilePolicy().min_f4_size
        28
    """
    min_size: int = MIN_WINOGRAD_SIZE
    min_f4_size: int = MIN_F4_SIZE


#: The pass-context config key of the `WinogradTilePolicy` that `choose_tile` follows.
TILE_POLICY_CONFIG = "graph.winograd_tiles"
register_pass_config(TILE_POLICY_CONFIG, WinogradTilePolicy, "WinogradTilePolicy: the output sizes of F(2,3)/F(4,3)")


def choose_tile(out_hw: "tuple[int, int]", channels: int, out_channels: int, lanes: int) -> "int | None":
    """The Winograd output tile m for a 3×3 stride-1 conv with output size ``out_hw`` (None: use the
    direct conv). The thresholds (module constants) come from per-layer measurements of ResNet-50's
    3×3 convs; both channel counts must be whole vectors (the transforms vectorize over them).

    A `WinogradTilePolicy` in the pass context moves the size thresholds.

    Example:
        >>> choose_tile((56, 56), 64, 64, 16), choose_tile((14, 14), 256, 256, 16), choose_tile((7, 7), 512, 512, 16)
        (4, 2, None)
        >>> with PassContext(config={TILE_POLICY_CONFIG: WinogradTilePolicy(min_size=7, min_f4_size=14)}):
        ...     choose_tile((14, 14), 256, 256, 16), choose_tile((7, 7), 512, 512, 16)
        (4, 2)
    """
    oh, ow = out_hw
    policy = PassContext.current().get_config(TILE_POLICY_CONFIG, None) or WinogradTilePolicy()
    if min(channels, out_channels) < MIN_WINOGRAD_CHANNELS or channels % lanes or out_channels % lanes:
        return None
    if min(oh, ow) < policy.min_size:
        return None
    return 4 if min(oh, ow) >= policy.min_f4_size else 2


def _check_tile(tile: int) -> None:
    if tile not in WINOGRAD_TILES:
        raise ValueError(f"Winograd output tile {tile} is not supported; use one of {WINOGRAD_TILES}")


def transform_weight(w_hwio: np.ndarray, tile: int, panel: int) -> np.ndarray:
    """The Winograd-domain weight ``U = G g Gᵀ`` of an HWIO 3×3 weight, packed as ``[α², O / P, C, P]``
    (α = tile + 2; each transformed position ξ is a GEMM operand in P-wide panels), computed in
    float64 and rounded once to the weight's dtype.

    Example:
        >>> transform_weight(np.zeros((3, 3, 8, 32), "float32"), 4, 16).shape
        (36, 2, 8, 16)
    """
    _check_tile(tile)
    kh, kw, c, o = w_hwio.shape
    if (kh, kw) != (_KERNEL, _KERNEL):
        raise ValueError(f"transform_weight: Winograd F(m, 3) needs a 3x3 kernel, got {kh}x{kw}")
    if panel <= 0 or o % panel:
        raise ValueError(f"transform_weight: output channels {o} are not a multiple of the panel width {panel}")
    _, g, _ = winograd_matrices(tile)
    alpha = tile + _KERNEL - 1
    u = np.einsum("ea,abco,ub->euco", g, w_hwio.astype(np.float64), g)  # [α, α, C, O]
    u = u.reshape(alpha * alpha, c, o // panel, panel).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(u.astype(w_hwio.dtype))


def untransform_weight(u_packed: np.ndarray) -> np.ndarray:
    """The HWIO 3×3 weight ``g`` of a `transform_weight` result (``g = G⁺ U G⁺ᵀ``: G has full column
    rank, so this is exact up to rounding). The graph operator's numpy reference convolves with it.

    Example:
        >>> w = np.random.rand(3, 3, 4, 16)
        >>> bool(np.allclose(untransform_weight(transform_weight(w, 4, 16)), w))
        True
    """
    aa, oo, c, p = u_packed.shape
    alpha = int(round(aa ** 0.5))
    tile = alpha - _KERNEL + 1
    _check_tile(tile)
    _, g, _ = winograd_matrices(tile)
    pinv = np.linalg.pinv(g)  # [3, α]
    u = u_packed.astype(np.float64).transpose(0, 2, 1, 3).reshape(alpha, alpha, c, oo * p)
    return np.einsum("ae,euco,bu->abco", pinv, u, pinv).astype(u_packed.dtype)


# -- the TE kernel ----------------------------------------------------------------------------


def _linear_form(coeffs: "list[tuple[Fraction, Any]]", dtype: str) -> Any:
    """``Σ c·x`` over the nonzero coefficients, ±1 without a multiply (None when all are zero); a
    positive term first, so the sum never starts from ``0 - x``."""
    out = None
    for c, x in sorted(coeffs, key=lambda cx: cx[0] < 0):
        if c == 0:
            continue
        negative = c < 0
        term = x if abs(c) == 1 else tir.const(float(abs(c)), dtype) * x
        if out is None:
            out = -term if negative else term
        else:
            out = out - term if negative else out + term
    return out


def _transform_1d(left: tuple, read: Any, dtype: str) -> list:
    """``[(L x)[j] for j]`` as expressions, ``x[k] = read(k)`` (each element read once)."""
    loads = [read(k) for k in range(len(left[0]))]
    out = []
    for row in left:
        form = _linear_form([(c, loads[k]) for k, c in enumerate(row) if c != 0], dtype)
        out.append(form if form is not None else tir.const(0.0, dtype))
    return out


def _column_pass(left: tuple, row: Any, read: Any, dtype: str) -> Any:
    """``(L X)[row, j]`` of a column ``j`` fixed by ``read(a) = X[a, j]``: a ``Select`` on ``row``
    over L's rows (the second pass of a separable transform; each read is one node)."""
    loads = [read(a) for a in range(len(left[0]))]
    return _select_by(row, _transform_1d(left, lambda a: loads[a], dtype))


def _select_by(index: Any, values: list) -> Any:
    """``values[index]`` as a Select chain (folds to one value once ``index`` is a constant)."""
    out = values[-1]
    for k in range(len(values) - 2, -1, -1):
        out = tir.Select(index == k, values[k], out)
    return out


def conv2d_nhwc_winograd(data: Any, u_packed: Any, padding: Any = 1, out_dtype: "str | None" = None) -> Any:
    """NHWC 3×3 conv2d, stride 1, dilation 1, groups 1, by Winograd F(m×m, 3×3) with the weight
    already transformed and packed (`transform_weight`: ``[α², O / P, C, P]``, m = α - 2). Output
    ``(N, OH, OW, O)``. See the module note for the stages.

    Example:
        >>> from ingot import te
        >>> y = conv2d_nhwc_winograd(te.placeholder((1, 8, 8, 4), name="x"),
        ...                          te.placeholder((36, 1, 4, 16), name="u"), padding=1)
        >>> [int(d) for d in y.shape]
        [1, 8, 8, 16]
    """
    from ingot import te

    name = "conv2d_nhwc_winograd"
    win = conv_window(name, data, 1, padding, 1, out_dtype)
    pt, pl, pb, pr = (int(p) for p in win.padding)
    dtype = win.out_dtype
    static = [as_const_int(convert(d)) for d in tuple(data.shape) + tuple(u_packed.shape)]
    if any(d is None for d in static[1:]):
        raise ValueError(f"{name}: needs static H, W, channels and weight, got data {tuple(data.shape)} and "
                         f"weight {tuple(u_packed.shape)}; keep conv2d for dynamic spatial shapes")
    n, h, w, c, aa, oo, cw, p = static
    alpha = int(round(aa ** 0.5))
    m = alpha - _KERNEL + 1
    _check_tile(m)
    if alpha * alpha != aa or cw != c:
        raise ValueError(f"{name}: weight {tuple(u_packed.shape)} is not [α², O/P, {c}, P] for data with {c} channels")
    if str(data.dtype) != dtype:
        raise ValueError(f"{name}: out_dtype {dtype} differs from the data's {data.dtype}; Winograd keeps one dtype")
    oh, ow = h + pt + pb - _KERNEL + 1, w + pl + pr - _KERNEL + 1
    th, tw = -(-oh // m), -(-ow // m)
    if n is None:
        return _per_image(data, u_packed, (pt, pl, pb, pr), (h, w, c, oh, ow, oo * p, p, m), dtype)
    tiles = n * th * tw
    at, _, bt = _exact_matrices(m, _KERNEL)
    # Step 1. Pad to whole tiles (extra zeros bottom/right: the last tiles' surplus outputs are cropped).
    padded = pad_hw(data, (pt, pl, th * m + 2 - h - pt, tw * m + 2 - w - pl), 1, 2)

    def tile_origin(t: Any) -> tuple:
        return t // (th * tw), t // tw % th * m, t % tw * m

    # Step 2. Input transform V = Bᵀ d B per tile and channel, as two 1-D passes: along each tile
    # row a, T[a, j] = (d B)[a, j]; then along the columns, V[i·α + j] = (Bᵀ T)[i, j].
    def input_rows_body(a: Any, j: Any, t: Any, ch: Any) -> Any:
        b, y0, x0 = tile_origin(t)
        values = _transform_1d(bt, lambda k: padded[b, y0 + a, x0 + k, ch], dtype)
        return _select_by(j, values)

    rows_in = te.compute((alpha, alpha, tiles, c), input_rows_body, name="winograd_input_rows",
                         attrs={STAGE_KEY: "input_rows"})

    def input_body(xi: Any, t: Any, ch: Any) -> Any:
        return _column_pass(bt, xi // alpha, lambda a: rows_in[a, xi % alpha, t, ch], dtype)

    # The tile grid rides along so the schedule can split t into (n, th, tw): then the padded
    # region one tile reads is a plain α×α window, not the whole image (div/mod of a fused t).
    v = te.compute((aa, tiles, c), input_body, name="winograd_input",
                   attrs={STAGE_KEY: "input", TILE_GRID_KEY: (n, th, tw)})
    # Step 3. α² GEMMs over the input channels.
    rc = te.reduce_axis((0, c), name="rc")
    gemm = te.compute((aa, tiles, oo * p),
                      lambda xi, t, o: te.sum(v[xi, t, rc] * u_packed[xi, o // p, rc, o % p], axis=rc),
                      name="winograd_gemm", attrs={STAGE_KEY: "gemm"})

    # Step 4. Output transform Y = Aᵀ M A per tile and output channel, as two 1-D passes: along
    # each row e of M, S[e, j] = (M A)[e, j]; then along the columns, Y[i·m + j] = (Aᵀ S)[i, j].
    def output_rows_body(e: Any, j: Any, t: Any, o: Any) -> Any:
        values = _transform_1d(at, lambda u: gemm[e * alpha + u, t, o], dtype)
        return _select_by(j, values)

    rows_out = te.compute((alpha, m, tiles, oo * p), output_rows_body, name="winograd_output_rows",
                          attrs={STAGE_KEY: "output_rows"})

    def output_body(t: Any, ij: Any, o: Any) -> Any:
        return _column_pass(at, ij // m, lambda e: rows_out[e, ij % m, t, o], dtype)

    y_tile = te.compute((tiles, m * m, oo * p), output_body, name="winograd_output", attrs={STAGE_KEY: "output"})

    # Step 5. Crop the tiles into NHWC.
    def crop(b: Any, y: Any, x: Any, o: Any) -> Any:
        return y_tile[(b * th + y // m) * tw + x // m, y % m * m + x % m, o]

    return te.compute((n, oh, ow, oo * p), crop, name=name, tag=name, attrs={STAGE_KEY: "crop"})


def _per_image(data: Any, u_packed: Any, padding: tuple, sizes: tuple, dtype: str) -> Any:
    """The stages of `conv2d_nhwc_winograd` for a run-time batch (a symbolic N; H, W and the channels
    static): each stage gets a leading image axis and its tile axis counts one image's tiles, so
    every stage past that axis is the batch-1 kernel's (the rules plan the symbolic leading axis as
    batch 1, `ingot.ops.schedule.analysis.plan_symbolic_extents`, and keep its loop serial outside
    the parallel one). The tile-grid annotation is the batch-1 grid ``(1, TH, TW)``."""
    from ingot import te

    name = "conv2d_nhwc_winograd"
    h, w, c, oh, ow, outs, p, m = sizes
    pt, pl, pb, pr = padding
    n = data.shape[0]
    alpha = m + _KERNEL - 1
    th, tw = -(-oh // m), -(-ow // m)
    tiles = th * tw
    at, _, bt = _exact_matrices(m, _KERNEL)
    padded = pad_hw(data, (pt, pl, th * m + 2 - h - pt, tw * m + 2 - w - pl), 1, 2)

    def input_rows_body(b: Any, a: Any, j: Any, t: Any, ch: Any) -> Any:
        y0, x0 = t // tw * m, t % tw * m
        return _select_by(j, _transform_1d(bt, lambda k: padded[b, y0 + a, x0 + k, ch], dtype))

    rows_in = te.compute((n, alpha, alpha, tiles, c), input_rows_body, name="winograd_input_rows",
                         attrs={STAGE_KEY: "input_rows"})
    v = te.compute((n, alpha * alpha, tiles, c),
                   lambda b, xi, t, ch: _column_pass(bt, xi // alpha, lambda a: rows_in[b, a, xi % alpha, t, ch], dtype),
                   name="winograd_input", attrs={STAGE_KEY: "input", TILE_GRID_KEY: (1, th, tw)})
    rc = te.reduce_axis((0, c), name="rc")
    gemm = te.compute((n, alpha * alpha, tiles, outs),
                      lambda b, xi, t, o: te.sum(v[b, xi, t, rc] * u_packed[xi, o // p, rc, o % p], axis=rc),
                      name="winograd_gemm", attrs={STAGE_KEY: "gemm"})

    def output_rows_body(b: Any, e: Any, j: Any, t: Any, o: Any) -> Any:
        return _select_by(j, _transform_1d(at, lambda u: gemm[b, e * alpha + u, t, o], dtype))

    rows_out = te.compute((n, alpha, m, tiles, outs), output_rows_body, name="winograd_output_rows",
                          attrs={STAGE_KEY: "output_rows"})
    y_tile = te.compute((n, tiles, m * m, outs),
                        lambda b, t, ij, o: _column_pass(at, ij // m, lambda e: rows_out[b, e, ij % m, t, o], dtype),
                        name="winograd_output", attrs={STAGE_KEY: "output"})
    return te.compute((n, oh, ow, outs), lambda b, y, x, o: y_tile[b, y // m * tw + x // m, y % m * m + x % m, o],
                      name=name, tag=name, attrs={STAGE_KEY: "crop"})
