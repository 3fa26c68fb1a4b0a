"""Tokenizers, trained here on the corpus: Qwen's byte-level BPE, CLIP's BPE and T5's
Unigram model, with the sizes and special tokens they are trained to."""

from __future__ import annotations

import itertools
import json

from .corpus import corpus
from .errors import HubError

# 768 = 12 x 64: the embedding and the LM head split evenly over 2 (or 4, 8) ranks, and
# the built-in corpus has enough distinct words for that many merges.
QWEN_VOCAB_SIZE = 768
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"

# ChatML, as Qwen writes it: each turn is "<|im_start|>role\ncontent<|im_end|>\n", and the
# generation prompt opens an assistant turn. The {% generation %} markers (a Transformers
# extension) bracket what the assistant says, end-of-turn token included, so that TRL's
# SFTTrainer can also train on the assistant's tokens only (assistant_only_loss=True);
# without that option they change nothing in the output.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['role'] == 'assistant' %}"
    "{%- generation %}{{- message['content'] + '<|im_end|>' }}{%- endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# The text encoders' vocabularies: CLIP's starts from 512 byte tokens (each byte alone and
# ending a word), so 768 leaves 254 merges; T5's starts from the 95 printable ASCII
# characters and "▁".
# Both are enough for the corpus's common words to be one token.
CLIP_VOCAB_SIZE = 768
T5_VOCAB_SIZE = 384
CLIP_MAX_LENGTH = 77  # CLIP's context length, which the Flux pipeline pads prompts to.

# Qwen2's pre-tokenizer split (contractions, letters, single digits, punctuation, spaces).
# Transformers' Qwen2Tokenizer rebuilds its pipeline with this very pattern when it loads,
# so the tokenizer is trained under it.
QWEN_SPLIT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# CLIP's split, likewise what CLIPTokenizer rebuilds on load.
CLIP_SPLIT = (
    r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|"""
    r"""[^\s\p{L}\p{N}]+"""
)


def _check_size(name: str, size: int, expected: int) -> None:
    """Training stops early when the corpus runs out of pairs to merge, and the model
    configs rely on the size."""
    if size != expected:
        raise HubError(
            f"the {name} tokenizer trained to {size} tokens, not {expected}: the built-in "
            "corpus has too few distinct words for that many"
        )


def train_qwen_tokenizer():
    """A byte-level BPE of QWEN_VOCAB_SIZE tokens with Qwen's pipeline; the special tokens
    take ids 0-2 (<|endoftext|>, <|im_start|>, <|im_end|>)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=QWEN_VOCAB_SIZE,
        special_tokens=[ENDOFTEXT, IM_START, IM_END],
        # Every byte is a token, so any text encodes, not just the corpus's letters.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer)
    _check_size("Qwen", tokenizer.get_vocab_size(), QWEN_VOCAB_SIZE)
    return tokenizer


def bpe_parts(tokenizer) -> tuple[dict[str, int], list[tuple[str, str]]]:
    model = json.loads(tokenizer.to_str())["model"]
    return model["vocab"], [tuple(merge) for merge in model["merges"]]


def learn_merges(words: dict[tuple[str, ...], int], stop) -> list[tuple[tuple[str, str], int]]:
    """Byte-pair merges learnt from `words` (each a tuple of symbols, with its count):
    each step joins the most frequent adjacent pair, the smallest pair first among
    equals, until `stop(merges)` says enough. Returns the merges with the count each had.

    The CLIP and T5 tokenizers learn theirs here, not with tokenizers' trainers: its BPE
    trainer numbers CLIP's end-of-word symbols in hash order and its Unigram trainer
    keeps a different set of pieces from one process to the next. Its BPE trainer is
    reproducible without end-of-word symbols, so Qwen's tokenizer is trained with it."""
    merges: list[tuple[tuple[str, str], int]] = []
    while not stop(merges):
        pairs: dict[tuple[str, str], int] = {}
        for symbols, count in words.items():
            for pair in itertools.pairwise(symbols):
                pairs[pair] = pairs.get(pair, 0) + count
        if not pairs:
            break
        best = min(pairs, key=lambda pair: (-pairs[pair], pair))
        merges.append((best, pairs[best]))
        words = {_join(symbols, best): count for symbols, count in words.items()}
    return merges


def _join(symbols: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
    out, i = [], 0
    while i < len(symbols):
        if symbols[i : i + 2] == pair:
            out.append(pair[0] + pair[1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def _pre_tokenized_counts(normalizer, pre_tokenizer, suffix: str = "") -> dict:
    """The corpus's words as the tokenizer's own normalizer and pre-tokenizer cut them,
    as symbol tuples (the last one carrying `suffix`) with their counts, in first-seen
    order."""
    counts: dict[tuple[str, ...], int] = {}
    for line in corpus():
        text = normalizer.normalize_str(line) if normalizer else line
        for word, _ in pre_tokenizer.pre_tokenize_str(text):
            symbols = (*word[:-1], word[-1] + suffix)
            counts[symbols] = counts.get(symbols, 0) + 1
    return counts


def clip_tokenizer():
    """A BPE of CLIP_VOCAB_SIZE tokens with CLIP's pipeline (lower case, "</w>" ending each
    word), as Transformers' CLIPTokenizer. Laid out like CLIP's vocabulary: the 256
    bytes, the 256 bytes ending a word, the merged tokens, the two special tokens last."""
    from tokenizers import Regex, normalizers, pre_tokenizers
    from transformers import CLIPTokenizer

    bos, eos = "<|startoftext|>", "<|endoftext|>"
    normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
    )
    pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(CLIP_SPLIT), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {token: i for i, token in enumerate(alphabet + [a + "</w>" for a in alphabet])}

    def enough(merges) -> bool:
        if merges:
            vocab.setdefault("".join(merges[-1][0]), len(vocab))
        return len(vocab) == CLIP_VOCAB_SIZE - 2

    words = _pre_tokenized_counts(normalizer, pre_tokenizer, suffix="</w>")
    merges = [pair for pair, _ in learn_merges(words, enough)]
    _check_size("CLIP", len(vocab) + 2, CLIP_VOCAB_SIZE)
    vocab.update({bos: len(vocab), eos: len(vocab) + 1})
    return CLIPTokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=eos,
        bos_token=bos,
        eos_token=eos,
        pad_token=eos,
        model_max_length=CLIP_MAX_LENGTH,
    )


def t5_tokenizer():
    """A Unigram model of T5_VOCAB_SIZE pieces with T5's pipeline ("▁" starting each word),
    as Transformers' T5Tokenizer: <pad>, </s>, <unk> at ids 0-2 as it expects, then the
    corpus's characters and the BPE merges of its words, each scored by the log of its
    frequency (so that whole pieces beat their parts), without T5's 100 sentinel tokens
    (nothing here does span corruption)."""
    import math
    import string

    from tokenizers import pre_tokenizers
    from transformers import T5Tokenizer

    pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True),
        ]
    )
    words = _pre_tokenized_counts(None, pre_tokenizer)
    # Every printable ASCII character is a piece (counted once more than the corpus has
    # it, so that each has a score), and only other characters become <unk>, as in T5.
    counts = dict.fromkeys(string.ascii_letters + string.digits + string.punctuation, 1)
    for symbols, count in words.items():
        for symbol in symbols:
            counts[symbol] = counts.get(symbol, 0) + count
    characters = sorted(counts)

    def enough(merges) -> bool:
        if merges:
            counts.setdefault("".join(merges[-1][0]), merges[-1][1])
        return len(counts) == T5_VOCAB_SIZE - 3

    learn_merges(words, enough)
    _check_size("T5", len(counts) + 3, T5_VOCAB_SIZE)
    total = sum(counts.values())
    pieces = characters + [piece for piece in counts if piece not in characters]
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(piece, round(math.log(counts[piece] / total), 4)) for piece in pieces]
    # 512: the length the Flux pipeline pads T5 prompts to unless told another.
    return T5Tokenizer(vocab=vocab, extra_ids=0, model_max_length=512)
