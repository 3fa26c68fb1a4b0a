"""A device of two physical cores (LNC=2): the backend's kernels are compiled for both, so
they take about half the time at the same values; an NKI kernel runs on one core as written."""

import pytest

MEASURE = """
import json, torch, neuronsim
from neuronsim.tools.nki_kernels import tensor_add
torch.manual_seed(0)
a = torch.randn(1024, 1024, dtype=torch.bfloat16).to("neuron")
b = torch.randn(1024, 1024, dtype=torch.bfloat16).to("neuron")
f, g = torch.rand(256, 512).to("neuron"), torch.rand(256, 512).to("neuron")

def timed(op):
    op()
    torch.neuron.synchronize()
    start = neuronsim.simulated_time()
    out = op()
    torch.neuron.synchronize()
    return neuronsim.simulated_time() - start, out

matmul, product = timed(lambda: a @ b)
nki, _ = timed(lambda: tensor_add(f, g))
props = torch.neuron.get_device_properties(0)
print(json.dumps({"matmul": matmul, "nki": nki, "product": product.float().cpu().tolist(),
                  "peak": props.peak_bf16_flops, "dma": props.dma_bytes_per_s,
                  "cores": props.physical_cores_per_device}))
"""


@pytest.fixture(scope="module")
def measured(spawn_python):
    quiet = {"NEURONSIM_MODE": "functional-and-timing", "NEURONSIM_HOST_DISPATCH": "0"}
    spawned = {
        lnc: spawn_python(MEASURE, {**quiet, "NEURON_RT_VIRTUAL_CORE_SIZE": str(lnc)})
        for lnc in (1, 2)
    }
    return {lnc: s.json() for lnc, s in spawned.items()}


def test_a_kernel_of_a_logical_core_shares_its_work_between_the_pair(measured):
    one, two = measured[1], measured[2]
    assert two["product"] == one["product"]
    # The launch (20 us) is the runtime's and is not split; the body is.
    launch = 20e-6
    assert (two["matmul"] - launch) < 0.65 * (one["matmul"] - launch)
    assert (two["matmul"] - launch) > 0.4 * (one["matmul"] - launch)


def test_a_logical_cores_peaks_are_its_physical_cores_together(measured):
    one, two = measured[1], measured[2]
    assert (one["cores"], two["cores"]) == (1, 2)
    assert two["peak"] == pytest.approx(2 * one["peak"])
    assert two["dma"] == pytest.approx(2 * one["dma"])


def test_an_nki_kernel_runs_on_one_physical_core_as_written(measured):
    assert measured[2]["nki"] == pytest.approx(measured[1]["nki"], rel=1e-9)
