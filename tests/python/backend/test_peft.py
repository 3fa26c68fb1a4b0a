"""A PEFT LoRA fine-tuning step on "neuron": TRL's SFTTrainer with a peft_config over a
tiny Qwen3 runs in strict mode (no op on the CPU) with the CPU's losses, trains only the
adapters and leaves the base weights as they were."""

from __future__ import annotations

import datasets
import pytest
import torch
from peft import LoraConfig
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from trl import SFTConfig, SFTTrainer

import neuronsim
from neuronsim.testing import tiny_qwen3

VOCAB = 256


def _tokenizer():
    """A word-level tokenizer over the tiny model's 256 ids, made here (nothing downloaded)."""
    words = Tokenizer(models.WordLevel({f"w{i}": i for i in range(VOCAB)}, unk_token="w0"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=words, unk_token="w0", pad_token="w1", eos_token="w2"
    )


def _fine_tune(tmp_path, use_cpu: bool):
    rows = torch.randint(4, 200, (8, 24), generator=torch.Generator().manual_seed(3))
    data = datasets.Dataset.from_dict({"input_ids": rows.tolist()})
    args = SFTConfig(
        output_dir=str(tmp_path / ("cpu" if use_cpu else "neuron")),
        max_steps=3,
        per_device_train_batch_size=4,
        learning_rate=5e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=use_cpu,
        disable_tqdm=True,
        seed=0,
    )
    lora = LoraConfig(
        r=4,
        lora_alpha=8,
        lora_dropout=0.0,
        target_modules=["q_proj", "v_proj"],
        task_type="CAUSAL_LM",
    )
    torch.manual_seed(0)
    base = tiny_qwen3()
    before = {n: p.detach().clone() for n, p in base.named_parameters()}
    trainer = SFTTrainer(
        model=base, args=args, train_dataset=data, processing_class=_tokenizer(), peft_config=lora
    )
    with neuronsim.strict_mode(not use_cpu):
        trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return losses, trainer.model, before


def test_lora_step_with_sft_trainer_matches_the_cpu(tmp_path):
    cpu_losses, _, _ = _fine_tune(tmp_path, use_cpu=True)
    losses, model, before = _fine_tune(tmp_path, use_cpu=False)
    assert len(losses) == 3
    assert losses == pytest.approx(cpu_losses, rel=1e-3)
    assert next(model.parameters()).device.type == "neuron"
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    moved = [n for n in trainable if "lora_B" in n]
    assert moved and all(
        model.get_parameter(n).detach().abs().max().item() > 0 for n in moved
    )  # B starts at zero: the adapters learned
    base = model.get_base_model()
    for name, value in before.items():
        peft_name = name.replace("q_proj.weight", "q_proj.base_layer.weight").replace(
            "v_proj.weight", "v_proj.base_layer.weight"
        )
        assert torch.equal(base.get_parameter(peft_name).detach().cpu(), value), name
