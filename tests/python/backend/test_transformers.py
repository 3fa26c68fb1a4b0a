"""A tiny Qwen3-style model from Transformers on "neuron", against the same model on the
CPU: forward logits, greedy generation, 20 AdamW training steps, loading with
device_map="neuron", and simulated time in the timing mode. Built from a config (no
download): 2 layers, hidden 64, grouped-query attention."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoModelForCausalLM

import neuronsim
from neuronsim.testing import tiny_qwen3 as tiny_model

# The products must run on the TensorE kernels, not the CPU.
DEVICE_OPS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::_softmax", "aten::mul.Tensor")


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))


def assert_on_device(what: str) -> None:
    fell_back = [op for op in neuronsim.fallback_counts() if op.startswith(DEVICE_OPS)]
    assert not fell_back, f"{what}: {fell_back} ran on the CPU"


def test_forward_matches_cpu(ids):
    model = tiny_model().eval()
    with torch.no_grad():
        expected = model(ids).logits
        kernels = neuronsim.kernels_run()
        got = model.to("neuron")(ids.to("neuron")).logits
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4)
    assert neuronsim.kernels_run() - kernels > 50
    assert_on_device("forward")


def test_bf16_forward_close_to_cpu(ids):
    model = tiny_model().to(torch.bfloat16).eval()
    with torch.no_grad():
        expected = model(ids).logits.float()
        got = model.to("neuron")(ids.to("neuron")).logits.float().cpu()
    # bf16 carries 8 bits of mantissa; logits of order 1 agree to a few hundredths.
    assert (got - expected).abs().max() < 0.1
    assert (got.argmax(-1) == expected.argmax(-1)).float().mean() > 0.9


def test_greedy_generation_gives_the_cpu_tokens(ids):
    neuronsim.set_strict(True)  # positions, masks and stopping criteria on the device too
    model = tiny_model().eval()
    expected = model.generate(ids, max_new_tokens=8, do_sample=False)
    got = model.to("neuron").generate(ids.to("neuron"), max_new_tokens=8, do_sample=False)
    assert torch.equal(got.cpu(), expected)


def test_twenty_adamw_steps_follow_the_cpu_loss_curve(ids):
    # Strict: every op of the forward, the loss, the backward and AdamW runs on the
    # device; a CPU fallback would be an error naming it.
    neuronsim.set_strict(True)
    cpu_model = tiny_model()
    dev_model = copy.deepcopy(cpu_model).to("neuron")
    cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-2)
    dev_opt = torch.optim.AdamW(dev_model.parameters(), lr=1e-2)
    dev_ids = ids.to("neuron")
    cpu_losses, dev_losses = [], []
    for _ in range(20):
        for model, opt, x, losses in (
            (cpu_model, cpu_opt, ids, cpu_losses),
            (dev_model, dev_opt, dev_ids, dev_losses),
        ):
            loss = model(x, labels=x).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    assert dev_losses[-1] < dev_losses[0] - 1.0  # it learns
    torch.testing.assert_close(
        torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=1e-3, atol=1e-3
    )
    assert_on_device("training")
    for name in ("aten::addcdiv", "aten::addcmul", "aten::lerp"):
        assert not any(op.startswith(name) for op in neuronsim.fallback_counts()), name


def test_gpt2_with_dropout_trains_in_strict_mode(ids):
    # Dropout's masks are drawn by the engines' generators: training with dropout > 0
    # needs no CPU op, draws a new mask per step and none in eval mode.
    from transformers import GPT2Config, GPT2LMHeadModel

    neuronsim.set_strict(True)
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=256,
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=2,
        resid_pdrop=0.1,
        embd_pdrop=0.1,
        attn_pdrop=0.1,
        eos_token_id=0,
        bos_token_id=0,
    )
    model = GPT2LMHeadModel(config).to("neuron").train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = ids.to("neuron")
    losses = []
    for _ in range(8):
        loss = model(x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.5, losses
    with torch.no_grad():
        train_a, train_b = (model(x, labels=x).loss.item() for _ in range(2))
        model.eval()
        eval_a, eval_b = (model(x, labels=x).loss.item() for _ in range(2))
    assert train_a != train_b and eval_a == eval_b


def test_device_map_neuron_loads_onto_the_device(tmp_path, ids):
    tiny_model().save_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path, device_map="neuron")
    assert {p.device.type for p in model.parameters()} == {"neuron"}
    reference = AutoModelForCausalLM.from_pretrained(tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(
            model(ids.to("neuron")).logits.cpu(), reference(ids).logits, atol=1e-4, rtol=1e-4
        )


def test_timing_mode_advances_the_simulated_clock(run_json):
    result = run_json(
        """
        import json, torch, neuronsim
        from neuronsim.testing import tiny_qwen3
        model = tiny_qwen3().eval().to("neuron")
        ids = torch.randint(0, 256, (1, 8)).to("neuron")
        times = []
        with torch.no_grad():
            for _ in range(2):
                model(ids)
                torch.neuron.synchronize()
                times.append(neuronsim.simulated_time())
        print(json.dumps({"times": times, "mode": neuronsim.mode()}))
        """,
        env={"NEURONSIM_MODE": "functional-and-timing"},
    )
    first, second = result["times"]
    assert result["mode"] == "functional-and-timing"
    assert 0 < first < second
    # The same work twice takes the same simulated time (determinism on one clock).
    assert second - first == pytest.approx(first, rel=0.2)
