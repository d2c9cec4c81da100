"""Chunking speed: momoka's chunkers beside chonkie, semchunk and langchain-text-splitters.

Inputs:
  * real: the longest shared SQuAD document (``squad_European_Union_law``)
    repeated, blank-line separated, to about 5 MB;
  * repetitive: its first paragraph repeated 3000 times (offset check).

Character-based chunking uses 1000- and 4000-character chunks; token-counted chunking
uses 256-token chunks with ONE tokenizer for everyone: a ``tokenizers``
word-level tokenizer (WhitespaceSplit) trained in-process on the document.
Peers that cannot be imported are skipped. Prints MB/s for each and each
momoka configuration's ratio to the fastest peer of its kind, then the offset
check on the repetitive input.

Run:  PYTHONPATH=python python -m pytest bench/bench_chunking.py --benchmark-only -s
"""

from __future__ import annotations

import json

import pytest

from momoka.chunking import FixedChunker, RecursiveChunker
from momoka.text import Document

CHARS = 1000
CHAR_SIZES = (1000, 4000)
TOKENS = 256
TARGET_BYTES = 5_000_000
LC_SEPARATORS = ("\n\n", "\n", " ")  # langchain's defaults, minus the empty string

RESULTS: dict[str, dict[str, float]] = {f"chars-{n}": {} for n in CHAR_SIZES}
RESULTS["tokens"] = {}
OFFSETS: dict[str, str] = {}


# -- inputs ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def base_doc(shared_data):
    with open(shared_data / "squad_v1_dev_half_a" / "documents.jsonl", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    return max(docs, key=lambda d: len(d["text"]))["text"]


@pytest.fixture(scope="module")
def real_text(base_doc):
    reps = TARGET_BYTES // len(base_doc.encode("utf-8")) + 1
    return "\n\n".join([base_doc] * reps)


@pytest.fixture(scope="module")
def repetitive_text(base_doc):
    para = base_doc.split("\n")[0].strip()
    return "\n\n".join([para] * 3000)


@pytest.fixture(scope="module")
def tok(base_doc):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    t = tokenizers.Tokenizer(models.WordLevel(unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    t.train_from_iterator([base_doc], trainers.WordLevelTrainer(vocab_size=50000, special_tokens=["[UNK]"]))
    return t


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    mb = REPORT_MB.get("mb", 0.0)
    print(f"\n\nchunking throughput on {mb:.1f} MB of real text (MB/s = UTF-8 megabytes per second, best round)")
    for kind, res in RESULTS.items():
        if not res:
            continue
        peers = {k: v for k, v in res.items() if not k.startswith("momoka")}
        best_peer = max(peers.items(), key=lambda kv: kv[1]) if peers else None
        unit, _, n = kind.partition("-")
        print(f"\n  {unit}-based ({n or TOKENS} {unit} per chunk)")
        for name, v in sorted(res.items(), key=lambda kv: -kv[1]):
            ratio = f"  x{v / best_peer[1]:.2f} vs {best_peer[0]}" if best_peer and name.startswith("momoka") else ""
            print(f"    {name:48s} {v:9.1f} MB/s{ratio}")
    if OFFSETS:
        print("\n  offsets on the repetitive input (one paragraph x 3000)")
        for name, verdict in OFFSETS.items():
            print(f"    {name:48s} {verdict}")


REPORT_MB: dict[str, float] = {}


def _run(benchmark, kind: str, name: str, text: str, fn, rounds: int = 3):
    mb = len(text.encode("utf-8")) / 1e6
    REPORT_MB["mb"] = mb
    benchmark.extra_info["MB"] = mb
    benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=0)
    RESULTS[kind][name] = mb / benchmark.stats.stats.min
    return fn()


# -- momoka ---------------------------------------------------------------------

MOMOKA_CHARS = {
    "momoka recursive (langchain separators), spans": lambda n: RecursiveChunker(
        n, separators=LC_SEPARATORS, unit="chars"
    ),
    "momoka recursive (default: + sentences), spans": lambda n: RecursiveChunker(n, unit="chars"),
    "momoka fixed, spans": lambda n: FixedChunker(n, unit="chars"),
}


@pytest.mark.parametrize("size", CHAR_SIZES)
@pytest.mark.parametrize("name", list(MOMOKA_CHARS))
def test_momoka_chars(benchmark, real_text, name, size):
    chunker = MOMOKA_CHARS[name](size)
    needs_sentences = "sentences" in name
    # Document(text) is free; sentences (native segmenter) are computed when needed, inside the timing
    _run(benchmark, f"chars-{size}", name, real_text, lambda: chunker.spans(_fresh(real_text, needs_sentences)))


def _fresh(text: str, sentences: bool) -> Document:
    d = Document(text)
    if sentences:
        d.sentences  # noqa: B018  (segmentation counted in the time)
    return d


def test_momoka_chars_chunk_objects(benchmark, real_text):
    chunker = RecursiveChunker(CHARS, separators=LC_SEPARATORS, unit="chars")
    # full output: Chunk objects with paragraph/sentence/section indices (segmentation included)
    _run(benchmark, f"chars-{CHARS}", "momoka recursive (langchain seps), Chunk objects", real_text, lambda: chunker(Document(real_text)))


MOMOKA_TOKENS = {
    "momoka recursive, tokenizers.Tokenizer, spans": lambda tok: RecursiveChunker(
        TOKENS, separators=LC_SEPARATORS, tokenizer=tok
    ),
    "momoka fixed, tokenizers.Tokenizer, spans": lambda tok: FixedChunker(TOKENS, tokenizer=tok),
    "momoka recursive, whitespace tokens, spans": lambda tok: RecursiveChunker(TOKENS, separators=LC_SEPARATORS),
    "momoka fixed, whitespace tokens, spans": lambda tok: FixedChunker(TOKENS),
}


@pytest.mark.parametrize("name", list(MOMOKA_TOKENS))
def test_momoka_tokens(benchmark, real_text, tok, name):
    chunker = MOMOKA_TOKENS[name](tok)
    _run(benchmark, "tokens", name, real_text, lambda: chunker.spans(Document(real_text)))


# -- peers ----------------------------------------------------------------------


@pytest.mark.parametrize("size", CHAR_SIZES)
def test_langchain_chars(benchmark, real_text, size):
    lts = pytest.importorskip("langchain_text_splitters")
    sp = lts.RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=0)
    name = "langchain RecursiveCharacterTextSplitter"
    _run(benchmark, f"chars-{size}", name, real_text, lambda: sp.split_text(real_text))


@pytest.mark.parametrize("size", CHAR_SIZES)
def test_chonkie_chars(benchmark, real_text, size):
    chonkie = pytest.importorskip("chonkie")
    ch = chonkie.RecursiveChunker(tokenizer="character", chunk_size=size)
    _run(benchmark, f"chars-{size}", "chonkie RecursiveChunker", real_text, lambda: ch(real_text))


@pytest.mark.parametrize("size", CHAR_SIZES)
def test_semchunk_chars(benchmark, real_text, size):
    semchunk = pytest.importorskip("semchunk")
    _run(
        benchmark,
        f"chars-{size}",
        "semchunk (len)",
        real_text,
        lambda: semchunk.chunk(real_text, size, len, offsets=True, memoize=False),
        rounds=1,
    )


def test_langchain_tokens(benchmark, real_text, tok):
    lts = pytest.importorskip("langchain_text_splitters")
    sp = lts.RecursiveCharacterTextSplitter(
        chunk_size=TOKENS, chunk_overlap=0, length_function=lambda s: len(tok.encode(s, add_special_tokens=False).ids)
    )
    _run(benchmark, "tokens", "langchain RecursiveCharacterTextSplitter", real_text, lambda: sp.split_text(real_text), rounds=1)


def test_chonkie_tokens(benchmark, real_text, tok):
    chonkie = pytest.importorskip("chonkie")
    ch = chonkie.RecursiveChunker(tokenizer=tok, chunk_size=TOKENS)
    _run(benchmark, "tokens", "chonkie RecursiveChunker", real_text, lambda: ch(real_text), rounds=1)


def test_chonkie_token_chunker(benchmark, real_text, tok):
    chonkie = pytest.importorskip("chonkie")
    tc = chonkie.TokenChunker(tokenizer=tok, chunk_size=TOKENS)
    _run(benchmark, "tokens", "chonkie TokenChunker", real_text, lambda: tc(real_text), rounds=1)


def test_semchunk_tokens(benchmark, real_text, tok):
    semchunk = pytest.importorskip("semchunk")
    _run(
        benchmark,
        "tokens",
        "semchunk (tokenizers.Tokenizer)",
        real_text,
        lambda: semchunk.chunkerify(tok, TOKENS)(real_text, offsets=True),
        rounds=1,
    )


# -- offsets on the repetitive input -------------------------------------------------


def _verdict(text: str, spans: list[tuple[int, int, str]]) -> str:
    """'ok' when every span matches its text and spans run forward over the whole input."""
    bad_text = sum(1 for s, e, t in spans if text[s:e] != t)
    backwards = sum(1 for (s0, e0, _), (s1, e1, _) in zip(spans, spans[1:]) if s1 < e0)
    covered_to = max((e for _, e, _ in spans), default=0)
    tail = text[covered_to:].strip()
    if bad_text or backwards or tail:
        parts = []
        if bad_text:
            parts.append(f"{bad_text} offsets do not match the chunk text")
        if backwards:
            parts.append(f"{backwards} chunks point back into earlier copies")
        if tail:
            parts.append(f"{len(tail)} characters at the end never covered")
        return "WRONG: " + "; ".join(parts) + f" ({len(spans)} chunks)"
    return f"ok ({len(spans)} chunks)"


def test_offsets_on_repetitive_input(benchmark, repetitive_text, tok):
    text = repetitive_text
    doc = Document(text)
    for name, ch in [
        ("momoka recursive chars", RecursiveChunker(CHARS, unit="chars")),
        ("momoka recursive tokens (tokenizers)", RecursiveChunker(TOKENS, tokenizer=tok)),
        ("momoka fixed tokens (tokenizers)", FixedChunker(TOKENS, tokenizer=tok)),
    ]:
        OFFSETS[name] = _verdict(text, [(c.start, c.end, c.text) for c in ch(doc)])
    try:
        import langchain_text_splitters as lts

        sp = lts.RecursiveCharacterTextSplitter(chunk_size=CHARS, chunk_overlap=0, add_start_index=True)
        docs = sp.create_documents([text])
        OFFSETS["langchain (add_start_index)"] = _verdict(
            text, [(d.metadata["start_index"], d.metadata["start_index"] + len(d.page_content), d.page_content) for d in docs]
        )
    except ImportError:
        pass
    try:
        import chonkie

        for name, ch in [
            ("chonkie RecursiveChunker chars", chonkie.RecursiveChunker(tokenizer="character", chunk_size=CHARS)),
            ("chonkie TokenChunker (tokenizers)", chonkie.TokenChunker(tokenizer=tok, chunk_size=TOKENS)),
        ]:
            OFFSETS[name] = _verdict(text, [(c.start_index, c.end_index, c.text) for c in ch(text)])
    except ImportError:
        pass
    try:
        import semchunk

        chunks, offs = semchunk.chunk(text, CHARS, len, offsets=True)
        OFFSETS["semchunk chars"] = _verdict(text, [(s, e, c) for c, (s, e) in zip(chunks, offs)])
    except ImportError:
        pass
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    assert OFFSETS["momoka recursive chars"].startswith("ok")
    assert OFFSETS["momoka recursive tokens (tokenizers)"].startswith("ok")
    assert OFFSETS["momoka fixed tokens (tokenizers)"].startswith("ok")
