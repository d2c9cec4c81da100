"""A small real store for the framework adapters: four documents, the default embedder, titles.

The documents are the bundled quickstart example (Markdown, with sections) and
three plain-text documents written here; ``SOURCES`` maps each doc id to the
text the store's offsets refer to, read from the inputs, not from the store.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "python" / "momoka" / "examples" / "harbor_light.md"

PLAIN = {
    "bees": ("Honey bees live in colonies of up to sixty thousand workers. The queen lays all the eggs of the hive. "
             "Worker bees collect nectar and pollen from flowers and turn the nectar into honey.\n\n"
             "In winter the colony clusters around the queen and shivers its wing muscles to stay warm. "
             "Drones are driven out of the hive before the cold months."),
    "glaciers": ("A glacier forms where more snow falls in winter than melts in summer. The snow is pressed into "
                 "firn and then into dense blue ice.\n\nGlaciers flow downhill under their own weight and carve "
                 "U-shaped valleys. Moraines are ridges of rock the ice pushed aside and left behind."),
    "printing": ("Johannes Gutenberg built a printing press with movable metal type in Mainz around 1450. "
                 "His press could print thousands of pages a day.\n\nThe Gutenberg Bible, finished about 1455, "
                 "was the first major book printed with movable type in Europe."),
}

QUESTIONS = [
    "When was the lighthouse tower finished?",
    "How do bees keep warm in winter?",
    "What did Gutenberg print in Mainz?",
    "How do glaciers carve valleys?",
    "What replaced the paraffin burner?",
]

RETRIEVERS = ("dense", "bm25", "hybrid", "mm")


@pytest.fixture(scope="package")
def sources() -> dict[str, str]:
    """doc id -> the document text the spans index (the example parsed by momoka.text, plain texts as given)."""
    from momoka.text import Document

    out = dict(PLAIN)
    out["harbor_light"] = Document.from_file(EXAMPLE).text
    return out


@pytest.fixture(scope="package")
def store_path(tmp_path_factory) -> Path:
    """A store of the four documents: recursive chunks of 40 tokens, default embedder, the title view."""
    from momoka import Index
    from momoka.text import Document

    path = tmp_path_factory.mktemp("adapters") / "store"
    docs = [Document.from_file(EXAMPLE)] + [{"doc_id": k, "title": k.title(), "text": v} for k, v in PLAIN.items()]
    Index.build(docs, store=path, chunker="recursive", size=40, enrich=["title"]).close()
    return path


@pytest.fixture(scope="package")
def index(store_path):
    from momoka import Index

    ix = Index.open(store_path)
    yield ix
    ix.close()


class SlowIndex:
    """An index whose search sleeps first (a blocking call) and records the thread it ran on."""

    def __init__(self, index, delay: float = 0.3):
        self.index, self.delay, self.threads = index, delay, []

    def search(self, *args, **kwargs):
        self.threads.append(threading.get_ident())
        time.sleep(self.delay)
        return self.index.search(*args, **kwargs)


@pytest.fixture
def slow_index(index):
    return SlowIndex(index)
