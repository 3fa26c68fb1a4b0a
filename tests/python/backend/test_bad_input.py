"""Bad input gives a clear Python error, and the process and the device stay usable:
a device index past the count, out of memory, a wrong-dtype copy, an op on tensors of
two devices."""

from __future__ import annotations

import re

import pytest
import torch

GIB = 2**30


# ---- a device index past the count ---------------------------------------------------

PAST_THE_COUNT = {
    "empty": lambda i: torch.empty(1, device=f"neuron:{i}"),
    "zeros": lambda i: torch.zeros(2, 2, device=f"neuron:{i}"),
    "empty_strided": lambda i: torch.empty_strided((2,), (1,), device=f"neuron:{i}"),
    "to from host": lambda i: torch.ones(2).to(f"neuron:{i}"),
    "to from neuron": lambda i: torch.ones(2).to("neuron").to(f"neuron:{i}"),
    "set_device": lambda i: torch.neuron.set_device(i),
    "device context": lambda i: torch.neuron.device(i).__enter__(),
    "get_device_properties": lambda i: torch.neuron.get_device_properties(i),
    "get_device_name": lambda i: torch.neuron.get_device_name(i),
    "mem_get_info": lambda i: torch.neuron.mem_get_info(i),
    "get_rng_state": lambda i: torch.neuron.get_rng_state(i),
    "Stream": lambda i: torch.neuron.Stream(device=i),
    "memory_allocated": lambda i: torch.neuron.memory_allocated(i),
    "memory_stats": lambda i: torch.neuron.memory_stats(i),
    "current_stream": lambda i: torch.neuron.current_stream(i),
    "synchronize": lambda i: torch.neuron.synchronize(i),
}


@pytest.mark.parametrize("name", list(PAST_THE_COUNT))
def test_device_index_past_the_count(name, device_works):
    count = torch.neuron.device_count()
    for index in (count, 99):
        with pytest.raises(RuntimeError) as err:
            PAST_THE_COUNT[name](index)
        message = str(err.value)
        assert f"neuron:{index}" in message, message
        assert re.search(rf"\b{count}\b", message), f"the count {count} is not named: {message}"
    assert torch.neuron.current_device() == 0
    device_works()


def test_the_last_device_exists():
    last = torch.neuron.device_count() - 1
    t = torch.ones(3).to(f"neuron:{last}")
    assert t.device == torch.device("neuron", last)
    assert torch.equal(t.cpu(), torch.ones(3))


# ---- out of memory -------------------------------------------------------------------


def _resident_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@pytest.mark.parametrize("gib", [200, 97], ids=["200GiB", "97GiB"])
def test_out_of_memory_is_a_torch_out_of_memory_error(gib, device_works):
    # More than the 96 GiB HBM of a trn2 chip (and than this host's memory): the request
    # must fail as the device's OutOfMemoryError without touching host memory.
    asked = gib * GIB
    free, total = torch.neuron.mem_get_info()
    assert asked > total
    allocated = torch.neuron.memory_allocated()
    rss = _resident_bytes()
    with pytest.raises(torch.OutOfMemoryError) as err:
        torch.empty(asked, dtype=torch.uint8, device="neuron")
    # Before giving up the allocator returns its cache: what is free after is what the
    # message must name.
    free_after, total_after = torch.neuron.mem_get_info()
    assert total_after == total
    assert free_after >= free
    message = str(err.value)
    assert str(asked) in message, f"the request is not named: {message}"
    assert str(free_after) in message, f"the free memory is not named: {message}"
    assert isinstance(err.value, RuntimeError)  # torch.OutOfMemoryError is one
    assert _resident_bytes() < rss + GIB
    assert torch.neuron.memory_allocated() == allocated
    assert torch.neuron.memory_stats()["num_ooms"] >= 1
    device_works()


def test_a_neuroncore_allocates_in_the_hbm_stack_beside_it(device_works):
    # A trn2 chip has 96 GiB in 4 stacks of 24 GiB, each beside two cores: 25 GiB fits the
    # chip, not the stack of a core.
    free, total = torch.neuron.mem_get_info()
    assert total == 24 * GIB
    with pytest.raises(
        torch.OutOfMemoryError, match=r"HBM stack of neuron:0 \(physical core 0\) holds 24\.00 GiB"
    ):
        torch.empty(25 * GIB, dtype=torch.uint8, device="neuron")
    device_works()


def test_out_of_memory_on_neuron_1(device_works):
    with pytest.raises(torch.OutOfMemoryError, match="neuron:1"):
        torch.empty(200 * GIB, dtype=torch.uint8, device="neuron:1")
    device_works("neuron:1")


def test_out_of_memory_of_a_fallback_result(device_works):
    # A CPU fallback whose result cannot be placed on the device.
    x = torch.ones(1).to("neuron")
    with pytest.raises(torch.OutOfMemoryError):
        x.expand(200 * GIB // 4).contiguous()
    device_works()


# ---- wrong-dtype copies --------------------------------------------------------------


def test_complex_into_a_real_neuron_tensor_follows_the_cpu(device_works):
    # As on the CPU: the imaginary part is dropped, with PyTorch's warning.
    dst = torch.zeros(2, device="neuron")
    with pytest.warns(UserWarning, match="(?i)imaginary"):
        dst.copy_(torch.tensor([1 + 2j, 3 - 1j]))
    assert torch.equal(dst.cpu(), torch.tensor([1.0, 3.0]))
    device_works()


def test_neuron_into_complex_host_is_a_value_copy():
    host = torch.zeros(3, dtype=torch.complex64)
    host.copy_(torch.tensor([1.0, -2.0, 0.5]).to("neuron"))
    assert torch.equal(host, torch.tensor([1.0, -2.0, 0.5], dtype=torch.complex64))


def test_copy_of_mismatched_shapes(device_works):
    dst = torch.zeros(2, 3, device="neuron")
    with pytest.raises(RuntimeError):
        dst.copy_(torch.ones(4).to("neuron"))
    with pytest.raises(RuntimeError):
        dst.copy_(torch.ones(4))
    assert torch.equal(dst.cpu(), torch.zeros(2, 3))
    device_works()


# ---- tensors of two devices ----------------------------------------------------------

# Ops with neuron kernels and ops that fall back to the CPU.
TWO_DEVICE_OPS = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "mm": lambda a, b: a.view(2, 2) @ b.view(2, 2),
    "sub": lambda a, b: a - b,
    "maximum": lambda a, b: torch.maximum(a, b),
    "cat": lambda a, b: torch.cat([a, b]),
    "where": lambda a, b: torch.where(a > 0, a, b),
    "add_ in place": lambda a, b: a.add_(b),
    "atan2": lambda a, b: torch.atan2(a, b),
    "hypot_ in place": lambda a, b: a.hypot_(b),
    "index_select": lambda a, b: a.index_select(0, b.long()),
}


@pytest.mark.parametrize("name", list(TWO_DEVICE_OPS))
def test_op_on_two_neuron_devices(name, device_works):
    a = torch.ones(4).to("neuron:0")
    b = torch.full((4,), 2.0).to("neuron:1")
    with pytest.raises(RuntimeError) as err:
        TWO_DEVICE_OPS[name](a, b)
    message = str(err.value)
    assert "neuron:0" in message and "neuron:1" in message, message
    assert torch.equal(a.cpu(), torch.ones(4))
    device_works("neuron:0")
    device_works("neuron:1")


@pytest.mark.parametrize("name", list(TWO_DEVICE_OPS))
def test_op_on_neuron_and_cpu(name, device_works):
    # As on CUDA: a non-scalar CPU tensor does not mix with a device tensor, in either
    # order (a 0-dim CPU tensor is a scalar and may).
    a = torch.ones(4).to("neuron:0")
    b = torch.full((4,), 2.0)
    for first, second in ((a, b), (b, a)):
        with pytest.raises(RuntimeError) as err:
            TWO_DEVICE_OPS[name](first, second)
        message = str(err.value)
        assert "neuron:0" in message and "cpu" in message, message
    device_works()


def test_zero_dim_cpu_tensor_is_a_scalar():
    a = torch.tensor([1.0, 2.0]).to("neuron")
    got = a + torch.tensor(3.0)
    assert got.device == torch.device("neuron:0")
    assert torch.equal(got.cpu(), torch.tensor([4.0, 5.0]))
    got = torch.tensor(2.0) * a
    assert got.device == torch.device("neuron:0")
    assert torch.equal(got.cpu(), torch.tensor([2.0, 4.0]))


# ---- errors inside ops ---------------------------------------------------------------


def test_shape_errors_are_python_errors(device_works):
    a = torch.ones(2, 3).to("neuron")
    b = torch.ones(4, 5).to("neuron")
    with pytest.raises(RuntimeError):
        a @ b
    with pytest.raises(RuntimeError):
        a + b
    with pytest.raises((IndexError, RuntimeError)):
        torch.cumsum(a, 5)
    with pytest.raises(IndexError):
        a[7]
    device_works()


def test_many_errors_in_a_row_leave_the_device_usable(device_works):
    for _ in range(20):
        with pytest.raises(RuntimeError):
            torch.empty(1, device="neuron:99")
        with pytest.raises(RuntimeError):
            torch.ones(2).to("neuron:0") + torch.ones(2).to("neuron:1")
    device_works()
    device_works("neuron:1")


@pytest.mark.parametrize("bad", [10, -1, 2**32 + 5])
def test_embedding_index_out_of_range_is_an_error(bad, device_works):
    # The device reads int64 indices as 32-bit words; an index whose high word is set
    # (2**32 + 5) must still be out of range, not row 5.
    weight = torch.randn(10, 4, device="neuron")
    with pytest.raises((RuntimeError, IndexError)) as err:
        torch.nn.functional.embedding(torch.tensor([1, bad], device="neuron"), weight)
    assert "index" in str(err.value)
    device_works()


# ---- lazy conjugates and negations ----------------------------------------------------


def test_complex_results_and_lazy_conjugates_follow_the_cpu(device_works):
    # fft.ifft of a real tensor conjugates lazily: its copy had recursed until the stack
    # overflowed (a segfault). Conjugate and negative views keep their meaning on the host.
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, generator=g)
    torch.testing.assert_close(torch.fft.ifft(x.to("neuron")).cpu(), torch.fft.ifft(x))
    z = torch.randn(5, dtype=torch.complex64, generator=g)
    d = z.to("neuron")
    assert torch.equal(d.conj().cpu(), z.conj())
    assert torch.equal(d.conj().clone().cpu(), z.conj())
    assert torch.equal((d.conj() * 2).cpu(), z.conj() * 2)
    assert torch.equal(
        torch.view_as_real(d.conj().resolve_conj()).cpu(),
        torch.view_as_real(z.conj().resolve_conj()),
    )
    host = torch.empty(5, dtype=torch.complex64)
    host.copy_(d.conj())
    assert torch.equal(host, z.conj())
    assert torch.equal(torch.linalg.eigvals(torch.eye(3).to("neuron")).cpu(), torch.ones(3) + 0j)


# ---- special values ---------------------------------------------------------------------


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), -0.0, 1e-40])
def test_fills_and_immediates_take_every_float(value, device_works):
    # No instruction takes a NaN immediate: a NaN fill is +inf * 0 on the device. -0.0 keeps
    # its sign, a subnormal its value.
    for dtype in (torch.float32, torch.bfloat16):
        got = torch.full((3, 5), value, dtype=dtype, device="neuron").cpu()
        want = torch.full((3, 5), value, dtype=dtype)
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        assert torch.equal(got.signbit(), want.signbit())
    y = torch.arange(6.0)
    d = y.to("neuron")
    for got, want in [
        (d + value, y + value),
        (torch.where(d > 2, d, value), torch.where(y > 2, y, value)),
        (d.masked_fill(d < 3, value), y.masked_fill(y < 3, value)),
        (d.clone().fill_(value), y.clone().fill_(value)),
    ]:
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True)
