"""Neuron tensors: dtypes, host round trips, views, in-place ops, resizing, copies,
printing and scalars."""

from __future__ import annotations

import re

import pytest
import torch

import neuronsim

STORED_DTYPES = [
    torch.float32,
    torch.bfloat16,
    torch.float16,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
    torch.float64,
]


def _sample(dtype: torch.dtype) -> torch.Tensor:
    values = torch.tensor([[0, 1, -2, 3], [4, -5, 6, 127], [-128, 7, 8, 9]])
    if dtype == torch.bool:
        return values % 2 == 0
    if dtype == torch.uint8:
        return values.abs().clamp(max=255).to(dtype)
    if dtype.is_floating_point:
        return (values.double() / 4).to(dtype)  # exact in every float type
    return values.to(dtype)


@pytest.mark.parametrize("dtype", STORED_DTYPES, ids=str)
def test_round_trip(dtype):
    host = _sample(dtype)
    dev = host.to("neuron")
    assert dev.device == torch.device("neuron:0")
    assert dev.dtype == dtype
    assert dev.shape == host.shape
    back = dev.cpu()
    assert back.device.type == "cpu"
    assert back.dtype == dtype
    assert torch.equal(back, host)
    # to(device=..., dtype=...) in one call, both ways
    assert torch.equal(host.float().to("neuron", dtype).to("cpu", dtype), host.float().to(dtype))


@pytest.mark.parametrize("dtype", STORED_DTYPES, ids=str)
def test_round_trip_on_neuron_1(dtype):
    host = _sample(dtype)
    dev = host.to("neuron:1")
    assert dev.device == torch.device("neuron:1")
    assert torch.equal(dev.cpu(), host)


def test_round_trip_does_not_fall_back():
    with neuronsim.strict_mode():
        host = torch.randn(5, 7)
        assert torch.equal(host.to("neuron").cpu(), host)
        assert torch.equal(host.to("neuron:1").to("cpu"), host)
    assert neuronsim.fallback_counts() == {}


def test_empty_and_zero_size_tensors():
    e = torch.empty(0, 3, device="neuron")
    assert e.shape == (0, 3)
    assert e.cpu().shape == (0, 3)
    assert torch.empty(0).to("neuron").cpu().numel() == 0
    s = torch.tensor(2.5).to("neuron")
    assert s.dim() == 0
    assert s.cpu().item() == 2.5


def test_float64_is_stored_and_its_ops_fall_back():
    x = torch.tensor([1.0, 2.0, 1e-300], dtype=torch.float64)
    d = x.to("neuron")
    assert d.dtype == torch.float64
    assert torch.equal(d.cpu(), x)  # full double precision, not rounded through float32
    y = (d * 2).cpu()
    assert y.dtype == torch.float64
    assert torch.equal(y, x * 2)
    assert sum(neuronsim.fallback_counts().values()) >= 1


def test_complex_is_stored_complex64_products_run_on_the_device_and_the_rest_falls_back():
    # The engines have no complex type: complex64 products and sums run on the real and
    # imaginary parts (complex rotary embeddings); complex128, and other complex ops, run
    # on the CPU, counted.
    c = torch.polar(torch.ones(4), torch.arange(4.0))
    d = c.to("neuron")
    assert d.dtype == torch.complex64 and d.device.type == "neuron"
    neuronsim.reset_fallback_counts()
    with neuronsim.strict_mode():
        torch.testing.assert_close((d * d).cpu(), c * c)
        torch.testing.assert_close(torch.view_as_real(d).cpu(), torch.view_as_real(c))
    torch.testing.assert_close((d / d).cpu(), c / c)
    assert "aten::div.Tensor" in neuronsim.fallback_counts()
    wide = c.to(torch.complex128)
    w = wide.to("neuron")
    assert w.dtype == torch.complex128
    torch.testing.assert_close((w * w).cpu(), wide * wide)
    assert "aten::mul.Tensor" in neuronsim.fallback_counts()
    with neuronsim.strict_mode(), pytest.raises(RuntimeError, match="aten::mul"):
        w * w


# ---- views ------------------------------------------------------------------------


@pytest.fixture
def grid():
    """A 3x4 float32 tensor on the host and the same on neuron:0."""
    host = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    return host, host.to("neuron")


VIEWS = {
    "slice rows": lambda t: t[1:],
    "slice columns": lambda t: t[:, 1:3],
    "step": lambda t: t[:, ::2],
    "column": lambda t: t[:, 1],
    "element": lambda t: t[2, 3],
    "transpose": lambda t: t.t(),
    "transpose dims": lambda t: t.transpose(0, 1),
    "view": lambda t: t.view(4, 3),
    "view flat": lambda t: t.view(-1),
    "reshape": lambda t: t.reshape(2, 6),
    "as_strided": lambda t: t.as_strided((2, 2), (1, 4), 1),
    "narrow": lambda t: t.narrow(1, 1, 2),
    "expand": lambda t: t[:1].expand(3, 4),
    "unsqueeze": lambda t: t.unsqueeze(0),
    "permute": lambda t: t.unsqueeze(2).permute(2, 1, 0),
    "select": lambda t: t.select(0, 1),
    "diagonal": lambda t: t.diagonal(),
    "unfold": lambda t: t.unfold(1, 2, 2),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_values(grid, name):
    host, dev = grid
    make = VIEWS[name]
    expected = make(host)
    view = make(dev)
    assert view.device == dev.device
    assert view.shape == expected.shape
    assert view.stride() == expected.stride()
    assert view.storage_offset() == expected.storage_offset()
    assert view.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
    assert torch.equal(view.cpu(), expected)  # a non-contiguous copy to the host


def test_views_do_not_fall_back(grid):
    host, dev = grid
    with neuronsim.strict_mode():
        for name in ["slice rows", "transpose", "view", "as_strided", "narrow", "expand"]:
            assert torch.equal(VIEWS[name](dev).cpu(), VIEWS[name](host)), name
    assert neuronsim.fallback_counts() == {}


def test_reshape_of_non_contiguous_copies(grid):
    host, dev = grid
    r = dev.t().reshape(12)
    assert r.is_contiguous()
    assert torch.equal(r.cpu(), host.t().reshape(12))
    r.fill_(0)
    assert torch.equal(dev.cpu(), host)  # a copy, not a view


def test_contiguous(grid):
    host, dev = grid
    t = dev.t()
    assert not t.is_contiguous()
    c = t.contiguous()
    assert c.is_contiguous()
    assert c.device == dev.device
    assert c.untyped_storage().data_ptr() != dev.untyped_storage().data_ptr()
    assert torch.equal(c.cpu(), host.t().contiguous())
    assert dev.contiguous() is dev


def test_in_place_on_a_column_view_changes_the_base(grid):
    host, dev = grid
    dev[:, 1].add_(1)
    host[:, 1].add_(1)
    assert torch.equal(dev.cpu(), host)


def test_in_place_on_a_transposed_view_changes_the_base(grid):
    host, dev = grid
    dev.t()[1:3].mul_(-1)
    host.t()[1:3].mul_(-1)
    assert torch.equal(dev.cpu(), host)


def test_setitem(grid):
    host, dev = grid
    dev[0] = 7.0
    host[0] = 7.0
    dev[1:, 2] = torch.tensor([-1.0, -2.0]).to("neuron")
    host[1:, 2] = torch.tensor([-1.0, -2.0])
    dev[2, 0] = torch.tensor(5.0)  # a CPU scalar is allowed, as on CUDA
    host[2, 0] = 5.0
    assert torch.equal(dev.cpu(), host)


def test_write_through_view_then_read_view(grid):
    _, dev = grid
    view = dev.view(4, 3)
    dev[0, 0] = 100.0
    assert view[0, 0].item() == 100.0


# ---- resize_ and set_ ------------------------------------------------------------


def test_resize_grows_and_keeps_the_prefix():
    d = torch.arange(4, dtype=torch.float32).to("neuron")
    d.resize_(3, 3)
    assert d.shape == (3, 3)
    assert d.device == torch.device("neuron:0")
    assert torch.equal(d.view(-1)[:4].cpu(), torch.arange(4, dtype=torch.float32))
    d.resize_(2)
    assert d.shape == (2,)
    assert torch.equal(d.cpu(), torch.tensor([0.0, 1.0]))
    assert d.untyped_storage().nbytes() >= 9 * 4


def test_resize_on_neuron_1_stays_on_neuron_1():
    d = torch.arange(4, dtype=torch.float32).to("neuron:1")
    before = torch.neuron.memory_allocated(1)
    d.resize_(1000)
    assert d.device == torch.device("neuron:1")
    assert torch.neuron.memory_allocated(1) > before
    assert torch.equal(d[:4].cpu(), torch.arange(4, dtype=torch.float32))


def test_set_storage_with_offset(grid):
    host, dev = grid
    t = torch.empty(0, device="neuron")
    t.set_(dev.untyped_storage(), 4, (2, 2), (4, 1))
    assert t.device == dev.device
    assert torch.equal(t.cpu(), host[1:3, 0:2])
    t.fill_(-1)
    assert torch.equal(dev[1:3, 0:2].cpu(), torch.full((2, 2), -1.0))


def test_set_tensor_and_set_empty(grid):
    host, dev = grid
    t = torch.empty(5, device="neuron")
    t.set_(dev)
    assert t.shape == dev.shape
    assert t.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
    assert torch.equal(t.cpu(), host)
    t.set_()
    assert t.numel() == 0
    assert t.device.type == "neuron"
    assert torch.equal(dev.cpu(), host)


def test_untyped_storage_round_trip():
    dev = torch.arange(6, dtype=torch.int32).to("neuron")
    storage = dev.untyped_storage()
    assert storage.device == torch.device("neuron:0")
    assert storage.nbytes() == 24
    expected = torch.arange(6, dtype=torch.int32).untyped_storage().tolist()
    assert storage.cpu().tolist() == expected


# ---- copies -----------------------------------------------------------------------


def test_copy_between_neuron_tensors_same_dtype():
    src = torch.randn(4, 5).to("neuron")
    dst = torch.empty(4, 5, device="neuron")
    with neuronsim.strict_mode():
        dst.copy_(src)  # a device-to-device DMA, no fallback
    assert torch.equal(dst.cpu(), src.cpu())
    assert dst.untyped_storage().data_ptr() != src.untyped_storage().data_ptr()


@pytest.mark.parametrize(
    ("src_dtype", "dst_dtype"),
    [
        (torch.float32, torch.bfloat16),
        (torch.float32, torch.int32),
        (torch.int64, torch.float32),
        (torch.bfloat16, torch.float16),
        (torch.float32, torch.float64),
        (torch.int32, torch.bool),
    ],
    ids=str,
)
def test_copy_across_dtypes_on_neuron(src_dtype, dst_dtype):
    host = torch.tensor([[0.0, 1.0, -2.0], [3.0, 0.0, 7.0]]).to(src_dtype)
    src = host.to("neuron")
    dst = torch.empty(2, 3, dtype=dst_dtype, device="neuron")
    dst.copy_(src)
    assert dst.dtype == dst_dtype
    assert torch.equal(dst.cpu(), host.to(dst_dtype))
    assert torch.equal(src.to(dst_dtype).cpu(), host.to(dst_dtype))


def test_copy_from_and_to_host_across_dtypes():
    host = torch.tensor([1.5, -2.25, 3.0], dtype=torch.float64)
    dst = torch.empty(3, dtype=torch.float32, device="neuron")
    dst.copy_(host)
    assert torch.equal(dst.cpu(), host.float())
    back = torch.empty(3, dtype=torch.float16)
    back.copy_(dst)
    assert torch.equal(back, host.half())


def test_copy_into_non_contiguous_neuron_view(grid):
    host, dev = grid
    dev.t()[0].copy_(torch.tensor([-1.0, -2.0, -3.0]))
    host.t()[0].copy_(torch.tensor([-1.0, -2.0, -3.0]))
    assert torch.equal(dev.cpu(), host)
    dev[:, 2].copy_(dev[:, 3])  # neuron view to neuron view
    host[:, 2].copy_(host[:, 3])
    assert torch.equal(dev.cpu(), host)


def test_broadcasting_copy(grid):
    _, dev = grid
    dev.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]).to("neuron"))
    assert torch.equal(dev.cpu(), torch.tensor([1.0, 2.0, 3.0, 4.0]).expand(3, 4))


def test_copy_neuron0_to_neuron1():
    host = torch.randn(3, 8)
    a = host.to("neuron:0")
    b = a.to("neuron:1")
    assert b.device == torch.device("neuron:1")
    assert torch.equal(b.cpu(), host)
    c = torch.empty(3, 8, device="neuron:1")
    c.copy_(a)
    assert torch.equal(c.cpu(), host)
    d = torch.zeros(3, 8, device="neuron:0")
    d.copy_(b)
    assert torch.equal(d.cpu(), host)
    # a non-contiguous source across devices
    e = a.t().to("neuron:1")
    assert e.device == torch.device("neuron:1")
    assert torch.equal(e.cpu(), host.t())


def test_clone_and_detach(grid):
    host, dev = grid
    c = dev.clone()
    assert c.device == dev.device
    assert c.untyped_storage().data_ptr() != dev.untyped_storage().data_ptr()
    assert torch.equal(c.cpu(), host)
    d = dev.detach()
    assert d.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()


# ---- printing and scalars ----------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        torch.arange(6).reshape(2, 3),
        torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
        torch.tensor([True, False]),
        torch.tensor([1.0, 2.0], dtype=torch.float64),
        torch.tensor(3.5),
        torch.empty(0),
        torch.randn(40, 50),  # summarized
        torch.tensor([float("nan"), float("inf"), 1.0]),
    ],
    ids=["int64", "bf16", "bool", "float64", "scalar", "empty", "large", "nonfinite"],
)
def test_printing_is_host_inspection(host):
    dev = host.to("neuron")
    with neuronsim.strict_mode():
        text = repr(dev)
        str(dev)
    assert "device='neuron:0'" in text
    assert neuronsim.fallback_counts() == {}
    assert re.sub(r",\s*device='neuron:0'", "", text) == repr(host)


def test_printing_a_view_and_neuron_1():
    host = torch.arange(12.0).reshape(3, 4)
    with neuronsim.strict_mode():
        text = repr(host.to("neuron:1").t())
    assert "device='neuron:1'" in text
    assert neuronsim.fallback_counts() == {}


def test_printing_counts_nothing_and_counting_resumes_after():
    dev = torch.arange(4.0).to("neuron")
    repr(dev)
    assert neuronsim.fallback_counts() == {}
    torch.logcumsumexp(dev, 0)
    assert any("logcumsumexp" in k for k in neuronsim.fallback_counts())


def test_item():
    with neuronsim.strict_mode():
        assert torch.tensor(2.5).to("neuron").item() == 2.5
        assert torch.tensor([7], dtype=torch.int64).to("neuron").item() == 7
        assert torch.tensor(True).to("neuron").item() is True
        assert torch.tensor(1.5, dtype=torch.bfloat16).to("neuron").item() == 1.5
        assert torch.arange(10.0).to("neuron")[3].item() == 3.0
        assert float(torch.tensor(4.0).to("neuron")) == 4.0
        assert int(torch.tensor(9).to("neuron")) == 9
    assert neuronsim.fallback_counts() == {}


def test_tolist():
    host = torch.arange(6).reshape(2, 3)
    with neuronsim.strict_mode():
        assert host.to("neuron").tolist() == [[0, 1, 2], [3, 4, 5]]
        assert host.to("neuron").t().tolist() == [[0, 3], [1, 4], [2, 5]]
        assert torch.tensor([0.5, 1.0], dtype=torch.float16).to("neuron").tolist() == [0.5, 1.0]
    assert neuronsim.fallback_counts() == {}


def test_numpy_needs_cpu_first():
    dev = torch.arange(3.0).to("neuron")
    assert dev.cpu().numpy().tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(TypeError):
        dev.numpy()


def test_kernel_smoke():
    a = torch.randn(8, 16)
    b = torch.randn(16, 4)
    torch.testing.assert_close((a.to("neuron") @ b.to("neuron")).cpu(), a @ b)
    torch.testing.assert_close((a.to("neuron") + a.to("neuron")).cpu(), a + a)
    torch.testing.assert_close((a.to("neuron") * a.to("neuron")).cpu(), a * a)
    torch.testing.assert_close(torch.softmax(a.to("neuron"), -1).cpu(), torch.softmax(a, -1))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64, torch.complex64], ids=str)
def test_types_without_engines_move_exactly_on_the_device(dtype):
    # No engine computes int64, float64 or complex, but DMA moves their bytes: relayouts
    # and concatenations stay on the device and keep every bit (2**62 included).
    if dtype == torch.int64:
        x = torch.tensor([[2**62, -5, 7], [2**40 + 3, 0, -(2**33)]])
    else:
        x = (torch.randn(2, 3, dtype=torch.float64) * 1e300).to(dtype)
    d = x.to("neuron")
    neuronsim.reset_fallback_counts()
    assert torch.equal(d.t().contiguous().cpu(), x.t().contiguous())
    assert torch.equal(torch.cat([d, d[:, :1]], dim=1).cpu(), torch.cat([x, x[:, :1]], dim=1))
    assert torch.equal(d[:1].expand(3, 3).contiguous().cpu(), x[:1].expand(3, 3))
    assert neuronsim.fallback_counts() == {}
