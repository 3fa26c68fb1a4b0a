"""nki.language's composite functions (softmax, rms_norm, mean, var, where, the activation
derivatives, rounding, ...) and the legacy nki.isa instructions that return new tiles:
values against NumPy, the instructions each is made of, and what is refused, by name."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

import neuronsim.nki as nki
import neuronsim.nki.isa as nisa
import neuronsim.nki.language as nl
from neuronsim.nki import legacy

lnl = legacy.language
lisa = legacy.isa


def _out(shape, dtype=nl.float32):
    return nl.ndarray(tuple(shape), dtype, buffer=nl.shared_hbm)


def _col(values) -> np.ndarray:
    """[P] values as the [P, 1] column a per-partition result is stored as."""
    return np.asarray(values, np.float32).reshape(-1, 1)


# -- reductions -----------------------------------------------------------------------------
@nki.jit
def row_stats(x_in, flags_in):
    x, flags = nl.load(x_in), nl.load(flags_in)
    outs = [_out((x_in.shape[0], 1)) for _ in range(4)]
    nl.store(outs[0], nl.mean(x, axis=1))
    nl.store(outs[1], nl.var(x, axis=1))
    nl.store(outs[2], nl.prod(x, axis=[1]))
    nl.store(outs[3], nl.all(flags, axis=-1))
    return tuple(outs)


def test_mean_var_prod_and_all_over_the_free_axis():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.8, 1.2, (64, 48)).astype(np.float32)
    flags = (rng.random((64, 48)) > 0.02).astype(np.int32)
    flags[3] = 1  # one row all set
    mean, var, prod, every = row_stats(x, flags)
    np.testing.assert_allclose(mean, _col(x.mean(axis=1)), rtol=1e-6)
    np.testing.assert_allclose(var, _col(x.var(axis=1)), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(prod, _col(x.prod(axis=1)), rtol=1e-5)
    assert np.array_equal(every, _col(flags.all(axis=1)))
    assert every[3, 0] == 1 and not every.all()
    run = row_stats.last_run
    # mean: reduce + divide; var: reduce, negated mean, one ScalarE square-and-sum, divide;
    # prod: reduce; all: compare + reduce.
    assert run.count("tensor_reduce") == 4 and run.count("activation") == 1


@nki.jit
def block_stats(x_in):
    """x [P, 4, 16]: statistics over the last axis (per block) and over both free axes."""
    p, a = x_in.shape[0], x_in.shape[1]
    x = nl.load(x_in)
    mean_last, var_last, mean_all = _out((p, a, 1)), _out((p, a, 1)), _out((p, 1))
    nl.store(mean_last, nl.mean(x, axis=2, keepdims=True))
    nl.store(var_last, nl.var(x, axis=2))
    nl.store(mean_all, nl.mean(x, axis=(1, 2)))
    return mean_last, var_last, mean_all


def test_statistics_over_some_of_the_free_axes():
    x = np.random.default_rng(1).standard_normal((32, 4, 16)).astype(np.float32)
    mean_last, var_last, mean_all = block_stats(x)
    np.testing.assert_allclose(mean_last, x.mean(axis=2, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var_last, x.var(axis=2, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mean_all, _col(x.mean(axis=(1, 2))), rtol=1e-5, atol=1e-6)


# -- softmax and rms_norm -------------------------------------------------------------------
@nki.jit
def softmax_rows(x_in):
    out = _out(x_in.shape)
    nl.store(out, nl.softmax(nl.load(x_in)))
    return out


@nki.jit
def softmax_blocks(x_in):
    out = _out(x_in.shape)
    nl.store(out, nl.softmax(nl.load(x_in), axis=2))
    return out


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_softmax_per_row_is_three_instructions():
    x = 4 * np.random.default_rng(2).standard_normal((128, 96)).astype(np.float32)
    np.testing.assert_allclose(softmax_rows(x), _softmax(x, 1), rtol=1e-5, atol=1e-7)
    run = softmax_rows.last_run
    assert run.count("tensor_reduce") == 1  # the negated maximum
    assert run.count("activation") == 1  # exp(x - max), summed by the same instruction
    assert run.count("tensor_scalar") == 1  # divided by the sums


def test_softmax_over_the_last_of_two_free_axes():
    x = np.random.default_rng(3).standard_normal((16, 4, 32)).astype(np.float32)
    np.testing.assert_allclose(softmax_blocks(x), _softmax(x, 2), rtol=1e-5, atol=1e-7)


@nki.jit
def rms_rows(x_in, w_in):
    out = _out(x_in.shape)
    x, w = nl.load(x_in), nl.load(w_in)
    nl.store(out, nl.rms_norm(x, w, axis=1, n=x_in.shape[1], epsilon=1e-5))
    return out


@nki.jit
def rms_blocks(x_in, w_in):
    out = _out(x_in.shape)
    x, w = nl.load(x_in), nl.load(w_in)
    nl.store(out, nl.rms_norm(x, w, axis=2, n=x_in.shape[2]))
    return out


def _rms(x, w, axis, eps):
    return x / np.sqrt((x * x).mean(axis=axis, keepdims=True) + eps) * w


def test_rms_norm_with_a_full_weight_is_three_instructions():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 64, 80)).astype(np.float32)
    np.testing.assert_allclose(rms_rows(x, w), _rms(x, w, 1, 1e-5), rtol=1e-5, atol=1e-5)
    run = rms_rows.last_run
    assert run.count("activation") == 1  # the squares of x / sqrt(n), summed
    assert run.count("tensor_scalar") == 1  # + epsilon, ^ -0.5
    assert run.count("scalar_tensor_tensor") == 1  # x * that * w


def test_rms_norm_with_one_partition_of_weights():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 80)).astype(np.float32)
    row = rng.standard_normal((1, 80)).astype(np.float32)
    np.testing.assert_allclose(rms_rows(x, row), _rms(x, row, 1, 1e-5), rtol=1e-5, atol=1e-5)
    assert rms_rows.last_run.count("dma_copy") == 4  # two loads, the broadcast, the store


def test_rms_norm_over_the_last_of_two_free_axes():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 3, 32)).astype(np.float32)
    w = rng.standard_normal((16, 1, 32)).astype(np.float32)  # repeated along axis 1
    np.testing.assert_allclose(rms_blocks(x, w), _rms(x, w, 2, 1e-6), rtol=1e-5, atol=1e-5)


# -- where, expand_dims, broadcast_to, the identity -----------------------------------------
@nki.jit
def choices(cond_in, x_in, y_in, col_in):
    cond, x, y, col = nl.load(cond_in), nl.load(x_in), nl.load(y_in), nl.load(col_in)
    outs = [_out(x_in.shape) for _ in range(5)]
    nl.store(outs[0], nl.where(cond, x, y))
    nl.store(outs[1], nl.where(cond, x, -1.5))
    nl.store(outs[2], nl.where(cond, 2.5, y))
    nl.store(outs[3], nl.where(cond, 1.0, 0.0))
    nl.store(outs[4], nl.where(cond, x, col))  # a value per partition
    return tuple(outs)


def test_where_with_tiles_numbers_and_a_column():
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal((2, 32, 24)).astype(np.float32)
    col = rng.standard_normal((32, 1)).astype(np.float32)
    cond = (rng.random((32, 24)) > 0.5).astype(np.float32)
    both, numbers_y, numbers_x, numbers, column = choices(cond, x, y, col)
    keep = cond != 0
    assert np.array_equal(both, np.where(keep, x, y))
    assert np.array_equal(numbers_y, np.where(keep, x, np.float32(-1.5)))
    assert np.array_equal(numbers_x, np.where(keep, np.float32(2.5), y))
    assert np.array_equal(numbers, keep.astype(np.float32))
    assert np.array_equal(column, np.where(keep, x, col))
    assert choices.last_run.count("select") == 5


@nki.jit
def expanded(x_in):
    x = nl.load(x_in)
    p, f = x_in.shape
    column = nl.expand_dims(x, 2)
    assert column.shape == (p, f, 1) and nl.expand_dims(x_in, 0).shape == (1, p, f)
    assert nl.expand_dims(x, (1, -1)).shape == (p, 1, f, 1)
    out = _out((p, f, 1))
    nl.store(out, column)
    return out


def test_expand_dims_is_a_view():
    x = np.random.default_rng(7).standard_normal((32, 16)).astype(np.float32)
    assert np.array_equal(expanded(x), x[:, :, None])
    assert expanded.last_run.count("dma_copy") == 2  # no instruction of its own


@nki.jit
def broadcasts(x_in, row_in):
    x, row = nl.load(x_in), nl.load(row_in)
    p, f = x_in.shape
    every_row, scaled = _out((p, f)), _out((p, f))
    nl.store(every_row, nl.broadcast_to(row, shape=(p, f)))  # a DMA onto every partition
    nl.store(scaled, nl.multiply(x, nl.broadcast_to(nl.mean(x, axis=1), (p, f))))
    return every_row, scaled


def test_broadcast_to_across_partitions_and_along_free_dims():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((32, 16)).astype(np.float32)
    row = rng.standard_normal((1, 16)).astype(np.float32)
    every_row, scaled = broadcasts(x, row)
    assert np.array_equal(every_row, np.repeat(row, 32, axis=0))
    np.testing.assert_allclose(scaled, x * x.mean(axis=1, keepdims=True), rtol=1e-4)


@nki.jit
def identity(x_in):
    out = _out((x_in.shape[0], x_in.shape[0]))
    nl.store(out, nl.shared_identity_matrix(n=x_in.shape[0], dtype=nl.float32))
    return out


def test_shared_identity_matrix():
    assert np.array_equal(identity(np.zeros((48, 4), np.float32)), np.eye(48, dtype=np.float32))
    assert identity.last_run.count("affine_select") == 1


# -- activations with no ScalarE function here ----------------------------------------------
_ERF = np.vectorize(math.erf)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


_ACTIVATIONS = {
    "gelu_dx": lambda x: (
        0.5 * (1 + _ERF(x / np.sqrt(2))) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)
    ),
    "gelu_apprx_sigmoid": lambda x: x * _sigmoid(1.702 * x),
    "gelu_apprx_sigmoid_dx": lambda x: (
        _sigmoid(1.702 * x) * (1 + 1.702 * x * (1 - _sigmoid(1.702 * x)))
    ),
    "silu_dx": lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))),
    "erf_dx": lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x),
    "tan": np.tan,
}


@nki.jit
def activated(x_in, name):
    out = _out(x_in.shape)
    nl.store(out, getattr(nl, name)(nl.load(x_in)))
    return out


@pytest.mark.parametrize("name", sorted(_ACTIVATIONS))
def test_activation_composites_against_numpy(name):
    x = np.linspace(-1.4, 1.4, 16 * 40, dtype=np.float32).reshape(16, 40)
    want = _ACTIVATIONS[name](x.astype(np.float64))
    np.testing.assert_allclose(activated(x, name), want, rtol=2e-5, atol=2e-6)


def test_a_composite_is_not_an_instructions_operator():
    @nki.jit
    def as_op(x_in):
        x = nl.load(x_in)
        nisa.activation(dst=nl.ndarray(x.shape, x.dtype), op=nl.gelu_dx, data=x)
        return x_in

    with pytest.raises(nki.NkiError, match="gelu_dx"):
        as_op(np.ones((4, 4), np.float32))


# -- rounding, remainders, bit logic --------------------------------------------------------
@nki.jit
def rounded(x_in):
    x = nl.load(x_in)
    outs = [_out(x_in.shape) for _ in range(3)]
    nl.store(outs[0], nl.floor(x))
    nl.store(outs[1], nl.ceil(x))
    nl.store(outs[2], nl.trunc(x))
    return tuple(outs)


def test_floor_ceil_and_trunc_are_exact():
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((8, 64)) * 10).astype(np.float32)
    x[0, :10] = [-2.5, -0.5, -0.0, 0.5, 2.5, 3.0, -3.0, 1e-9, -1e-9, 0.49999997]
    x[1, :6] = [2.0**24 + 2, -(2.0**23) - 1, np.inf, -np.inf, 16777215.0, -8388607.5]
    floor, ceil, trunc = rounded(x)
    assert np.array_equal(floor, np.floor(x))
    assert np.array_equal(ceil, np.ceil(x))
    assert np.array_equal(trunc, np.trunc(x))


@nki.jit
def remainders(x_in, y_in):
    x, y = nl.load(x_in), nl.load(y_in)
    outs = [_out(x_in.shape) for _ in range(5)]
    nl.store(outs[0], nl.mod(x, y))
    nl.store(outs[1], nl.fmod(x, y))
    nl.store(outs[2], nl.fmod(x, -3.0))
    nl.store(outs[3], nl.fmod(7.5, y))
    nl.store(outs[4], nl.mod(x, -3.0))
    return tuple(outs)


def test_mod_and_fmod_keep_the_signs_numpy_gives():
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((16, 32)) * 20).astype(np.float32)
    y = (rng.choice([-1, 1], (16, 32)) * rng.uniform(0.5, 6, (16, 32))).astype(np.float32)
    mod, fmod, fmod_number, number_fmod, mod_number = remainders(x, y)
    assert np.array_equal(mod, np.mod(x, y))
    assert np.array_equal(fmod, np.fmod(x, y))
    assert np.array_equal(fmod_number, np.fmod(x, np.float32(-3)))
    assert np.array_equal(number_fmod, np.fmod(np.float32(7.5), y))
    assert np.array_equal(mod_number, np.mod(x, np.float32(-3)))


@nki.jit(target="trn3")
def smaller_magnitudes(x_in, y_in):
    x, y = nl.load(x_in), nl.load(y_in)
    out, with_number = _out(x_in.shape), _out(x_in.shape)
    nl.store(out, nl.abs_min(x, y))
    nl.store(with_number, nl.abs_min(x, -0.5))
    return out, with_number


def test_abs_min_keeps_the_sign_of_the_smaller_magnitude():
    rng = np.random.default_rng(10)
    x, y = rng.standard_normal((2, 16, 32)).astype(np.float32)
    y[0, :4] = -x[0, :4]  # ties give y
    got, with_number = smaller_magnitudes(x, y)
    assert np.array_equal(got, np.where(np.abs(x) < np.abs(y), x, y))
    assert np.array_equal(with_number, np.where(np.abs(x) < 0.5, x, np.float32(-0.5)))


@nki.jit
def bit_logic(ints_in, bytes_in, flags_in):
    ints, small, flags = nl.load(ints_in), nl.load(bytes_in), nl.load(flags_in)
    outs = [_out(ints_in.shape, nl.int32), _out(bytes_in.shape, nl.uint8), _out(flags_in.shape)]
    nl.store(outs[0], nl.invert(ints))
    nl.store(outs[1], nl.invert(small))
    nl.store(outs[2], nl.logical_not(flags))
    return tuple(outs)


def test_invert_and_logical_not():
    rng = np.random.default_rng(11)
    ints = rng.integers(-1000, 1000, (8, 16), dtype=np.int32)
    small = rng.integers(0, 256, (8, 16), dtype=np.uint8)
    flags = (rng.random((8, 16)) > 0.5).astype(np.float32)
    inverted, inverted_bytes, negated = bit_logic(ints, small, flags)
    assert np.array_equal(inverted, np.invert(ints))
    assert np.array_equal(inverted_bytes, np.invert(small))
    assert np.array_equal(negated, 1 - flags)


# -- refusals -------------------------------------------------------------------------------
def _refused(body, *args):
    kernel = nki.jit(body)
    with pytest.raises(nki.NkiError) as caught:
        kernel(*(args or (np.ones((8, 8), np.float32),)))
    return str(caught.value)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda t: nl.softmax(t, axis=0), "softmax: axis 0 of .* is the partition axis"),
        (lambda t: nl.mean(t, axis=(0, 1)), "mean: axis 0 of .* is the partition axis"),
        (lambda t: nl.var(t, axis=2), r"var: axis 2 is outside the 2 dims of \(8, 8\)"),
        (lambda t: nl.expand_dims(t, 0), "expand_dims: axis 0 of .* would make the partition"),
        (lambda t: nl.rms_norm(t, t[:, 0:4], axis=1, n=8), "rms_norm: w .* does not broadcast"),
        (lambda t: nl.invert(t), "invert: .* is float32; bitwise NOT takes"),
        (lambda t: nl.abs_min(t, t), "abs_min: NKI has it on NeuronCore-v4 .trn3. only"),
        (lambda t: nl.dropout(t, 0.5), "nl.dropout is not supported: the random number"),
        (lambda t: nl.rand((8, 8), nl.float32), "nl.rand is not supported"),
        (lambda t: nl.random_seed(t[0:1, 0:1]), "nl.random_seed is not supported"),
        (lambda t: nl.gather_flattened(t, t), "nl.gather_flattened is not supported"),
        (lambda t: nl.device_print("t", t), "nl.device_print is not supported"),
    ],
)
def test_what_cannot_be_computed_is_refused_by_name(call, message):
    def body(x_in):
        call(nl.load(x_in))
        return x_in

    assert re.search(message, _refused(body))


def test_a_tile_in_hbm_is_refused():
    def body(x_in):
        nl.softmax(x_in, axis=1)
        return x_in

    assert "softmax: x x_in is in HBM; load it into SBUF first" in _refused(body)


# -- the legacy API: the composites with masks, the instructions that return tiles ----------
@legacy.jit
def legacy_tail_softmax(x):
    """softmax and mean in 128-row tiles; the last tile is cut by a mask."""
    rows, cols = x.shape
    out = lnl.ndarray(x.shape, x.dtype, buffer=lnl.shared_hbm)
    means = lnl.ndarray((rows, 1), x.dtype, buffer=lnl.shared_hbm)
    i_p, i_f = lnl.mgrid[0:128, 0:cols]
    i_one = lnl.arange(1)[None, :]
    for t in lnl.affine_range((rows + 127) // 128):
        inside = t * 128 + i_p < rows
        tile = lnl.load(x[t * 128 + i_p, i_f], mask=inside)
        lnl.store(out[t * 128 + i_p, i_f], lnl.softmax(tile, axis=1, mask=inside), mask=inside)
        mean = lnl.mean(tile, axis=1, mask=inside)
        lnl.store(means[t * 128 + i_p, i_one], mean, mask=inside)
    return out, means


def test_legacy_composites_under_a_mask():
    x = np.random.default_rng(12).standard_normal((200, 24)).astype(np.float32)
    out, means = legacy_tail_softmax(x)
    np.testing.assert_allclose(out, _softmax(x, 1), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(means, _col(x.mean(axis=1)), rtol=1e-5, atol=1e-6)


@legacy.jit
def legacy_masked_columns(x):
    """mean, var and softmax of the columns from 8 on, by a mask on the free index."""
    p, f = x.shape
    mean_out = lnl.ndarray((p, 1), lnl.float32, buffer=lnl.shared_hbm)
    var_out = lnl.ndarray((p, 1), lnl.float32, buffer=lnl.shared_hbm)
    soft_out = lnl.ndarray((p, f), lnl.float32, buffer=lnl.shared_hbm)
    i_p, i_f = lnl.mgrid[0:p, 0:f]
    t = lnl.load(x[i_p, i_f])
    right = i_f >= 8
    lnl.store(mean_out, lnl.mean(t[i_p, i_f], axis=1, mask=right))
    lnl.store(var_out, lnl.var(t[i_p, i_f], axis=1, mask=right))
    lnl.store(soft_out[i_p, i_f], lnl.softmax(t[i_p, i_f], axis=1, mask=right), mask=right)
    return mean_out, var_out, soft_out


def test_legacy_reductions_over_the_columns_a_mask_keeps():
    x = np.random.default_rng(15).standard_normal((16, 24)).astype(np.float32)
    mean, var, soft = legacy_masked_columns(x)
    kept = x[:, 8:]
    np.testing.assert_allclose(mean, _col(kept.mean(axis=1)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, _col(kept.var(axis=1)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(soft[:, 8:], _softmax(kept, 1), rtol=1e-5, atol=1e-7)


@legacy.jit
def legacy_statistics(x, decay, inputs):
    rows = x.shape[0]
    stats_out = lnl.ndarray((rows, 2), lnl.float32, buffer=lnl.shared_hbm)
    scan_out = lnl.ndarray(decay.shape, lnl.float32, buffer=lnl.shared_hbm)
    sums_out = lnl.ndarray((rows, 2), lnl.float32, buffer=lnl.shared_hbm)
    col_out = lnl.ndarray((1, x.shape[1]), lnl.float32, buffer=lnl.shared_hbm)
    t = lnl.load(x)
    lnl.store(stats_out, lisa.bn_aggr(lisa.bn_stats(t)))
    scan = lisa.tensor_tensor_scan(lnl.load(decay), lnl.load(inputs), 0.0, np.multiply, np.add)
    lnl.store(scan_out, scan)
    sums = lnl.ndarray((rows, 2), lnl.float32, buffer=lnl.sbuf)
    lisa.tensor_scalar_reduce(
        data=t, op0=np.multiply, operand0=2.0, reduce_op=np.add, reduce_res=sums[:, 0:1]
    )
    lisa.activation_reduce(np.exp, t, reduce_op=np.add, reduce_res=sums[:, 1:2])
    lnl.store(sums_out, sums)
    lnl.store(col_out, lisa.tensor_partition_reduce(np.maximum, t))
    return stats_out, scan_out, sums_out, col_out


def test_legacy_statistics_scan_and_reductions():
    rng = np.random.default_rng(13)
    x = rng.standard_normal((64, 96)).astype(np.float32)
    decay = rng.random((64, 40)).astype(np.float32)
    inputs = rng.standard_normal((64, 40)).astype(np.float32)
    stats, scan, sums, col = legacy_statistics(x, decay, inputs)
    np.testing.assert_allclose(stats[:, 0], x.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats[:, 1], x.var(axis=1), rtol=1e-5, atol=1e-6)
    state, want = np.zeros(64, np.float32), np.empty_like(decay)
    for j in range(decay.shape[1]):
        state = decay[:, j] * state + inputs[:, j]
        want[:, j] = state
    np.testing.assert_allclose(scan, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sums[:, 0], 2 * x.sum(axis=1), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(sums[:, 1], np.exp(x).sum(axis=1), rtol=1e-5)
    assert np.array_equal(col, x.max(axis=0, keepdims=True))


@legacy.jit
def legacy_selections(scores, lo, hi, x, y):
    p = scores.shape[0]
    kept_out = lnl.ndarray(scores.shape, lnl.float32, buffer=lnl.shared_hbm)
    best_out = lnl.ndarray((p, 1), lnl.float32, buffer=lnl.shared_hbm)
    sel_out = lnl.ndarray(x.shape, lnl.float32, buffer=lnl.shared_hbm)
    copy_out = lnl.ndarray(x.shape, lnl.float32, buffer=lnl.shared_hbm)
    stt_out = lnl.ndarray(x.shape, lnl.float32, buffer=lnl.shared_hbm)
    recip_out = lnl.ndarray(x.shape, lnl.float32, buffer=lnl.shared_hbm)
    best = lnl.ndarray((p, 1), lnl.float32, buffer=lnl.sbuf)
    kept = lisa.range_select(
        on_true_tile=lnl.load(scores),
        comp_op0=np.greater_equal,
        comp_op1=np.less,
        bound0=lnl.load(lo),
        bound1=lnl.load(hi),
        reduce_res=best,
    )
    lnl.store(kept_out, kept)
    lnl.store(best_out, best)
    xt, yt = lnl.load(x), lnl.load(y)
    positive = lisa.tensor_scalar(xt, np.greater, 0.0, dtype=lnl.uint8)
    chosen = lnl.ndarray(x.shape, lnl.float32, buffer=lnl.sbuf)
    lisa.select_reduce(dst=chosen, predicate=positive, on_true=xt, on_false=-1.0)
    lnl.store(sel_out, chosen)
    lisa.tensor_copy_predicated(src=7.0, dst=yt, predicate=positive)
    lnl.store(copy_out, yt)
    mean = lnl.mean(xt, axis=1)
    lnl.store(
        stt_out,
        lisa.scalar_tensor_tensor(
            data=xt, op0=np.subtract, operand0=mean, op1=np.multiply, operand1=xt
        ),
    )
    lnl.store(recip_out, lisa.reciprocal(xt))
    return kept_out, best_out, sel_out, copy_out, stt_out, recip_out


def test_legacy_selections_and_two_operand_instructions():
    rng = np.random.default_rng(14)
    scores = rng.standard_normal((32, 48)).astype(np.float32)
    lo = _col(np.arange(32) % 7)
    hi = lo + 9
    x, y = rng.standard_normal((2, 32, 20)).astype(np.float32)
    kept, best, sel, copied, stt, recip = legacy_selections(scores, lo, hi, x, y)
    j = np.arange(48)[None, :]
    keep = (j >= lo) & (j < hi)
    fp32_min = np.finfo(np.float32).min
    assert np.array_equal(kept, np.where(keep, scores, fp32_min))
    assert np.array_equal(best[:, 0], np.where(keep, scores, fp32_min).max(axis=1))
    assert np.array_equal(sel, np.where(x > 0, x, np.float32(-1)))
    assert np.array_equal(copied, np.where(x > 0, np.float32(7), y))
    np.testing.assert_allclose(stt, (x - x.mean(axis=1, keepdims=True)) * x, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(recip, 1 / x, rtol=1e-6)


@legacy.jit
def legacy_top8(x):
    p = x.shape[0]
    vals_out = lnl.ndarray((p, 8), lnl.float32, buffer=lnl.shared_hbm)
    idx_out = lnl.ndarray((p, 8), lnl.uint32, buffer=lnl.shared_hbm)
    rest_out = lnl.ndarray(x.shape, lnl.float32, buffer=lnl.shared_hbm)
    t = lnl.load(x)
    top = lisa.max8(src=t)
    lnl.store(vals_out, top)
    lnl.store(idx_out, lisa.nc_find_index8(data=t, vals=top))
    lnl.store(rest_out, lisa.nc_match_replace8(data=t, vals=top, imm=-np.inf))
    return vals_out, idx_out, rest_out


def test_legacy_top8_find_and_replace():
    x = np.stack([np.random.default_rng(i).permutation(64) for i in range(16)])
    x = x.astype(np.float32)
    vals, idx, rest = legacy_top8(x)
    order = np.argsort(-x, axis=1)[:, :8]
    assert np.array_equal(vals, np.take_along_axis(x, order, axis=1))
    assert np.array_equal(idx, order)
    want = x.copy()
    np.put_along_axis(want, order, -np.inf, axis=1)
    assert np.array_equal(rest, want)


@legacy.jit
def legacy_moves(x):
    out = lnl.ndarray((x.shape[1], x.shape[0]), lnl.float32, buffer=lnl.shared_hbm)
    copy = lnl.ndarray(x.shape, x.dtype, buffer=lnl.shared_hbm)
    t = lnl.ndarray(x.shape, x.dtype, buffer=lnl.sbuf)
    lisa.dma_copy(dst=t, src=x)
    lisa.dma_copy(dst=copy, src=t)
    lnl.store(out, lisa.dma_transpose(t, dtype=lnl.float32))
    assert lisa.get_nc_version() == lisa.nc_version.gen3
    return out, copy


def test_legacy_dma_copy_and_transpose():
    x = torch.randn(32, 64, dtype=torch.bfloat16)
    out, copy = legacy_moves(x)
    assert np.array_equal(out, x.float().T.numpy())
    assert np.array_equal(copy, x.float().numpy())


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda t: lisa.iota(t, lnl.int32), "nki.isa.iota is not supported: its affine"),
        (lambda t: lisa.affine_select(t, t, 0.0), "nki.isa.affine_select is not supported"),
        (lambda t: lisa.dropout(t, 0.5), "nki.isa.dropout is not supported"),
        (lambda t: lisa.local_gather(t, t), "nki.isa.local_gather is not supported"),
        (lambda t: lisa.nc_stream_shuffle(t, t, [0]), "nki.isa.nc_stream_shuffle is not"),
        (
            lambda t: lisa.activation(np.exp, t, reduce_cmd=lisa.reduce_cmd.reduce),
            "activation: reduce_cmd 2 .ScalarE's accumulator",
        ),
        (
            lambda t: lisa.tensor_partition_reduce(np.bitwise_or, t),
            "tensor_partition_reduce: op bitwise_or is not supported",
        ),
        (
            lambda t: lisa.dma_copy(dst=t, src=t, dst_rmw_op=np.add),
            "dma_copy: dst_rmw_op .* is not supported",
        ),
    ],
)
def test_legacy_instructions_refused_by_name(call, message):
    @legacy.jit
    def body(x_in):
        call(lnl.load(x_in))
        return x_in

    with pytest.raises(nki.NkiError, match=message):
        body(np.ones((8, 8), np.float32))


def test_a_composite_function_as_an_instruction_op_is_refused_as_what_it_is():
    @nki.jit
    def gelu_dx_as_op(a):
        t = nl.load(a)
        out = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
        nisa.activation(dst=out, op=nl.gelu_dx, data=t)
        return a

    with pytest.raises(nki.NkiError, match="gelu_dx is a function of several instructions"):
        gelu_dx_as_op(np.zeros((4, 4), np.float32))
