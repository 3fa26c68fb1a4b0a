"""Where random ops on "neuron" draw from: the device's own generators (the default, as
CUDA's are its own), or, with NEURONSIM_RNG=cpu, the CPU's generator as TorchNeuron draws
today, so that a run seeded with torch.manual_seed gives the CPU's numbers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import neuronsim
import torch_neuronx


@pytest.fixture(autouse=True, scope="module")
def _stop_tracking_after():
    yield
    neuronsim._C.stop_op_tracking()  # started by the dropout test's op tracking


DRAWS = {
    "randn": lambda d: torch.randn(5, 7, device=d),
    "rand bf16": lambda d: torch.rand(6, 3, device=d, dtype=torch.bfloat16),
    "randint": lambda d: torch.randint(-3, 10, (9,), device=d),
    "randperm": lambda d: torch.randperm(12, device=d),
    "multinomial": lambda d: torch.multinomial(torch.ones(2, 6, device=d), 3),
    "bernoulli": lambda d: torch.bernoulli(torch.full((4, 4), 0.3, device=d)),
    "normal_ transposed": lambda d: torch.empty(4, 6, device=d).t().normal_(),
    "exponential_": lambda d: torch.empty(8, device=d).exponential_(2.0),
    "native_dropout": lambda d: torch.native_dropout(torch.arange(12.0, device=d), 0.4, True),
    "F.dropout": lambda d: torch.nn.functional.dropout(torch.ones(3, 4, device=d), 0.5),
    "normal(tensor, tensor)": lambda d: torch.normal(
        torch.arange(6.0, device=d).view(2, 3), torch.full((3,), 0.5, device=d)
    ),
    "normal(tensor, number)": lambda d: torch.normal(torch.ones(4, device=d), 2.0),
    "normal(number, tensor)": lambda d: torch.normal(1.0, torch.full((5,), 3.0, device=d)),
}


def _seeded(draw, device):
    torch.manual_seed(42)
    out = draw(device)
    return [t.cpu() for t in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("name", DRAWS)
def test_cpu_source_gives_the_cpus_numbers_on_the_device(name):
    with neuronsim.strict_mode(), neuronsim.rng_source_as("cpu"):
        got = _seeded(DRAWS[name], "neuron")
    want = _seeded(DRAWS[name], "cpu")
    assert all(torch.equal(g, w) for g, w in zip(got, want)), name


def test_cpu_source_advances_the_cpu_generator_as_the_cpu_op_does():
    torch.manual_seed(7)
    torch.randn(100)
    cpu_only = torch.randn(5)
    with neuronsim.rng_source_as("cpu"):
        torch.manual_seed(7)
        torch.randn(100, device="neuron")
        assert torch.equal(torch.randn(5), cpu_only)


def test_device_source_draws_its_own_repeatable_streams():
    assert neuronsim.rng_source() == "device"
    first, again = _seeded(DRAWS["randn"], "neuron"), _seeded(DRAWS["randn"], "neuron")
    assert torch.equal(first[0], again[0])
    assert not torch.equal(first[0], _seeded(DRAWS["randn"], "cpu")[0])


def test_a_neuron_generator_given_draws_on_the_device_from_either_source():
    def draw():
        g = torch.Generator("neuron")
        g.manual_seed(3)
        return torch.randn(6, device="neuron", generator=g).cpu()

    with neuronsim.rng_source_as("cpu"):
        from_cpu_source = draw()
    assert torch.equal(from_cpu_source, draw())


def test_dropout_with_the_cpus_mask_runs_on_the_device():
    x = torch.randn(3, 4, device="neuron")
    with neuronsim.strict_mode(), neuronsim.rng_source_as("cpu"):
        torch_neuronx.clear_op_tracking()
        torch.native_dropout(x, 0.4, True)
    assert "aten::native_dropout" in torch_neuronx.get_executed_ops()
    assert torch_neuronx.get_fallback_ops() == []


def test_the_source_is_read_from_the_environment_and_checked():
    code = "import neuronsim, torch; print(neuronsim.rng_source())"
    env = dict(os.environ, NEURONSIM_RNG="cpu")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "cpu", out.stderr
    with pytest.raises(RuntimeError, match="'gpu' is not a random-number source"):
        neuronsim.set_rng_source("gpu")
    env["NEURONSIM_RNG"] = "philox"
    code = "import torch, neuronsim; torch.randn(2, device='neuron')"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "NEURONSIM_RNG: 'philox'" in out.stderr


def test_normal_with_tensor_parameters_draws_on_the_device():
    with neuronsim.strict_mode():
        x = torch.normal(
            torch.full((4, 5000), 3.0, device="neuron"), torch.tensor(2.0, device="neuron")
        )
        assert x.shape == (4, 5000) and x.device.type == "neuron"
        assert abs(x.mean().item() - 3.0) < 0.1 and abs(x.std().item() - 2.0) < 0.1
        y = torch.normal(-1.0, torch.full((20000,), 0.5, device="neuron"))
        assert abs(y.mean().item() + 1.0) < 0.05 and abs(y.std().item() - 0.5) < 0.05
        with pytest.raises(RuntimeError, match="std >= 0"):
            torch.normal(
                torch.zeros(3, device="neuron"), torch.tensor([1.0, -1.0, 1.0], device="neuron")
            )
