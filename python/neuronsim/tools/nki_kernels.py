"""NKI kernels of our own, written after the public tutorials' algorithms, in the current
API (nki.isa instructions with their destination first): what the NKI tests run and what
``python -m neuronsim.tools.nki_bench`` times."""

from __future__ import annotations

import neuronsim.nki as nki
import neuronsim.nki.isa as nisa
import neuronsim.nki.language as nl


@nki.jit
def tensor_add(a_input, b_input):
    """Tiles of 128 rows: two loads, one VectorE add, one store each."""
    out = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    rows, cols = a_input.shape
    for p in nl.affine_range(rows // nl.tile_size.pmax):
        part = slice(p * 128, (p + 1) * 128)
        a = nl.ndarray((128, cols), dtype=a_input.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, cols), dtype=a_input.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=a_input[part, :])
        nisa.dma_copy(dst=b, src=b_input[part, :])
        c = nl.ndarray((128, cols), dtype=a_input.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)
        nisa.dma_copy(dst=out[part, :], src=c)
    return out


@nki.jit
def scaled_exp(x_input):
    """exp(2x) on ScalarE, then x 0.5 + 1 on VectorE."""
    out = nl.ndarray(x_input.shape, dtype=x_input.dtype, buffer=nl.shared_hbm)
    x = nl.load(x_input)
    e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=x, scale=2.0)
    y = nl.ndarray(x.shape, dtype=x_input.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=y, data=e, op0=nl.multiply, operand0=0.5, op1=nl.add, operand1=1.0)
    nl.store(out, y)
    return out


def _matmul_naive(lhs_t, rhs):
    """out = lhs_t.T @ rhs: per [128, 512] output tile, every K tile of both operands
    loaded again, the products accumulated in one PSUM bank."""
    k_size, m_size = lhs_t.shape
    n_size = rhs.shape[1]
    out = nl.ndarray((m_size, n_size), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_size // 128):
        for n in nl.affine_range(n_size // 512):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_size // 128):
                lt = nl.load(lhs_t[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
                rt = nl.load(rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                nisa.nc_matmul(acc, lt, rt)
            res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(res, acc)
            nl.store(out[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], res)
    return out


def _matmul_hoisted(lhs_t, rhs):
    """The same product with each row block of lhs_t loaded once for all of its output
    tiles: fewer DMA bytes for the same instructions on TensorE."""
    k_size, m_size = lhs_t.shape
    n_size = rhs.shape[1]
    tiles_k = k_size // 128
    out = nl.ndarray((m_size, n_size), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_size // 128):
        lt = nl.ndarray((128, tiles_k, 128), dtype=lhs_t.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(tiles_k):
            nisa.dma_copy(
                dst=lt[:, k, :], src=lhs_t[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128]
            )
        for n in nl.affine_range(n_size // 512):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(tiles_k):
                rt = nl.load(rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                nisa.nc_matmul(acc, lt[:, k, :], rt)
            res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(res, acc)
            nl.store(out[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], res)
    return out


def _matmul_blocked(lhs_t, rhs, tiles_m: int = 4):
    """The same product blocked over M: a block of `tiles_m` column tiles of lhs_t stays in
    SBUF for the whole K extent, and each rhs tile, loaded once per block, feeds `tiles_m`
    matmuls into as many PSUM accumulators. rhs is read M / (128 * tiles_m) times instead
    of M / 128, lhs_t once: TensorE, not the DMAs, sets the pace."""
    k_size, m_size = lhs_t.shape
    n_size = rhs.shape[1]
    tiles_k, block = k_size // 128, 128 * tiles_m
    out = nl.ndarray((m_size, n_size), dtype=nl.float32, buffer=nl.shared_hbm)
    for mb in nl.affine_range(m_size // block):
        lt = nl.ndarray((128, tiles_k, block), dtype=lhs_t.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(tiles_k):
            nisa.dma_copy(
                dst=lt[:, k, :], src=lhs_t[k * 128 : (k + 1) * 128, mb * block : (mb + 1) * block]
            )
        for n in nl.affine_range(n_size // 512):
            accs = [
                nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(tiles_m)
            ]
            for k in nl.affine_range(tiles_k):
                rt = nl.load(rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                for i in range(tiles_m):
                    nisa.nc_matmul(accs[i], lt[:, k, i * 128 : (i + 1) * 128], rt)
            for i in range(tiles_m):
                res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(res, accs[i])
                rows = slice(mb * block + i * 128, mb * block + (i + 1) * 128)
                nl.store(out[rows, n * 512 : (n + 1) * 512], res)
    return out


matmul_naive = nki.jit(_matmul_naive)
matmul_hoisted = nki.jit(_matmul_hoisted)
matmul_blocked = nki.jit(_matmul_blocked)


@nki.jit
def rms_norm(x_input, weight, eps: float = 1e-6):
    """x / sqrt(mean(x^2) + eps) * weight over rows of 128: squares and their sum on
    ScalarE (activation with a reduction), rsqrt, then a per-row scale and the weight on
    VectorE."""
    out = nl.ndarray(x_input.shape, dtype=x_input.dtype, buffer=nl.shared_hbm)
    rows, cols = x_input.shape
    w = nl.ndarray((128, cols), dtype=weight.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=weight.broadcast_to((128, cols)))  # on every partition
    for r in nl.affine_range(rows // 128):
        part = slice(r * 128, (r + 1) * 128)
        x = nl.load(x_input[part, :])
        squares = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=squares, op=nl.square, data=x, reduce_op=nl.add, reduce_res=total)
        inv = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=inv, data=total, op0=nl.multiply, operand0=1.0 / cols, op1=nl.add, operand1=eps
        )
        nisa.activation(dst=inv, op=nl.rsqrt, data=inv)
        y = nl.ndarray((128, cols), dtype=x_input.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=x, op0=nl.multiply, operand0=inv)
        nisa.tensor_tensor(dst=y, data1=y, data2=w, op=nl.multiply)
        nl.store(out[part, :], y)
    return out


@nki.jit
def softmax(x_input):
    """exp(x - max) / sum over rows: the max on VectorE, exp with the negated max as a
    per-row bias and the sum as its reduction on ScalarE, then one divide."""
    out = nl.ndarray(x_input.shape, dtype=x_input.dtype, buffer=nl.shared_hbm)
    rows, cols = x_input.shape
    for r in nl.affine_range(rows // 128):
        part = slice(r * 128, (r + 1) * 128)
        x = nl.load(x_input[part, :])
        neg_max = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=x, axis=1, negate=True, keepdims=True)
        e = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=x, bias=neg_max, reduce_op=nl.add, reduce_res=total)
        y = nl.ndarray((128, cols), dtype=x_input.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=e, op0=nl.divide, operand0=total)
        nl.store(out[part, :], y)
    return out


@nki.jit
def transpose(x_input):
    """x.T of a [128 * a, 128 * b] matrix, one 128 x 128 block at a time on TensorE."""
    rows, cols = x_input.shape
    out = nl.ndarray((cols, rows), dtype=x_input.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(rows // 128):
        for j in nl.affine_range(cols // 128):
            block = nl.load(x_input[i * 128 : (i + 1) * 128, j * 128 : (j + 1) * 128])
            flipped = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=flipped, data=block)
            y = nl.ndarray((128, 128), dtype=x_input.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=y, src=flipped)
            nl.store(out[j * 128 : (j + 1) * 128, i * 128 : (i + 1) * 128], y)
    return out


@nki.jit
def layer_norm(x_input, weight, bias, eps: float = 1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias over rows of at most 512: mean and
    variance from bn_stats and bn_aggr (VectorE), the normalisation as one tensor_scalar
    with two per-row operands."""
    out = nl.ndarray(x_input.shape, dtype=x_input.dtype, buffer=nl.shared_hbm)
    rows, cols = x_input.shape
    w = nl.ndarray((128, cols), dtype=weight.dtype, buffer=nl.sbuf)
    b = nl.ndarray((128, cols), dtype=bias.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=weight.broadcast_to((128, cols)))
    nisa.dma_copy(dst=b, src=bias.broadcast_to((128, cols)))
    for r in nl.affine_range(rows // 128):
        part = slice(r * 128, (r + 1) * 128)
        x = nl.load(x_input[part, :])
        stats = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(dst=stats, data=x)
        moments = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)  # mean, variance
        nisa.bn_aggr(dst=moments, data=stats)
        rstd = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd, data=moments[:, 1:2], op0=nl.add, operand0=eps)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=rstd)
        y = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=y, data=x, op0=nl.subtract, operand0=moments[:, 0:1], op1=nl.multiply, operand1=rstd
        )
        nisa.tensor_tensor(dst=y, data1=y, data2=w, op=nl.multiply)
        z = nl.ndarray((128, cols), dtype=x_input.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=z, data1=y, data2=b, op=nl.add)
        nl.store(out[part, :], z)
    return out


@nki.jit
def selective_scan(decay, inputs):
    """h[t] = decay[t] * h[t-1] + inputs[t] along each row (h[-1] = 0): a state-space
    model's recurrence as one VectorE scan per 128 channels."""
    out = nl.ndarray(inputs.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for r in nl.affine_range(inputs.shape[0] // 128):
        part = slice(r * 128, (r + 1) * 128)
        a, x = nl.load(decay[part, :]), nl.load(inputs[part, :])
        h = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=h, data0=a, data1=x, initial=0.0, op0=nl.multiply, op1=nl.add)
        nl.store(out[part, :], h)
    return out


@nki.jit
def top8(x_input):
    """The 8 largest values of each row and their positions (max8, nc_find_index8)."""
    values = nl.ndarray((x_input.shape[0], 8), dtype=nl.float32, buffer=nl.shared_hbm)
    positions = nl.ndarray((x_input.shape[0], 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    x = nl.load(x_input)
    best = nl.ndarray((x_input.shape[0], 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.max8(dst=best, src=x)
    where = nl.ndarray((x_input.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(dst=where, data=x, vals=best)
    nl.store(values, best)
    nl.store(positions, where)
    return values, positions


@nki.jit
def fused_attention(q_t, k_t, v):
    """softmax(q @ k.T / sqrt(d)) @ v for one head, q and k given transposed ([d, S], d at
    most 128, S a multiple of 128 up to 512): per 128 queries, the scores in one PSUM bank,
    the row max and the exp (with its sum) on the engines, the probabilities transposed on
    TensorE block by block and multiplied by v, accumulated over the keys, then divided by
    the sum. Nothing but q, k, v and the output crosses HBM."""
    d, seq = q_t.shape
    scale = 1.0 / float(d) ** 0.5
    out = nl.ndarray((seq, d), dtype=nl.float32, buffer=nl.shared_hbm)
    keys = nl.load(k_t)
    values = nl.ndarray((128, seq // 128, d), dtype=v.dtype, buffer=nl.sbuf)
    for j in nl.affine_range(seq // 128):
        nisa.dma_copy(dst=values[:, j, :], src=v[j * 128 : (j + 1) * 128, :])
    for i in nl.affine_range(seq // 128):
        queries = nl.load(q_t[:, i * 128 : (i + 1) * 128])
        scores = nl.ndarray((128, seq), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(scores, queries, keys)
        bias = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)  # -max * scale
        nisa.tensor_reduce(dst=bias, op=nl.maximum, data=scores, axis=1, negate=True, keepdims=True)
        nisa.tensor_scalar(dst=bias, data=bias, op0=nl.multiply, operand0=scale)
        probs = nl.ndarray((128, seq), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(
            dst=probs,
            op=nl.exp,
            data=scores,
            bias=bias,
            scale=scale,
            reduce_op=nl.add,
            reduce_res=total,
        )
        acc = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.psum)
        for j in nl.affine_range(seq // 128):
            flipped = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=flipped, data=probs[:, j * 128 : (j + 1) * 128])
            probs_t = nl.ndarray((128, 128), dtype=v.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=probs_t, src=flipped)
            nisa.nc_matmul(acc, probs_t, values[:, j, :])
        res = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=res, data=acc, op0=nl.divide, operand0=total)
        nl.store(out[i * 128 : (i + 1) * 128, :], res)
    return out
