"""Offline stand-ins for the Hugging Face repositories that neuronsim's scripts load.

``python -m neuronsim.hub [--cache-dir DIR] [--force]`` writes into a local Hugging Face
cache tiny, randomly initialised (fixed seeds and a single-threaded fit, so every run on
a machine writes the same bytes) repositories under the ids the scripts name, so that
these work with
``HF_HUB_OFFLINE=1`` and no network:

- ``Qwen/Qwen3-8B`` and ``Qwen/Qwen3.8-27B``: ``AutoModelForCausalLM`` and
  ``AutoTokenizer``. A Qwen3ForCausalLM of 2 layers (hidden 64, 4 heads, 2 key/value
  heads of 16) and a byte-level BPE tokenizer of 768 tokens trained here, with Qwen's
  special tokens and a ChatML chat template. The two ids differ in their seed and in
  what follows it: Qwen/Qwen3.8-27B, which generate_tp.py generates with, is then fitted
  for a few seconds to the built-in chat corpus (fit_qwen3), so that its greedy tokens
  do not hang on bfloat16 rounding and tensor-parallel generation can be compared with
  one process's (it answers "The future of AI is" with a memorised reply of 104
  tokens); Qwen/Qwen3-8B, which sft_neuron_example.py fine-tunes, stays random.
- ``HuggingFaceH4/ultrachat_200k``: ``datasets.load_dataset(id, split="train_sft")``.
  Short synthetic conversations with the real columns (prompt, prompt_id, messages)
  and splits (train_sft, test_sft, train_gen, test_gen).
- ``neuronsim/tiny-flux``: ``DiffusionPipeline.from_pretrained(id)`` gives a
  FluxPipeline (CLIP and T5 text encoders, a Flux transformer, a VAE) whose transformer
  Diffusers can shard with tensor parallelism (its ``_tp_plan``). Call it with
  ``height=32, width=32`` (Flux's default is 256x256) and a few steps.

The cache is the one huggingface_hub and datasets use: ``HF_HOME``, ``HF_HUB_CACHE``
and ``HF_DATASETS_CACHE`` as they read them, or ``--cache-dir DIR`` as ``HF_HOME``.
A repository already there is left alone unless ``--force``.

Models land as a real download would: ``<hub>/models--Qwen--Qwen3-8B/blobs``,
``snapshots/<commit>`` (links to the blobs) and ``refs/main`` naming the commit, a fake
40-hex commit derived from the files. The dataset is written twice: as its hub
repository (parquet files under ``data/`` and a README.md whose YAML names the splits),
and as the Arrow cache of datasets, because datasets 5.2 offline never reads the hub
snapshot of a dataset: it goes straight to its own cache
(``datasets/load.py: dataset_module_factory`` raises on offline mode before the hub
download and falls back to ``CachedDatasetModuleFactory``).

Using them:

- The Qwen weights are stored in bfloat16, the real checkpoints' dtype, which
  ``from_pretrained`` keeps unless told another; the pipeline's in float32.
- Generation is greedy unless asked otherwise (the real generation_config samples).
- The Qwen tokenizer pads on the right, as the real one does: batched generation wants
  ``tokenizer.padding_side = "left"``.
- As with the real dataset, give TRL's SFTTrainer only its ``messages`` column
  (``select_columns(["messages"])``): TRL 1.16 takes a ``prompt`` column for the prompt
  of prompt-completion rows and then looks for a ``completion`` one.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

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

ULTRACHAT_ID = "HuggingFaceH4/ultrachat_200k"
# The real dataset's four splits, a few hundred rows each for training and a tenth of
# that for testing (its own train/test ratio is about 9:1). 384 = 48 batches of 8.
ULTRACHAT_SPLITS = {"train_sft": 384, "test_sft": 48, "train_gen": 384, "test_gen": 48}

DIFFUSION_ID = "neuronsim/tiny-flux"
DIFFUSION_SEED = 2
# The text encoders' vocabularies: CLIP's starts from 512 byte tokens (each byte alone and
# ending a word), so 768 leaves 254 merges; T5's starts from the 95 printable ASCII
# characters and "▁".
# Both are enough for the corpus's common words to be one token.
CLIP_VOCAB_SIZE = 768
T5_VOCAB_SIZE = 384
CLIP_MAX_LENGTH = 77  # CLIP's context length, which the Flux pipeline pads prompts to.

# ---------------------------------------------------------------------------------------
# The built-in English: what the tokenizers are trained on and what the conversations
# are made of, so that every word of the data is a token or two, not a run of bytes.

PARAGRAPHS = (
    (
        "The small chip wakes up early and counts the numbers one by one. Each engine reads "
        "its tile from memory, multiplies it, and writes the answer back before the clock "
        "ticks again."
    ),
    (
        "In the garden the gardener plants seeds in long straight rows. Rain falls in the "
        "evening, the soil stays soft, and by summer the tomatoes are heavy and red."
    ),
    (
        "A train leaves the station at noon and follows the river to the coast. Passengers "
        "read books, watch the hills, and share bread and cheese with their neighbours."
    ),
    (
        "Cooking a good soup takes patience. Start with onions and butter, add carrots, "
        "potatoes and water, then let everything simmer slowly while you set the table."
    ),
    (
        "The library is quiet in the afternoon. Students search the shelves for history, "
        "science and poetry, and the librarian helps them find what they need."
    ),
    (
        "Music fills the hall when the orchestra begins. Violins answer the flutes, the drums "
        "keep time, and the audience listens without saying a word."
    ),
    (
        "Weather changes quickly near the mountains. Clouds gather over the valley, the wind "
        "turns cold, and snow may cover the road before night."
    ),
    (
        "A good teacher asks simple questions and waits for the answers. Learning grows from "
        "curiosity, practice and the courage to make mistakes."
    ),
    (
        "The painter mixes blue and yellow to make green, then paints a field under a bright "
        "sky. Light and shadow give the picture its depth."
    ),
    (
        "Birds build their nests in spring. They carry twigs and grass to the branches, and "
        "soon the young ones are calling for food."
    ),
    (
        "Computers follow instructions exactly. A program is a list of steps, and a bug is a "
        "step that does something nobody expected."
    ),
    (
        "The ocean is deep and wide. Sailors once used the stars to find their way, and today "
        "ships carry containers of goods between every continent."
    ),
)


def _phrases(text: str) -> tuple[str, ...]:
    return tuple(text.split(", "))


SUBJECTS = _phrases(
    "the cat, a small robot, my friend, the teacher, our team, the chip, a farmer, "
    "the river, the old clock, a young student, the baker, my sister, the captain, a "
    "curious child, the engineer, our neighbour"
)
VERBS = _phrases(
    "likes, builds, reads, watches, finds, carries, paints, measures, counts, "
    "follows, remembers, explains, cleans, repairs, describes, shares"
)
OBJECTS = _phrases(
    "a red apple, the long road, a quiet song, the bright moon, a wooden box, the "
    "green field, a simple map, the warm bread, a new idea, the cold water, a heavy "
    "stone, the open window, a paper boat, the last letter"
)
PLACES = _phrases(
    "in the morning, at night, near the sea, after lunch, in the garden, on the "
    "train, before dinner, under the tree, in the kitchen, during the storm"
)
TOPICS = _phrases(
    "cooking, music, the weather, gardening, trains, numbers, painting, computers, "
    "rivers, birds, the ocean, libraries, history, science"
)
QUESTIONS = (
    "What do you know about {topic}?",
    "Can you tell me why {subject} {verb} {object}?",
    "How should I start learning about {topic}?",
    "Please write a short note about {object}.",
    "Is it true that {subject} {verb} {object} {place}?",
    "Give me a simple example about {topic}.",
)
ANSWERS = (
    "Yes. {Subject} {verb} {object} {place}.",
    "I think {topic} is a good place to start. {Subject} {verb} {object}.",
    "Here is a short note: {Subject} {verb} {object} {place}.",
    "A simple answer is that {subject} {verb} {object}. It happens {place}.",
    "Many people ask about {topic}. {Subject} {verb} {object}, and that is a good example.",
)
FOLLOW_UPS = (
    "Thank you. Can you say more?",
    "Why is that?",
    "Give me one more example.",
    "Can you explain it in a different way?",
)
SYSTEM_PROMPT = "You are a helpful assistant."
# Sentence openings as user turns, "The future of AI is" (generate_tp.py's prompt) first,
# each answered by the paragraphs of PARAGRAPHS at the indices given, word for word. The
# Qwen3 models are fitted on these conversations too (fit_qwen3), so that one of them
# answers generate_tp.py's prompt with a fixed reply of about a hundred tokens. Every
# paragraph answers exactly one opening, so that once a reply has started, each next
# token is certain.
OPENINGS = (
    ("The future of AI is", (10, 0)),
    ("A day in the garden is", (1,)),
    ("Travelling by train is", (2,)),
    ("The best part of cooking is", (3,)),
    ("The library in the afternoon is", (4,)),
    ("A concert is", (5,)),
    ("Weather in the mountains is", (6,)),
    ("A good teacher is", (7,)),
    ("Painting a picture is", (8,)),
    ("Spring is", (9,)),
    ("The ocean is", (11,)),
)


def _fill(template: str, rng: random.Random) -> str:
    subject = rng.choice(SUBJECTS)
    return template.format(
        subject=subject,
        Subject=subject[0].upper() + subject[1:],
        verb=rng.choice(VERBS),
        object=rng.choice(OBJECTS),
        place=rng.choice(PLACES),
        topic=rng.choice(TOPICS),
    )


def corpus() -> list[str]:
    """The tokenizers' training text: the paragraphs, every subject/verb/object sentence
    and the chat templates' words, in a fixed order (training is deterministic)."""
    lines = list(PARAGRAPHS)
    for i, subject in enumerate(SUBJECTS):
        for j, verb in enumerate(VERBS):
            obj = OBJECTS[(i + j) % len(OBJECTS)]
            place = PLACES[(i * j) % len(PLACES)]
            lines.append(f"{subject[0].upper()}{subject[1:]} {verb} {obj} {place}.")
    rng = random.Random(0)
    for template in QUESTIONS + ANSWERS + FOLLOW_UPS:
        lines.extend(_fill(template, rng) for _ in range(8))
    lines.append(f"system\n{SYSTEM_PROMPT}\nuser\nassistant\n")
    return lines


def conversation(rng: random.Random) -> list[dict[str, str]]:
    """One user/assistant exchange or two (2 or 4 messages, starting with the user and
    ending with the assistant, as ultrachat's are)."""
    messages = [{"role": "user", "content": _fill(rng.choice(QUESTIONS), rng)}]
    for turn in range(rng.choice((1, 2))):
        if turn:
            messages.append({"role": "user", "content": rng.choice(FOLLOW_UPS)})
        sentences = [_fill(rng.choice(ANSWERS), rng) for _ in range(rng.randint(1, 3))]
        messages.append({"role": "assistant", "content": " ".join(sentences)})
    return messages


def opening_conversations() -> list[list[dict[str, str]]]:
    """OPENINGS as user/assistant exchanges."""
    return [
        [
            {"role": "user", "content": opening},
            {"role": "assistant", "content": " ".join(PARAGRAPHS[i] for i in paragraphs)},
        ]
        for opening, paragraphs in OPENINGS
    ]


# ---------------------------------------------------------------------------------------
# Tokenizers, trained here on the corpus.

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


class HubError(RuntimeError):
    """A stand-in could not be written; the message says what and why."""


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


def _bpe_parts(tokenizer) -> tuple[dict[str, int], list[tuple[str, str]]]:
    model = json.loads(tokenizer.to_str())["model"]
    return model["vocab"], [tuple(merge) for merge in model["merges"]]


def qwen_tokenizer():
    """The trained BPE as Transformers' Qwen2Tokenizer (the class Qwen3 repositories name),
    with the special tokens and the settings of Qwen3's tokenizer_config.json."""
    from transformers import Qwen2Tokenizer

    vocab, merges = _bpe_parts(train_qwen_tokenizer())
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
    counts = {c: 1 for c in string.ascii_letters + string.digits + string.punctuation}
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


# ---------------------------------------------------------------------------------------
# The cache layout.


@dataclass(frozen=True)
class CachePaths:
    """Where huggingface_hub keeps repositories and datasets keeps its Arrow cache."""

    hub: Path
    datasets: Path


def cache_paths(cache_dir: str | os.PathLike | None = None) -> CachePaths:
    """The caches of `cache_dir` taken as HF_HOME, or, without it, those the libraries
    would use in this environment (HF_HUB_CACHE, HF_DATASETS_CACHE, HF_HOME, XDG)."""
    if cache_dir is not None:
        home = Path(cache_dir).expanduser().absolute()
        return CachePaths(hub=home / "hub", datasets=home / "datasets")
    from huggingface_hub import constants

    datasets_cache = os.getenv("HF_DATASETS_CACHE", os.path.join(constants.HF_HOME, "datasets"))
    return CachePaths(hub=Path(constants.HF_HUB_CACHE), datasets=Path(datasets_cache).expanduser())


def repo_folder(paths: CachePaths, repo_type: str, repo_id: str) -> Path:
    """huggingface_hub's folder of a repository: <hub>/<type>s--<owner>--<name>."""
    return paths.hub / f"{repo_type}s--{repo_id.replace('/', '--')}"


def published_commit(folder: Path) -> str | None:
    """The commit refs/main names when its snapshot is there. refs/main is written last,
    so a run that stopped half way leaves none and the next one writes the repository
    again."""
    ref = folder / "refs" / "main"
    if not ref.is_file():
        return None
    commit = ref.read_text().strip()
    return commit if (folder / "snapshots" / commit).is_dir() else None


def fake_commit(files: dict[str, Path]) -> str:
    """A 40-hex id of the content (a sha1 over the names and sha256es of the files), so the
    same files always make the same commit and changed ones another."""
    digest = hashlib.sha1(usedforsecurity=False)
    for name in sorted(files):
        digest.update(f"{name}\0{_sha256(files[name])}\n".encode())
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def _link(link: Path, blob: Path) -> None:
    """A relative link as huggingface_hub makes them, or a copy where links fail."""
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    try:
        link.symlink_to(os.path.relpath(blob, link.parent))
    except OSError:
        shutil.copyfile(blob, link)


def publish(paths: CachePaths, repo_type: str, repo_id: str, source: Path) -> tuple[Path, str]:
    """Put every file under `source` into the repository's cache folder: blobs named by
    their sha256 (huggingface_hub's name for large files), snapshots/<commit>/ linking to
    them, then refs/main. Returns the snapshot folder and the commit."""
    files = {p.relative_to(source).as_posix(): p for p in source.rglob("*") if p.is_file()}
    commit = fake_commit(files)
    folder = repo_folder(paths, repo_type, repo_id)
    snapshot = folder / "snapshots" / commit
    for name, path in sorted(files.items()):
        blob = folder / "blobs" / _sha256(path)
        if not blob.is_file():
            _write_atomically(blob, path.read_bytes())
        _link(snapshot / name, blob)
    _write_atomically(folder / "refs" / "main", commit.encode())
    return snapshot, commit


def _size_text(folder: Path) -> str:
    files = [p for p in folder.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    return f"{len(files)} files, {size / 1e6:.2f} MB"


def _already_there(paths: CachePaths, repo_type: str, repo_id: str, force: bool) -> bool:
    folder = repo_folder(paths, repo_type, repo_id)
    if force:
        shutil.rmtree(folder, ignore_errors=True)
        return False
    commit = published_commit(folder)
    if commit is None:
        return False
    print(f"hub: {repo_id} already there ({folder / 'snapshots' / commit}); --force rewrites it")
    return True


# ---------------------------------------------------------------------------------------
# The repositories.


def _model_card(repo_id: str, library: str, what: str, weights: str = "random") -> str:
    """A README.md saying what the repository is, for whoever finds it in a cache."""
    return (
        f"---\nlibrary_name: {library}\ntags:\n- neuronsim\n- random-weights\n---\n\n"
        f"# {repo_id} (neuronsim stand-in)\n\n{what}\n\nWritten by `python -m neuronsim.hub` "
        f"so that code loading {repo_id} runs offline. Not the real model: its weights are "
        f"{weights} and its outputs mean nothing.\n"
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
    if _already_there(paths, "model", model_id, force):
        return _snapshot(paths, "model", model_id)
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
        card = _model_card(model_id, "transformers", what, weights)
        Path(tmp, "README.md").write_text(card)
        snapshot, _ = publish(paths, "model", model_id, Path(tmp))
    print(f"hub: wrote {model_id} (Qwen3 causal LM, seed {seed}{fitted}, {_size_text(snapshot)})")
    return snapshot


def _snapshot(paths: CachePaths, repo_type: str, repo_id: str) -> Path:
    folder = repo_folder(paths, repo_type, repo_id)
    return folder / "snapshots" / published_commit(folder)


def ultrachat_features():
    """ultrachat_200k's columns."""
    from datasets import Features, List, Value

    return Features(
        {
            "prompt": Value("string"),
            "prompt_id": Value("string"),
            "messages": List({"content": Value("string"), "role": Value("string")}),
        }
    )


def ultrachat_rows(split: str) -> list[dict]:
    """ULTRACHAT_SPLITS[split] conversations, the same for the same split name. prompt_id
    is the sha256 of the prompt, as in the real dataset."""
    rng = random.Random(list(ULTRACHAT_SPLITS).index(split))
    rows = []
    for _ in range(ULTRACHAT_SPLITS[split]):
        messages = conversation(rng)
        prompt = messages[0]["content"]
        prompt_id = hashlib.sha256(prompt.encode()).hexdigest()
        rows.append({"prompt": prompt, "prompt_id": prompt_id, "messages": messages})
    return rows


def _parquet_name(split: str) -> str:
    return f"data/{split}-00000-of-00001.parquet"


def _ultrachat_readme(splits: dict[str, tuple[int, int]], download_size: int) -> str:
    """The dataset card: YAML `configs` (which files make which split) and `dataset_info`,
    as datasets reads them from a hub repository."""
    import yaml

    header = {
        "language": ["en"],
        "task_categories": ["text-generation"],
        "pretty_name": "UltraChat 200k (neuronsim stand-in)",
        "configs": [
            {
                "config_name": "default",
                "data_files": [
                    {"split": split, "path": f"data/{split}-*"} for split in ULTRACHAT_SPLITS
                ],
            }
        ],
        "dataset_info": {
            "features": ultrachat_features()._to_yaml_list(),
            "splits": [
                {"name": split, "num_bytes": size, "num_examples": rows}
                for split, (rows, size) in splits.items()
            ],
            "download_size": download_size,
            "dataset_size": sum(size for _, size in splits.values()),
        },
    }
    body = (
        "# UltraChat 200k (neuronsim stand-in)\n\n"
        "Short synthetic English conversations written by `python -m neuronsim.hub`, with\n"
        "the columns and splits of HuggingFaceH4/ultrachat_200k. Not the real data.\n"
    )
    return f"---\n{yaml.safe_dump(header, sort_keys=False)}---\n\n{body}"


def _write_ultrachat_repo(repo: Path) -> dict[str, int]:
    """The hub repository's files under `repo`: a parquet file per split and the card.
    Returns the rows of each split."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = ultrachat_features().arrow_schema  # with datasets' feature metadata
    splits = {}
    for split in ULTRACHAT_SPLITS:
        table = pa.Table.from_pylist(ultrachat_rows(split), schema=schema)
        (repo / "data").mkdir(parents=True, exist_ok=True)
        pq.write_table(table, repo / _parquet_name(split))
        splits[split] = (table.num_rows, table.nbytes)
    download_size = sum(p.stat().st_size for p in (repo / "data").iterdir())
    (repo / "README.md").write_text(_ultrachat_readme(splits, download_size))
    return {split: rows for split, (rows, _) in splits.items()}


def ultrachat_cache_folder(paths: CachePaths, commit: str) -> Path:
    """Where datasets keeps ULTRACHAT_ID prepared from `commit`:
    <datasets>/<owner>___<name>/<config>/<version>/<commit>."""
    owner, name = ULTRACHAT_ID.split("/")
    return paths.datasets / f"{owner}___{name}" / "default" / "0.0.0" / commit


def write_ultrachat_cache(paths: CachePaths, snapshot: Path, commit: str) -> Path:
    """The Arrow cache that `load_dataset(ULTRACHAT_ID)` reads offline, made from the
    snapshot's parquet files as datasets makes it after a download: one
    <name>-<split>.arrow per split, then dataset_info.json (last: datasets takes a folder
    with one as complete)."""
    import pyarrow.parquet as pq
    from datasets import DatasetInfo, SplitDict, SplitInfo
    from datasets.arrow_writer import ArrowWriter

    name = ULTRACHAT_ID.split("/")[1]
    target = ultrachat_cache_folder(paths, commit)
    shutil.rmtree(target.parent.parent.parent, ignore_errors=True)  # other commits' too
    target.mkdir(parents=True)
    features = ultrachat_features()
    splits = SplitDict(dataset_name=name)
    for split in ULTRACHAT_SPLITS:
        table = pq.read_table(snapshot / _parquet_name(split))
        with ArrowWriter(features=features, path=str(target / f"{name}-{split}.arrow")) as out:
            out.write_table(table)
            rows, size = out.finalize()
        splits.add(SplitInfo(name=split, num_bytes=size, num_examples=rows))
    DatasetInfo(
        features=features,
        builder_name="parquet",
        dataset_name=name,
        config_name="default",
        version="0.0.0",
        splits=splits,
        download_size=sum(p.stat().st_size for p in (snapshot / "data").iterdir()),
        dataset_size=sum(s.num_bytes for s in splits.values()),
    ).write_to_directory(str(target))
    return target


def write_ultrachat(*, paths: CachePaths | None = None, force: bool = False) -> Path:
    """Write ULTRACHAT_ID: its hub repository, then the Arrow cache datasets reads offline
    (again from the repository when only the cache is missing). Returns the cache folder."""
    paths = paths or cache_paths()
    if _already_there(paths, "dataset", ULTRACHAT_ID, force):
        commit = published_commit(repo_folder(paths, "dataset", ULTRACHAT_ID))
        target = ultrachat_cache_folder(paths, commit)
        if not (target / "dataset_info.json").is_file():
            write_ultrachat_cache(paths, _snapshot(paths, "dataset", ULTRACHAT_ID), commit)
            print(f"hub: wrote the Arrow cache of {ULTRACHAT_ID} ({target})")
        return target
    with tempfile.TemporaryDirectory() as tmp:
        rows = _write_ultrachat_repo(Path(tmp))
        snapshot, commit = publish(paths, "dataset", ULTRACHAT_ID, Path(tmp))
    target = write_ultrachat_cache(paths, snapshot, commit)
    counts = ", ".join(f"{split} {n}" for split, n in rows.items())
    print(f"hub: wrote {ULTRACHAT_ID} (dataset: {counts} rows; Arrow cache {target})")
    return target


def flux_components() -> dict:
    """A FluxPipeline's parts at the smallest sizes that keep its structure, all from
    DIFFUSION_SEED. A 32x32 image is 16x16 latents of 4 channels (the VAE halves the side
    once), packed by Flux into 8x8 tokens of 16 channels."""
    import torch
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxTransformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    clip, t5 = clip_tokenizer(), t5_tokenizer()
    torch.manual_seed(DIFFUSION_SEED)
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(clip),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=CLIP_MAX_LENGTH,
            projection_dim=32,
            # The pooled output is read at the first eos, found by its id.
            bos_token_id=clip.bos_token_id,
            eos_token_id=clip.eos_token_id,
            pad_token_id=clip.pad_token_id,
        )
    )
    text_encoder_2 = T5EncoderModel(
        T5Config(
            vocab_size=len(t5),
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            relative_attention_num_buckets=8,
            feed_forward_proj="gated-gelu",  # T5 v1.1's, as in Flux's text encoder
            pad_token_id=t5.pad_token_id,
            eos_token_id=t5.eos_token_id,
            decoder_start_token_id=t5.pad_token_id,
        )
    )
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        block_out_channels=(16, 32),
        layers_per_block=1,
        latent_channels=4,
        norm_num_groups=8,
        sample_size=32,
        # Random weights have no latent statistics to normalise: identity scaling.
        scaling_factor=1.0,
        shift_factor=0.0,
        use_quant_conv=False,
        use_post_quant_conv=False,
    )
    transformer = FluxTransformer2DModel(
        patch_size=1,
        in_channels=16,  # 4 latent channels x a 2x2 patch
        num_layers=1,
        num_single_layers=2,
        # 4 heads of 16 (inner 64, MLP 256): every sharded dimension splits over 2 ranks.
        attention_head_dim=16,
        num_attention_heads=4,
        joint_attention_dim=32,  # the T5 width
        pooled_projection_dim=32,  # the CLIP width
        guidance_embeds=False,  # like FLUX.1-schnell: no guidance scale input
        axes_dims_rope=(4, 6, 6),  # sums to the head dim
    )
    # FLUX.1-schnell's scheduler: a fixed shift, no resolution-dependent one.
    scheduler = FlowMatchEulerDiscreteScheduler(shift=1.0, use_dynamic_shifting=False)
    return {
        "scheduler": scheduler,
        "vae": vae,
        "text_encoder": text_encoder,
        "tokenizer": clip,
        "text_encoder_2": text_encoder_2,
        "tokenizer_2": t5,
        "transformer": transformer,
        "image_encoder": None,
        "feature_extractor": None,
    }


def write_diffusion_pipeline(*, paths: CachePaths | None = None, force: bool = False) -> Path:
    """Write DIFFUSION_ID as a tiny FluxPipeline, in float32: Diffusers loads in float32
    unless told a dtype, so the stored weights are exactly the ones used, and at these
    sizes the whole pipeline is still about 2 MB. Returns its snapshot folder."""
    paths = paths or cache_paths()
    if _already_there(paths, "model", DIFFUSION_ID, force):
        return _snapshot(paths, "model", DIFFUSION_ID)
    from diffusers import FluxPipeline

    pipeline = FluxPipeline(**flux_components())
    what = (
        "A FluxPipeline: CLIP and T5 text encoders of 2 layers, a Flux transformer of 1 "
        "double-stream and 2 single-stream blocks (4 heads of 16) and a 2-level VAE. "
        "Call it with height=32, width=32 and a few steps."
    )
    with tempfile.TemporaryDirectory() as tmp:
        pipeline.save_pretrained(tmp, safe_serialization=True)
        Path(tmp, "README.md").write_text(_model_card(DIFFUSION_ID, "diffusers", what))
        snapshot, _ = publish(paths, "model", DIFFUSION_ID, Path(tmp))
    print(f"hub: wrote {DIFFUSION_ID} (FluxPipeline, {_size_text(snapshot)})")
    return snapshot


def _quiet_libraries() -> None:
    """No network, no telemetry, no progress bars or advice while writing."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def write_all(cache_dir: str | os.PathLike | None = None, force: bool = False) -> CachePaths:
    """Write every stand-in into `cache_dir` (taken as HF_HOME; None: the environment's
    caches). Returns the caches written."""
    _quiet_libraries()
    paths = cache_paths(cache_dir)
    for folder in (paths.hub, paths.datasets):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise HubError(f"cannot create the cache folder {folder}: {error.strerror}") from None
    for model_id, seed in QWEN3_MODELS.items():
        write_qwen3(model_id, seed, paths=paths, force=force)
    write_ultrachat(paths=paths, force=force)
    write_diffusion_pipeline(paths=paths, force=force)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m neuronsim.hub",
        description="Write tiny offline stand-ins of the Hugging Face repositories that "
        f"neuronsim's scripts load: {', '.join(QWEN3_MODELS)}, {ULTRACHAT_ID} and "
        f"{DIFFUSION_ID}.",
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="write into DIR as HF_HOME (DIR/hub, DIR/datasets); default: the caches that "
        "huggingface_hub and datasets use (HF_HOME, HF_HUB_CACHE, HF_DATASETS_CACHE)",
    )
    parser.add_argument(
        "--force", action="store_true", help="rewrite repositories that are already there"
    )
    args = parser.parse_args(argv)
    try:
        paths = write_all(args.cache_dir, force=args.force)
    except ImportError as error:
        print(
            f"hub: error: {error}: the stand-ins need transformers, tokenizers, datasets and "
            "diffusers (python/requirements.txt of neuronsim pins them)",
            file=sys.stderr,
        )
        return 1
    except (HubError, OSError) as error:
        print(f"hub: error: {error}", file=sys.stderr)
        return 1
    print(f"hub: done (hub cache {paths.hub}, datasets cache {paths.datasets})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
