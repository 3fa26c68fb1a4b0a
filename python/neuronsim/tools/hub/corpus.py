"""The built-in English: what the tokenizers are trained on and what the conversations
are made of, so that every word of the data is a token or two, not a run of bytes."""

from __future__ import annotations

import random

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
