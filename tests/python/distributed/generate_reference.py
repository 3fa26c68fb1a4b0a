"""What generate_tp.py generates, computed in one process on the CPU: the same model, chat
template, padding and greedy static-cache generation, without tensor parallelism or the
device. Prints the decoded new text (what the seed script prints) and the token ids as JSON."""

from __future__ import annotations

import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

model_id, max_seq_len, prefill_chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
model = AutoModelForCausalLM.from_pretrained(model_id, dtype=torch.bfloat16).eval()
tokenizer = AutoTokenizer.from_pretrained(model_id)
if tokenizer.pad_token is None:
    tokenizer.pad_token = tokenizer.eos_token
tokenizer.padding_side = "left"
inputs = tokenizer.apply_chat_template(
    [{"role": "user", "content": "The future of AI is"}],
    add_generation_prompt=True,
    padding=True,
    tokenizer_kwargs={"pad_to_multiple_of": prefill_chunk},
    return_tensors="pt",
)
config = GenerationConfig(
    max_new_tokens=128,
    do_sample=False,
    use_cache=True,
    pad_token_id=tokenizer.pad_token_id,
    eos_token_id=tokenizer.eos_token_id,
    cache_implementation="static",
    max_cache_len=max_seq_len,
    prefill_chunk_size=prefill_chunk,
)
with torch.no_grad():
    out = model.generate(
        inputs["input_ids"], attention_mask=inputs["attention_mask"], generation_config=config
    )
new = out[0, inputs["input_ids"].shape[1] :]
text = tokenizer.decode(new, skip_special_tokens=True)
print(json.dumps({"text": text, "tokens": new.tolist()}))
