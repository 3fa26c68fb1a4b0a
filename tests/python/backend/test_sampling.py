"""Random draws on the device generator, in strict mode: uniform_, normal_, bernoulli_,
exponential_, random_ (randint), randperm and multinomial have the right distribution,
repeat under the same seed, honour a generator= argument, and raise torch's errors."""

from __future__ import annotations

import pytest
import torch

import neuronsim

N = 40_000


@pytest.fixture(autouse=True)
def strict():
    with neuronsim.strict_mode():
        yield


def test_uniform_covers_its_range_without_reaching_the_top():
    torch.neuron.manual_seed(0)
    u = torch.empty(N, device="neuron").uniform_(-2.0, 3.0).cpu()
    assert -2.0 <= u.min().item() < -1.99 and 2.99 < u.max().item() < 3.0
    assert abs(u.mean().item() - 0.5) < 0.03
    # 24 random bits: far more distinct values than 16 bits would give.
    assert torch.unique(torch.rand(N, device="neuron").cpu()).numel() > N * 0.95


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_normal_has_its_mean_and_standard_deviation(dtype):
    torch.neuron.manual_seed(1)
    z = torch.empty(N, dtype=dtype, device="neuron").normal_(2.0, 3.0).cpu().float()
    assert abs(z.mean().item() - 2.0) < 0.06
    assert abs(z.std().item() - 3.0) < 0.06
    # Tails as a normal's: about 4.6 % beyond two standard deviations.
    beyond = ((z - 2.0).abs() > 6.0).float().mean().item()
    assert 0.038 < beyond < 0.054


def test_bernoulli_exponential_and_randint():
    torch.neuron.manual_seed(2)
    assert abs(torch.bernoulli(torch.full((N,), 0.3, device="neuron")).mean().item() - 0.3) < 0.01
    p = torch.linspace(0, 1, 8, device="neuron").expand(N // 8, 8)
    means = torch.empty(N // 8, 8, device="neuron").bernoulli_(p).mean(0).cpu()
    torch.testing.assert_close(means, torch.linspace(0, 1, 8), atol=0.03, rtol=0)
    e = torch.empty(N, device="neuron").exponential_(2.0).cpu()
    assert e.min().item() >= 0 and abs(e.mean().item() - 0.5) < 0.02
    r = torch.randint(3, 10, (N,), device="neuron").cpu()
    assert r.dtype == torch.int64
    assert torch.equal(torch.unique(r), torch.arange(3, 10))
    assert torch.bincount(r - 3).min().item() > N / 7 * 0.9


def test_randperm_is_a_permutation():
    torch.neuron.manual_seed(3)
    p = torch.randperm(1000, device="neuron")
    assert p.dtype == torch.int64
    assert torch.equal(torch.sort(p.cpu()).values, torch.arange(1000))
    assert not torch.equal(p.cpu(), torch.arange(1000))


def test_multinomial_with_replacement_follows_the_probabilities():
    torch.neuron.manual_seed(4)
    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3], [0.0, 0.0, 5.0, 0.0]], device="neuron")
    s = torch.multinomial(probs, 4000, replacement=True).cpu()
    assert s.shape == (2, 4000) and s.dtype == torch.int64
    freq = torch.bincount(s[0], minlength=4).float() / 4000
    torch.testing.assert_close(freq, torch.tensor([0.1, 0.0, 0.6, 0.3]), atol=0.03, rtol=0)
    assert (s[1] == 2).all()


def test_multinomial_without_replacement_draws_distinct_categories():
    torch.neuron.manual_seed(5)
    probs = torch.tensor([0.05, 0.0, 0.5, 0.2, 0.25], device="neuron")
    draws = torch.stack([torch.multinomial(probs, 4) for _ in range(50)]).cpu()
    for row in draws:
        assert sorted(row.tolist()) == [0, 2, 3, 4]  # the zero-probability one never
    first = torch.bincount(draws[:, 0], minlength=5)
    assert first[2] > first[3] > first[0]


def test_sampling_a_large_vocabulary_on_the_device():
    torch.neuron.manual_seed(6)
    logits = torch.full((2, 131_072), -30.0)
    logits[:, 4242] = 10.0
    probs = torch.softmax(logits.to("neuron"), -1)
    assert torch.multinomial(probs, 1).cpu().tolist() == [[4242], [4242]]


def test_draws_repeat_under_a_seed_and_follow_a_generator():
    def draws():
        return torch.cat(
            [
                torch.randn(8, device="neuron"),
                torch.rand(8, device="neuron"),
                torch.multinomial(torch.ones(16, device="neuron"), 4).float(),
                torch.randperm(8, device="neuron").float(),
            ]
        ).cpu()

    torch.neuron.manual_seed(7)
    a = draws()
    torch.neuron.manual_seed(7)
    assert torch.equal(a, draws())
    g = torch.Generator(device="neuron")
    g.manual_seed(11)
    b = torch.randn(8, device="neuron", generator=g).cpu()
    g.manual_seed(11)
    torch.randn(8, device="neuron")  # the default generator moves, g does not
    assert torch.equal(b, torch.randn(8, device="neuron", generator=g).cpu())


def test_bad_distributions_raise_torch_errors():
    with pytest.raises(RuntimeError, match="sum of probabilities <= 0"):
        torch.multinomial(torch.zeros(3, device="neuron"), 1)
    with pytest.raises(RuntimeError, match="inf|nan|< 0"):
        torch.multinomial(torch.tensor([0.5, -0.1], device="neuron"), 1)
    with pytest.raises(RuntimeError, match="without replacement"):
        torch.multinomial(torch.tensor([0.5, 0.0, 0.5], device="neuron"), 3)
    with pytest.raises(RuntimeError, match="std >= 0"):
        torch.empty(3, device="neuron").normal_(0.0, -1.0)
