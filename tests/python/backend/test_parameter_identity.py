"""module.to("neuron") keeps each Parameter object and swaps its data, as module.to("cuda")
does: an optimizer, a hook or a reference taken before the move still holds the module's
parameters, and their gradients arrive on them."""

import torch


def test_a_module_moved_to_the_device_keeps_its_parameter_objects():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    weight, bias = model.weight, model.bias
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)  # built before the move
    assert model.to("neuron") is model
    assert model.weight is weight and model.bias is bias
    assert weight.device.type == "neuron" and isinstance(weight, torch.nn.Parameter)
    assert weight.requires_grad

    x = torch.randn(5, 4)
    model(x.to("neuron")).square().sum().backward()
    assert weight.grad is not None and weight.grad.device.type == "neuron"
    before = weight.detach().cpu().clone()
    step = weight.grad.cpu() * 0.5
    optimizer.step()  # moves the module's weights: the optimizer holds the same objects
    torch.testing.assert_close(weight.detach().cpu(), before - step)


def test_a_hook_registered_before_the_move_still_fires():
    model = torch.nn.Linear(2, 2)
    seen = []
    model.weight.register_hook(lambda g: seen.append(g.device.type))
    model.to("neuron")
    model(torch.ones(1, 2, device="neuron")).sum().backward()
    assert seen == ["neuron"]


def test_gradients_move_with_their_parameters_and_back():
    model = torch.nn.Linear(3, 1)
    model(torch.ones(2, 3)).sum().backward()
    weight, grad = model.weight, model.weight.grad
    expected = grad.clone()
    model.to("neuron")
    assert model.weight is weight and weight.grad is grad
    assert grad.device.type == "neuron"
    model.to("cpu")
    assert model.weight is weight and weight.device.type == "cpu"
    torch.testing.assert_close(weight.grad, expected)


def test_overwriting_on_conversion_still_replaces_them_as_on_cuda():
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        model = torch.nn.Linear(2, 2)
        weight = model.weight
        model.to("neuron")
        assert model.weight is not weight and model.weight.device.type == "neuron"
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(False)


def test_only_plain_dense_tensors_swap_data_with_the_devices():
    device = torch.zeros(2, 2, device="neuron")
    assert torch._has_compatible_shallow_copy_type(torch.zeros(2, 2), device)
    assert torch._has_compatible_shallow_copy_type(device, torch.zeros(2, 2))
    sparse = torch.zeros(2, 2).to_sparse()
    assert not torch._has_compatible_shallow_copy_type(sparse, device)
    assert not torch._has_compatible_shallow_copy_type(device, sparse)
