"""The singular value decomposition on the device, in strict mode, against LAPACK's on the CPU:
singular values, vectors up to their sign (no driver fixes one), orthonormal factors, full and
reduced forms, rank-deficient and empty matrices, and the gradient."""

from __future__ import annotations

import pytest
import torch

import neuronsim


@pytest.fixture(autouse=True)
def strict():
    with neuronsim.strict_mode():
        yield


def _distinct(*shape, seed=3):
    """A matrix whose singular values are 1, 2, ... (vectors unique up to sign)."""
    g = torch.Generator().manual_seed(seed)
    m, n = shape[-2:]
    u, _ = torch.linalg.qr(torch.randn(*shape[:-2], m, m, generator=g))
    v, _ = torch.linalg.qr(torch.randn(*shape[:-2], n, n, generator=g))
    k = min(m, n)
    s = torch.arange(1, k + 1, dtype=torch.float32).flip(0)
    return (u[..., :k] * s) @ v[..., :k].mT


def _orthonormal(q, rows: bool = False):
    q = q.mT if rows else q
    eye = torch.eye(q.shape[-1]).expand(*q.shape[:-2], -1, -1)
    torch.testing.assert_close(q.mT @ q, eye, atol=1e-5, rtol=0)


@pytest.mark.parametrize("full", [False, True], ids=["reduced", "full"])
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (3, 5), (4, 4), (2, 6, 5), (3, 3, 7), (8, 1)])
def test_svd_matches_lapack_up_to_signs(shape, full):
    a = _distinct(*shape)
    u, s, vh = (t.cpu() for t in torch.linalg.svd(a.to("neuron"), full_matrices=full))
    want_u, want_s, want_vh = torch.linalg.svd(a, full_matrices=full)
    assert u.shape == want_u.shape and s.shape == want_s.shape and vh.shape == want_vh.shape
    k = s.shape[-1]
    torch.testing.assert_close(s, want_s, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(u[..., :k].abs(), want_u[..., :k].abs(), atol=1e-4, rtol=0)
    torch.testing.assert_close(vh[..., :k, :].abs(), want_vh[..., :k, :].abs(), atol=1e-4, rtol=0)
    _orthonormal(u)
    _orthonormal(vh, rows=True)
    torch.testing.assert_close(
        (u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :], a, atol=1e-5, rtol=0
    )


@pytest.mark.parametrize("full", [False, True], ids=["reduced", "full"])
def test_rank_deficient_and_zero_matrices_get_orthonormal_completions(full):
    g = torch.Generator().manual_seed(4)
    low_rank = torch.randn(6, 2, generator=g) @ torch.randn(2, 5, generator=g)
    twin_columns = torch.randn(5, 3, generator=g)
    twin_columns[:, 1] = twin_columns[:, 0]
    for a in (low_rank, low_rank.mT, twin_columns, torch.zeros(4, 3), torch.zeros(2, 3, 4)):
        u, s, vh = (t.cpu() for t in torch.linalg.svd(a.to("neuron"), full_matrices=full))
        torch.testing.assert_close(s, torch.linalg.svdvals(a), atol=1e-5, rtol=1e-5)
        _orthonormal(u)
        _orthonormal(vh, rows=True)
        k = s.shape[-1]
        torch.testing.assert_close(
            (u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :], a, atol=1e-5, rtol=0
        )


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0), (2, 0, 3), (0, 3, 3)])
@pytest.mark.parametrize("full", [False, True], ids=["reduced", "full"])
def test_empty_matrices_as_the_cpu(shape, full):
    got = torch.linalg.svd(torch.zeros(shape, device="neuron"), full_matrices=full)
    for g, w in zip(got, torch.linalg.svd(torch.zeros(shape), full_matrices=full), strict=True):
        assert torch.equal(g.cpu(), w)


def test_singular_values_norms_and_condition_numbers():
    a = torch.randn(3, 4, 6, generator=torch.Generator().manual_seed(5))
    for f in (
        torch.linalg.svdvals,
        lambda x: torch.linalg.matrix_norm(x, 2),
        lambda x: torch.linalg.matrix_norm(x, -2),
        lambda x: torch.linalg.matrix_norm(x, "nuc"),
        torch.linalg.cond,
    ):
        torch.testing.assert_close(f(a.to("neuron")).cpu(), f(a), atol=1e-5, rtol=1e-5)
    _, s, _ = torch._linalg_svd(a.to("neuron"), compute_uv=False)
    torch.testing.assert_close(s.cpu(), torch.linalg.svdvals(a), atol=1e-5, rtol=1e-5)


def test_svd_gradient():
    a = _distinct(2, 5, 4)

    def loss(m):
        u, s, vh = torch.linalg.svd(m, full_matrices=False)
        return (u @ vh).sum() + (s**2).sum()

    grads = []
    for device in ("cpu", "neuron"):
        m = a.clone().to(device).requires_grad_()
        loss(m).backward()
        grads.append(m.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0], atol=1e-4, rtol=1e-4)


def test_a_larger_matrix_converges_to_lapacks_values():
    a = torch.randn(48, 40, generator=torch.Generator().manual_seed(6))
    u, s, vh = (t.cpu() for t in torch.linalg.svd(a.to("neuron"), full_matrices=False))
    torch.testing.assert_close(s, torch.linalg.svdvals(a), atol=1e-4, rtol=1e-5)
    _orthonormal(u)
    torch.testing.assert_close((u * s) @ vh, a, atol=1e-4, rtol=0)


def test_tiny_huge_and_unbalanced_matrices_keep_their_singular_values():
    """Sums of squares would overflow or underflow in FP32: each matrix is scaled first."""
    shear = torch.tensor([[1.0, 1.0], [0.0, 1.0]])
    for a in (1e-12 * shear, 1e12 * shear, 1e20 * shear):
        got = torch.linalg.svdvals(a.to("neuron")).cpu()
        torch.testing.assert_close(got, torch.linalg.svdvals(a), rtol=1e-5, atol=0)
        got = torch.linalg.cond(a.to("neuron")).cpu()
        torch.testing.assert_close(got, torch.linalg.cond(a), rtol=1e-5, atol=0)
    # Columns 1e20 apart: their squares are FP32 subnormals, the sweeps cannot settle, and the
    # host's check sends the matrix to the CPU, counted, rather than return what it has.
    unbalanced = torch.tensor([[1.0, 1e-20], [0.0, 1e-20]])
    with neuronsim.strict_mode(False):
        neuronsim.reset_fallback_counts()
        got = torch.linalg.svdvals(unbalanced.to("neuron")).cpu()
        assert neuronsim.fallback_counts() == {"aten::_linalg_svd.U": 1}
    torch.testing.assert_close(got, torch.linalg.svdvals(unbalanced), rtol=1e-5, atol=0)


def test_values_that_are_not_finite_take_the_cpus_answer_counted():
    nan = torch.tensor([[float("nan"), 1.0], [0.0, 1.0]])
    with neuronsim.strict_mode(False):
        neuronsim.reset_fallback_counts()
        with pytest.raises(torch.linalg.LinAlgError, match="non-finite"):
            torch.linalg.svd(nan.to("neuron"))
        assert neuronsim.fallback_counts() == {"aten::_linalg_svd.U": 1}


def test_a_complex_matrix_falls_back_with_real_singular_values():
    a = torch.randn(3, 3, dtype=torch.complex64, generator=torch.Generator().manual_seed(8))
    with neuronsim.strict_mode(False):
        _, s, _ = torch.linalg.svd(a.to("neuron"))
    assert s.dtype == torch.float32
    torch.testing.assert_close(s.cpu(), torch.linalg.svdvals(a))
