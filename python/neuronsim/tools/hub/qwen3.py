"""The Qwen3 stand-ins: QWEN3_MODELS as tiny Qwen3 causal LMs with the Qwen tokenizer,
one of them fitted to the built-in chat corpus."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .cache import (
    CachePaths,
    already_there,
    cache_paths,
    model_card,
    publish,
    size_text,
    snapshot_folder,
)
from .corpus import opening_conversations
from .tokenizer import CHAT_TEMPLATE, ENDOFTEXT, IM_END, IM_START, bpe_parts, train_qwen_tokenizer
from .ultrachat import ultrachat_rows

# ---------------------------------------------------------------------------------------
# What is written. Every size is the smallest that still exercises what the scripts use.

# Model id -> seed of its random weights. The fictional 27B id of the scripts and the real
# 8B one share the architecture; different seeds make their outputs differ.
QWEN3_MODELS = {"Qwen/Qwen3-8B": 0, "Qwen/Qwen3.8-27B": 1}

# Model id -> steps of fitting on the built-in chat corpus after the random initialisation
# (fit_qwen3 says why and how). Qwen/Qwen3.8-27B is what generate_tp.py generates with,
# on tensor-parallel ranks in bfloat16, and its tokens are compared with one CPU
# process's: it is fitted until its greedy choices are decisive. Qwen/Qwen3-8B is what
# sft_neuron_example.py fine-tunes on the ultrachat stand-in, where the test is that the
# loss falls: it stays random (loss ln 768 = 6.6 at the start), with all to learn.
QWEN3_FIT_STEPS = {"Qwen/Qwen3-8B": 0, "Qwen/Qwen3.8-27B": 200}

QWEN3_SIZES = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    # 4 query and 2 key/value heads: both divide over 2 tensor-parallel ranks.
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    # The scripts use a KV cache of 1024 and sequences of up to ~1k tokens; 4096 leaves
    # room for both with a prompt padded to a multiple of 512.
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    # Qwen3's own RoPE base and norm epsilon, so the arithmetic is the real model's.
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
}


def qwen_tokenizer():
    """The trained BPE as Transformers' Qwen2Tokenizer (the class Qwen3 repositories name),
    with the special tokens and the settings of Qwen3's tokenizer_config.json."""
    from transformers import Qwen2Tokenizer

    vocab, merges = bpe_parts(train_qwen_tokenizer())
    return Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        extra_special_tokens=[IM_START, IM_END],
        chat_template=CHAT_TEMPLATE,
        model_max_length=QWEN3_SIZES["max_position_embeddings"],
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
    )


def qwen3_config(tokenizer):
    """Qwen3's config at QWEN3_SIZES for `tokenizer`: one row of embedding per token, and
    the special ids of the real repositories: bos = <|endoftext|> (which the tokenizer
    never adds), eos = <|im_end|>, pad = <|endoftext|>."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.convert_tokens_to_ids(ENDOFTEXT),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        # bfloat16 like the real checkpoints, so that from_pretrained(id) without a dtype
        # gives the model in bfloat16 as it would for the real one.
        dtype="bfloat16",
        **QWEN3_SIZES,
    )


def _qwen3_generation_config(config):
    """Generation stops at the end of a turn or of the text (Qwen's two eos ids). Qwen's
    sampling defaults are left out: generation is greedy, and so reproducible, unless
    the caller asks for sampling."""
    from transformers import GenerationConfig

    return GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=[config.eos_token_id, config.bos_token_id],
        pad_token_id=config.pad_token_id,
    )


# The fit (fit_qwen3): AdamW at FIT_LR, warmed up over FIT_WARMUP steps then decayed to 0
# on a cosine, gradients clipped to norm 1. Each step's batch is generate_tp.py's
# conversation (OPENINGS[0]), FIT_OPENINGS of the other openings and FIT_CONVERSATIONS
# ultrachat rows, both taken in turn (200 x 4 rows: the 384 of train_sft about twice).
# The 200 steps of 7 conversations take about 7 s on one thread (the whole tool about
# 13 s on 2 cores). They leave "The future of AI is" answered, greedily in bfloat16 as
# generate_tp.py does, with a 104-token reply (its two paragraphs, then <|im_end|>) whose
# every choice leads the runner-up by 4.25 logits or more (median 8.8); bfloat16 moves
# these logits (the top ones 12 to 18) by at most 0.15 from their float32 values, and
# rounding 2 or 4 tensor-parallel partial sums to bfloat16 by 0.125 (a bfloat16 step
# there). The random model's margins were 0.03 (median) to 0, below that noise (0.004 at
# its logits of about 0.5). 100 steps leave a smallest margin of 1.7, 300 steps 5.1 for
# half as much time again.
FIT_LR = 1e-2
FIT_WARMUP = 20
FIT_OPENINGS = 2
FIT_CONVERSATIONS = 4


def _fit_examples(tokenizer, conversations) -> list[tuple[list[int], list[int]]]:
    """Each conversation as ChatML ids and its labels: the assistant's tokens, end of turn
    included (the template's {% generation %} span), and -100 (no loss) elsewhere."""
    examples = []
    for messages in conversations:
        encoded = tokenizer.apply_chat_template(
            messages, return_dict=True, return_assistant_tokens_mask=True
        )
        ids = encoded["input_ids"]
        labels = [i if said else -100 for i, said in zip(ids, encoded["assistant_masks"])]
        examples.append((ids, labels))
    return examples


def fit_qwen3(model, tokenizer, steps: int) -> float:
    """Fit `model` (in float32) for `steps` steps on the built-in chat corpus; returns the
    last step's loss.

    Why: a randomly initialised model's next-token logits are nearly tied (over 768
    tokens, the top two differ by a few percent of their spread, some by nothing at all
    in bfloat16), so its greedy tokens hang on rounding. generate_tp.py runs the model
    in bfloat16 split over tensor-parallel ranks, whose partial sums are rounded to
    bfloat16 before they are added, and that alone changed greedy tokens after a few
    dozen: its output could not be compared with one process's. Fitted, the model has
    learnt the corpus, answers generate_tp.py's prompt with a memorised reply, and every
    choice in it is decisive.

    What: only the assistant's tokens are learnt (see _fit_examples), from generate_tp.py's
    conversation in every batch, the other OPENINGS (so that the reply depends on the
    prompt) and the ultrachat stand-in's train_sft conversations (so that other prompts
    get the corpus's kind of answer, closed by <|im_end|>). FIT_* say how.

    The same bytes every run on a machine: the data and its order are fixed, nothing is
    drawn, and the arithmetic runs on one thread (a thread count changes how sums are
    split); the caller's thread count is restored after."""
    import math

    import torch
    import torch.nn.functional as F

    openings = _fit_examples(tokenizer, opening_conversations())
    chats = _fit_examples(tokenizer, [row["messages"] for row in ultrachat_rows("train_sft")])
    others = openings[1:]
    optimizer = torch.optim.AdamW(model.parameters(), lr=FIT_LR, betas=(0.9, 0.95))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: (
            min(1.0, (step + 1) / FIT_WARMUP) * 0.5 * (1 + math.cos(math.pi * step / steps))
        ),
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model.train()
    loss = torch.tensor(float("nan"))
    try:
        for step in range(steps):
            batch = [openings[0]]
            batch += [others[(step * FIT_OPENINGS + k) % len(others)] for k in range(FIT_OPENINGS)]
            batch += [
                chats[(step * FIT_CONVERSATIONS + k) % len(chats)] for k in range(FIT_CONVERSATIONS)
            ]
            # Padded on the right: causal attention keeps the padding out of what comes
            # before it, so no attention mask is needed, and the padding has no labels.
            width = max(len(ids) for ids, _ in batch)
            ids = torch.tensor([i + [tokenizer.pad_token_id] * (width - len(i)) for i, _ in batch])
            labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in batch])
            logits = model(input_ids=ids).logits
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
    finally:
        torch.set_num_threads(threads)
        model.eval()
    return loss.item()


def write_qwen3(
    model_id: str, seed: int, *, paths: CachePaths | None = None, force: bool = False
) -> Path:
    """Write `model_id` as a tiny Qwen3 causal LM whose weights come from `seed`, fitted for
    QWEN3_FIT_STEPS[model_id] steps (fit_qwen3), with the tokenizer. Returns its snapshot
    folder."""
    paths = paths or cache_paths()
    if already_there(paths, "model", model_id, force):
        return snapshot_folder(paths, "model", model_id)
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = qwen_tokenizer()
    config = qwen3_config(tokenizer)
    steps = QWEN3_FIT_STEPS.get(model_id, 0)
    torch.manual_seed(seed)
    # Initialised and fitted in float32 (what the seed means everywhere), then stored in
    # bfloat16.
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    weights, fitted = "random", ""
    if steps:
        loss = fit_qwen3(model, tokenizer, steps)
        weights = f"random, then fitted for {steps} steps to a tiny built-in chat corpus,"
        fitted = f", fitted {steps} steps to loss {loss:.2f}"
    model = model.to(torch.bfloat16)
    model.generation_config = _qwen3_generation_config(config)
    what = (
        f"A {QWEN3_SIZES['num_hidden_layers']}-layer Qwen3ForCausalLM (hidden "
        f"{QWEN3_SIZES['hidden_size']}, seed {seed}) with a {len(tokenizer)}-token byte-level "
        "BPE tokenizer and a ChatML chat template."
    )
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        # The template goes into tokenizer_config.json, where Qwen3's repositories keep it.
        tokenizer.save_pretrained(tmp, save_jinja_files=False)
        card = model_card(model_id, "transformers", what, weights)
        Path(tmp, "README.md").write_text(card)
        snapshot, _ = publish(paths, "model", model_id, Path(tmp))
    print(f"hub: wrote {model_id} (Qwen3 causal LM, seed {seed}{fitted}, {size_text(snapshot)})")
    return snapshot
