"""The ops a training step adds to the forward, on the device in strict mode: the
negative log-likelihood loss behind cross_entropy (every reduction, ignore_index inside
and outside the classes, targets out of bounds) and the embedding's gradient (repeated
indices, padding_idx)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import neuronsim


@pytest.fixture(autouse=True)
def strict():
    neuronsim.set_strict(True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [-100, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cross_entropy_forward_and_backward(reduction, ignore_index, dtype):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(37, 11, generator=g).to(dtype).requires_grad_()
    t = torch.randint(0, 11, (37,), generator=g)
    t[::5] = ignore_index
    xd = x.detach().to("neuron").requires_grad_()
    loss = F.cross_entropy(x, t, reduction=reduction, ignore_index=ignore_index)
    got = F.cross_entropy(xd, t.to("neuron"), reduction=reduction, ignore_index=ignore_index)
    grad = torch.randn(loss.shape, generator=g).to(dtype)
    loss.backward(grad)
    got.backward(grad.to("neuron"))
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
    torch.testing.assert_close(got.cpu(), loss, **tol)
    torch.testing.assert_close(xd.grad.cpu(), x.grad, **tol)


def test_every_target_ignored_gives_nan_as_torch():
    x = torch.randn(4, 5)
    t = torch.full((4,), -100)
    got = F.cross_entropy(x.to("neuron"), t.to("neuron"))
    assert torch.isnan(got.cpu()) and torch.isnan(F.cross_entropy(x, t))


@pytest.mark.parametrize("bad", [7, -3, 2**32 + 1])
def test_a_target_out_of_bounds_is_an_index_error(bad):
    x = torch.randn(3, 7).to("neuron")
    t = torch.tensor([1, bad, 0]).to("neuron")
    with pytest.raises(IndexError, match=f"Target {bad} is out of bounds"):
        F.cross_entropy(x, t)
    assert F.cross_entropy(x, torch.tensor([1, 2, 0]).to("neuron")).cpu().isfinite()


def test_class_weights_run_on_the_device():
    neuronsim.set_strict(False)
    neuronsim.reset_fallback_counts()
    x, t, w = torch.randn(6, 4), torch.tensor([0, 1, 2, 3, 0, 1]), torch.rand(4)
    got = F.cross_entropy(x.to("neuron"), t.to("neuron"), weight=w.to("neuron"))
    torch.testing.assert_close(got.cpu(), F.cross_entropy(x, t, weight=w))
    assert neuronsim.fallback_counts() == {}


@pytest.mark.parametrize("padding_idx", [None, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_embedding_gradient_sums_repeated_indices(padding_idx, dtype):
    w = torch.randn(20, 8, generator=torch.Generator().manual_seed(4)).to(dtype).requires_grad_()
    wd = w.detach().to("neuron").requires_grad_()
    idx = torch.tensor([[1, 3, 3, 0], [19, 3, 1, 1]])
    F.embedding(idx, w, padding_idx=padding_idx).float().pow(2).sum().backward()
    F.embedding(idx.to("neuron"), wd, padding_idx=padding_idx).float().pow(2).sum().backward()
    tol = {"rtol": 0, "atol": 0} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1e-2}
    torch.testing.assert_close(wd.grad.cpu(), w.grad, **tol)


@pytest.mark.parametrize("cls", [torch.optim.AdamW, torch.optim.Adam])
@pytest.mark.parametrize(
    "options",
    [
        {"fused": True},
        {"fused": True, "amsgrad": True, "weight_decay": 0.1},
        {"fused": True, "maximize": True},
        {"foreach": True},
    ],
    ids=["fused", "amsgrad+wd", "maximize", "foreach"],
)
def test_adam_steps_follow_the_cpu(cls, options):
    g = torch.Generator().manual_seed(5)
    cpu = [torch.randn(33, 7, generator=g), torch.randn(130, generator=g).to(torch.float32)]
    dev = [p.clone().to("neuron").requires_grad_() for p in cpu]
    cpu = [p.requires_grad_() for p in cpu]
    opts = [cls(ps, lr=1e-2, **options) for ps in (cpu, dev)]
    schedules = [torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1 / (1 + s)) for o in opts]
    built = None
    for step in range(6):
        grads = [torch.randn(p.shape, generator=g) for p in cpu]
        for ps, opt, sched in zip((cpu, dev), opts, schedules):
            for p, grad in zip(ps, grads):
                p.grad = grad.to(p.device)
            opt.step()
            sched.step()
        if step == 1:
            built = neuronsim.kernels_built()
    for c, d in zip(cpu, dev):
        torch.testing.assert_close(d.detach().cpu(), c.detach(), rtol=1e-5, atol=1e-6)
    # A new learning rate each step is an input of the same kernels, not new kernels.
    assert neuronsim.kernels_built() == built


def test_amp_gradient_scaling_falls_back_counted():
    neuronsim.set_strict(False)
    p = torch.randn(5, device="neuron", requires_grad=True)
    p.grad = torch.ones(5, device="neuron")
    opt = torch.optim.AdamW([p], lr=0.1, fused=True)
    opt.grad_scale = None
    torch._fused_adamw_(
        [p.detach()],
        [p.grad],
        [torch.zeros(5, device="neuron")],
        [torch.zeros(5, device="neuron")],
        [],
        [torch.ones((), device="neuron")],
        lr=0.1,
        beta1=0.9,
        beta2=0.999,
        weight_decay=0.0,
        eps=1e-8,
        amsgrad=False,
        maximize=False,
        grad_scale=torch.ones((), device="neuron"),
    )
    assert "aten::_fused_adamw_" in neuronsim.fallback_counts()


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layer_norm_backward(affine, dtype):
    g = torch.Generator().manual_seed(6)
    ln = torch.nn.LayerNorm(40, elementwise_affine=affine).to(dtype)
    if affine:
        with torch.no_grad():
            ln.weight.normal_(generator=g)
            ln.bias.normal_(generator=g)
    dev = torch.nn.LayerNorm(40, elementwise_affine=affine).to(dtype).to("neuron")
    dev.load_state_dict(ln.state_dict())
    x = torch.randn(3, 7, 40, generator=g).to(dtype).requires_grad_()
    xd = x.detach().to("neuron").requires_grad_()
    grad = torch.randn(3, 7, 40, generator=g).to(dtype)
    ln(x).backward(grad)
    dev(xd).backward(grad.to("neuron"))
    # bf16 parameter gradients are sums of 21 rows rounded to 8 bits: a few hundredths.
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 1e-1}
    torch.testing.assert_close(xd.grad.cpu(), x.grad, **tol)
    if affine:
        torch.testing.assert_close(dev.weight.grad.cpu(), ln.weight.grad, **tol)
        torch.testing.assert_close(dev.bias.grad.cpu(), ln.bias.grad, **tol)


def test_tanh_gelu_gradient():
    x = torch.randn(50, 30, generator=torch.Generator().manual_seed(7), requires_grad=True)
    xd = x.detach().to("neuron").requires_grad_()
    F.gelu(x, approximate="tanh").sum().backward()
    F.gelu(xd, approximate="tanh").sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad, rtol=1e-5, atol=1e-6)


def test_mm_into_an_out_tensor():
    a, b = torch.randn(5, 7), torch.randn(7, 3)
    out = torch.empty(0, device="neuron")
    torch.mm(a.to("neuron"), b.to("neuron"), out=out)
    assert out.shape == (5, 3)
    torch.testing.assert_close(out.cpu(), a @ b)


@pytest.mark.parametrize(
    "f",
    [
        lambda t: t.clamp(-1, 2),
        lambda t: t.clamp(min=0.5),
        lambda t: t.clamp(max=-3),
        lambda t: torch.clamp(t, 3, 1),  # min above max: torch gives max everywhere
        F.softplus,
        lambda t: F.softplus(t, beta=2, threshold=5),
    ],
    ids=["clamp", "clamp_min", "clamp_max", "crossed", "softplus", "softplus beta"],
)
def test_clamp_and_softplus(f):
    x = torch.randn(40, 50, generator=torch.Generator().manual_seed(13)) * 10
    x[0, 0] = float("nan")
    torch.testing.assert_close(f(x.to("neuron")).cpu(), f(x), rtol=1e-5, atol=1e-5, equal_nan=True)


def test_clamp_bounds_are_inputs_not_new_kernels():
    d = torch.randn(8, 8).to("neuron")
    d.clamp(-1, 1)
    built = neuronsim.kernels_built()
    for k in range(2, 12):
        got = d.clamp(-k / 10, k / 10)
    assert neuronsim.kernels_built() == built
    torch.testing.assert_close(got.cpu(), d.cpu().clamp(-1.1, 1.1))
