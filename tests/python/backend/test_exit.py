"""A script whose last act is a backward pass on the device exits with status 0.

PyTorch's device autograd threads let go of a finished pass a moment after the caller has
its gradients; when the interpreter is already shutting down, that used to abort the
process (status 134) in most runs. neuronsim/_exit.py drains those threads at exit."""

import pytest

LAST_ACT_IS_BACKWARD = """
import json, torch, neuronsim
x = torch.randn(16, 8, device="neuron", requires_grad=True)
w = torch.nn.Linear(8, 4).to("neuron")
w(x).square().sum().backward()
print(json.dumps({"grad": x.grad is not None}))
"""


@pytest.mark.parametrize("mode", ["functional-only", "functional-and-timing"])
def test_a_script_ending_in_a_backward_pass_exits_cleanly(spawn_python, mode):
    # Without the drain most runs aborted: four in a row passing would be chance 1 in 100.
    runs = [spawn_python(LAST_ACT_IS_BACKWARD, {"NEURONSIM_MODE": mode}) for _ in range(4)]
    assert all(run.json() == {"grad": True} for run in runs)
