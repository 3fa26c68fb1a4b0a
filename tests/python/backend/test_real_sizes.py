"""Kernels at the sizes real models reach, in strict mode (no CPU fallback) against the
CPU. Tests keep one layer's worth of work; the benchmarks carry the full sizes."""

from __future__ import annotations

import pytest
import torch

import neuronsim


@pytest.fixture(autouse=True)
def strict():
    with neuronsim.strict_mode():
        yield


def test_matmul_over_more_than_65535_tokens():
    # 70,000 rows of activations against a weight: the rows are tiled 128 at a time, with
    # no limit from one access pattern's 16-bit row count.
    torch.manual_seed(0)
    x, w = torch.randn(70_000, 64), torch.randn(64, 128)
    got = x.to("neuron") @ w.to("neuron")
    torch.testing.assert_close(got.cpu(), x @ w, rtol=1e-4, atol=1e-4)


def test_linear_over_more_than_65535_tokens_in_bfloat16():
    torch.manual_seed(1)
    x = torch.randn(2, 35_000, 64, dtype=torch.bfloat16)
    w = torch.randn(96, 64, dtype=torch.bfloat16)
    got = torch.nn.functional.linear(x.to("neuron"), w.to("neuron"))
    expected = (x.float().reshape(-1, 64) @ w.float().t()).reshape(2, 35_000, 96)
    torch.testing.assert_close(got.cpu().float(), expected, rtol=1.6e-2, atol=5e-2)


def test_lm_head_over_a_151936_token_vocabulary():
    # Qwen3's vocabulary: linear's weight.t() against rows too wide for SBUF, which the
    # kernel stores in column blocks. Hidden size cut to 256 to keep the test small.
    torch.manual_seed(2)
    x = torch.randn(4, 256, dtype=torch.bfloat16)
    w = torch.randn(151_936, 256, dtype=torch.bfloat16)
    got = torch.nn.functional.linear(x.to("neuron"), w.to("neuron"))
    assert got.shape == (4, 151_936)
    expected = x.float() @ w.float().t()
    torch.testing.assert_close(got.cpu().float(), expected, rtol=1.6e-2, atol=0.3)


def test_embedding_over_a_151936_token_vocabulary():
    # The table's rows past 65,535 are found by the indirect DMA (an HBM access pattern's
    # rows count in 32 bits); hidden size cut to 64.
    torch.manual_seed(3)
    table = torch.randn(151_936, 64, dtype=torch.bfloat16)
    ids = torch.tensor([[151_935, 0, 65_535, 65_536, 100_000, 7]])
    got = torch.nn.functional.embedding(ids.to("neuron"), table.to("neuron"))
    torch.testing.assert_close(got.cpu(), torch.nn.functional.embedding(ids, table))


def test_row_ops_over_more_than_65535_rows():
    torch.manual_seed(4)
    x = torch.randn(70_000, 32)
    dev = x.to("neuron")
    torch.testing.assert_close(dev.softmax(-1).cpu(), x.softmax(-1))
    torch.testing.assert_close(dev.log_softmax(-1).cpu(), x.log_softmax(-1))
    torch.testing.assert_close(
        torch.nn.functional.rms_norm(dev, (32,)).cpu(),
        torch.nn.functional.rms_norm(x, (32,)),
        rtol=1e-5,
        atol=1e-5,
    )


def test_cross_entropy_and_greedy_argmax_over_a_151936_token_vocabulary():
    # Rows of FP32 logits longer than SBUF holds: log_softmax in two passes over column
    # blocks, argmax in chunks; the loss's gradient too.
    torch.manual_seed(5)
    logits = torch.randn(4, 151_936, requires_grad=True)
    target = torch.tensor([0, 151_935, 65_536, 100_000])
    dev = logits.detach().to("neuron").requires_grad_()
    loss = torch.nn.functional.cross_entropy(dev, target.to("neuron"))
    loss.backward()
    expected = torch.nn.functional.cross_entropy(logits, target)
    expected.backward()
    torch.testing.assert_close(loss.cpu(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dev.grad.cpu(), logits.grad, rtol=1e-4, atol=1e-9)
    peaked = logits.detach().clone()
    peaked[:, 140_000] += 100.0
    peaked[1, 70_001] += 200.0
    got = peaked.to("neuron").argmax(-1).cpu()
    assert got.tolist() == [140_000, 70_001, 140_000, 140_000]


def test_matmul_whose_k_is_a_vocabulary():
    # The LM head's backward: grad_logits [tokens, 151,936] @ W [151,936, hidden]. A^T of
    # the whole K does not fit SBUF, so the product runs in K blocks summed in FP32.
    torch.manual_seed(6)
    g = torch.randn(4, 151_936, dtype=torch.bfloat16)
    w = torch.randn(151_936, 64, dtype=torch.bfloat16)
    got = g.to("neuron") @ w.to("neuron")
    expected = g.float() @ w.float()
    assert neuronsim.fallback_counts() == {}
    torch.testing.assert_close(got.cpu().float(), expected, rtol=1.6e-2, atol=4.0)


def test_causal_attention_over_4096_tokens():
    # The flash kernel over 4 key blocks of 1024 with grouped-query heads: the 4096 x 4096
    # scores stay on chip. Two query heads on one KV head, head dim 64.
    g = torch.Generator().manual_seed(5)
    q = torch.randn(1, 2, 4096, 64, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(1, 1, 4096, 64, generator=g).to(torch.bfloat16) for _ in range(2))
    got = torch.nn.functional.scaled_dot_product_attention(
        q.to("neuron"), k.to("neuron"), v.to("neuron"), is_causal=True, enable_gqa=True
    )
    expected = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=True, enable_gqa=True
    )
    torch.testing.assert_close(got.cpu().float(), expected, rtol=2e-2, atol=2e-2)


# Qwen3's vocabulary against a real batch of tokens (16,384: 8 sequences of 2,048), width
# cut to 4: the rows are summed by the DMA's read-add-write, whose traffic is the batch's.
VOCAB, BATCH_TOKENS = 151_936, 16_384


def _batch_ids(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (BATCH_TOKENS,), generator=g)
    ids[:6] = torch.tensor([VOCAB - 1, 0, 7, 7, 7, VOCAB - 1])  # both ends, repeats
    return ids


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_embedding_backward_over_a_real_vocabulary_and_batch(dtype):
    ids = _batch_ids(6).reshape(8, 2048)
    grad = torch.randn(8, 2048, 4, generator=torch.Generator().manual_seed(7)).to(dtype)
    got = torch.ops.aten.embedding_dense_backward(
        grad.to("neuron"), ids.to("neuron"), VOCAB, 7, False
    )
    expected = torch.zeros(VOCAB, 4).index_add_(0, ids.reshape(-1), grad.reshape(-1, 4).float())
    expected[7] = 0  # the padding row
    tol = {"rtol": 1e-6, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1.6e-2, "atol": 2e-2}
    torch.testing.assert_close(got.cpu().float(), expected, **tol)


def test_index_add_and_accumulating_index_put_over_a_real_vocabulary_and_batch():
    ids = _batch_ids(8)
    g = torch.Generator().manual_seed(9)
    table, rows = torch.randn(VOCAB, 4, generator=g), torch.randn(BATCH_TOKENS, 4, generator=g)
    got = table.to("neuron").index_add(0, ids.to("neuron"), rows.to("neuron"), alpha=2)
    torch.testing.assert_close(got.cpu(), table.index_add(0, ids, rows, alpha=2))
    # Along dim 1 (the slices moved to the front and back).
    got = table.t().to("neuron").index_add(1, ids.to("neuron"), rows.t().to("neuron"))
    torch.testing.assert_close(got.cpu(), table.t().index_add(1, ids, rows.t()))
    got = table.to("neuron").index_put_((ids.to("neuron"),), rows.to("neuron"), accumulate=True)
    torch.testing.assert_close(got.cpu(), table.clone().index_put_((ids,), rows, accumulate=True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_scatter_add_of_single_elements_over_a_real_vocabulary_and_batch(dtype):
    # A batch's counts and sums per token id, column by column: 16,384 x 4 elements into a
    # 151,936 x 4 table (a one-hot of 10^10 elements), each element added by the DMA in index
    # order, as the CPU adds them, so bf16 rounds alike.
    ids = _batch_ids(11)
    index = torch.stack([ids, ids.roll(1), ids.flip(0), ids], dim=1)  # [16384, 4]
    g = torch.Generator().manual_seed(12)
    table = torch.randn(VOCAB, 4, generator=g).to(dtype)
    src = torch.randn(BATCH_TOKENS, 4, generator=g).to(dtype)
    got = table.to("neuron").scatter_add(0, index.to("neuron"), src.to("neuron"))
    assert torch.equal(got.cpu(), table.scatter_add(0, index, src))
    # Along the vocabulary of 256 tokens' logits (38.9 M elements): in slabs of rows.
    target = ids[:256].reshape(256, 1)
    grad = torch.randn(256, 1, generator=g).to(dtype)
    got = torch.zeros(256, VOCAB, dtype=dtype, device="neuron").scatter_add(
        1, target.to("neuron"), grad.to("neuron")
    )
    assert torch.equal(got.cpu(), torch.zeros(256, VOCAB, dtype=dtype).scatter_add(1, target, grad))


def test_a_loss_gathers_and_scatters_logits_past_two_to_the_24_elements():
    # 256 tokens x 151,936 logits (38.9 M elements): the gather's element offsets go past
    # what FP32 holds exactly, so the rows are gathered in slabs.
    g = torch.Generator().manual_seed(10)
    logits = torch.randn(256, VOCAB, generator=g)
    target = torch.randint(0, VOCAB, (256, 1), generator=g)
    target[:2, 0] = torch.tensor([VOCAB - 1, 0])
    got = logits.to("neuron").gather(1, target.to("neuron"))
    assert torch.equal(got.cpu(), logits.gather(1, target))
    # The loss's gradient scatters into as many: the same slabs.
    got = torch.zeros(256, VOCAB, device="neuron").scatter(1, target.to("neuron"), -1.0)
    assert torch.equal(got.cpu(), torch.zeros(256, VOCAB).scatter(1, target, -1.0))


def test_a_4096_by_14336_mlp_in_bfloat16():
    # Llama 3 8B's MLP (hidden 4096, intermediate 14336): SwiGLU over 32 tokens, eager and
    # compiled (one program), against the CPU in FP32 from the same bf16 values.
    import torch.nn.functional as F

    from neuronsim import compiler

    g = torch.Generator().manual_seed(7)
    x = torch.randn(32, 4096, generator=g).to(torch.bfloat16)
    wg, wu = (torch.randn(14336, 4096, generator=g).div(64).to(torch.bfloat16) for _ in "gu")
    wd = torch.randn(4096, 14336, generator=g).div(120).to(torch.bfloat16)

    def mlp(x, wg, wu, wd):
        return F.linear(F.silu(F.linear(x, wg)) * F.linear(x, wu), wd)

    expected = mlp(*(t.float() for t in (x, wg, wu, wd)))
    args = [t.to("neuron") for t in (x, wg, wu, wd)]
    compiler.reset_stats()
    torch._dynamo.reset()
    for got in (mlp(*args), torch.compile(mlp, backend="neuron", dynamic=False)(*args)):
        torch.testing.assert_close(got.cpu().float(), expected, rtol=2e-2, atol=4e-2)
    (report,) = compiler.graphs()
    assert report.kernels == 1 and report.eager == []
    torch._dynamo.reset()


def _qwen3_moe_block(seed: int):
    """Qwen3-30B-A3B's sparse MoE block in bf16 with random weights, on the CPU and a copy
    on the device, run as Transformers runs it (grouped_mm experts)."""
    import copy

    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    cfg = Qwen3MoeConfig(
        hidden_size=2048, moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8
    )
    cfg._experts_implementation = "grouped_mm"
    torch.manual_seed(seed)
    cpu = Qwen3MoeSparseMoeBlock(cfg).to(torch.bfloat16)
    for p in cpu.parameters():
        torch.nn.init.normal_(p, std=0.02)
    return cpu, copy.deepcopy(cpu).to("neuron")


def test_a_qwen3_30b_a3b_mixture_of_experts_layer():
    # Qwen3-30B-A3B's sparse MoE block (hidden 2048, 128 experts of intermediate 768, top 8)
    # over 128 tokens, as Transformers runs it (grouped_mm experts): router topk, the
    # experts' stable sort, histc, floor division, token gathers, two grouped products, the
    # inverse permutation and the top-k sum, all on the device, in a few dozen kernels.
    cpu, block = _qwen3_moe_block(seed=8)
    x = torch.randn(128, 2048, dtype=torch.bfloat16)
    with torch.no_grad():
        kernels = neuronsim.kernels_run()
        got = block(x.view(1, 128, 2048).to("neuron")).view(128, 2048).float().cpu()
        assert neuronsim.kernels_run() - kernels < 60
        # The routers agree but where bf16 rounding moves a near tie: the experts are
        # compared under the device's routing.
        _, weights, experts = block.gate(x.to("neuron"))
        _, cpu_weights, cpu_experts = cpu.gate(x)
        same = (experts.cpu().sort(-1).values == cpu_experts.sort(-1).values).all(-1)
        assert same.float().mean() >= 0.95
        expected = cpu.experts(x, experts.cpu(), weights.cpu()).float()
    torch.testing.assert_close(got, expected, rtol=1.6e-2, atol=2e-3)


def test_a_qwen3_30b_a3b_mixture_of_experts_layer_compiles_to_one_program():
    # The same block compiled in strict mode: routing, sort, histc and the grouped products
    # all in the one program (compiler/indices.py), with the row ends read on the device.
    from neuronsim import compiler

    _, block = _qwen3_moe_block(seed=9)
    x = torch.randn(1, 64, 2048, dtype=torch.bfloat16)
    compiler.reset_stats()
    torch._dynamo.reset()
    with torch.no_grad():
        eager = block(x.to("neuron")).float().cpu()
        got = torch.compile(block, backend="neuron", dynamic=False)(x.to("neuron")).float().cpu()
    (report,) = compiler.graphs()
    assert report.kernels == 1 and report.eager == [], report
    # Both route on the device from the same rounded logits; tokens whose routing agrees
    # match closely (the experts' sums are accumulated in another order).
    close = ((got - eager).abs().amax(-1) <= 2e-2).float().mean()
    assert close >= 0.9, close
    torch._dynamo.reset()
