"""Chunking speed: momoka's chunkers beside chonkie, semchunk and langchain-text-splitters.

Input: every document of every shared set (../shared/data/*/documents.jsonl: 223 documents,
6.35 MB of varied real text, nothing repeated), each chunked as its own document, as an indexer
does. Each configuration runs ROUNDS times, momoka and its peers interleaved; rates are UTF-8 MB
per second of the median round, by wall clock and (in brackets) per CPU-second.

Outputs compared like for like. Peers build chunk objects (chonkie ``Chunk`` with text, start/end
index and token count; langchain and semchunk strings, semchunk with offsets); momoka is timed
both ways: ``chunker(doc)`` returns ``Chunk`` objects (text, offsets, and the paragraph, sentence
and section of each chunk, the document's sentence segmentation included in the time), and
``chunker.spans(doc)`` returns the offsets only (an ``(K, 2)`` array), labelled "offsets only".

Character chunks (1000 and 4000 characters; langchain's separators for momoka):
  * chonkie ``RecursiveChunker(tokenizer="character")`` (its recursive chunker, fastest tokenizer);
  * chonkie ``FastChunker(chunk_size=N)``: chonkie's fastest chunker, a different algorithm (byte
    windows cut at the last of ``"\\n.?"``, SIMD in Rust); listed for what it is, not as a peer of
    recursive chunking;
  * langchain ``RecursiveCharacterTextSplitter(chunk_size=N, chunk_overlap=0).split_text``;
  * semchunk ``chunkerify(len, N)`` with ``offsets=True`` (len is its fastest counter).

Token chunks (256 tokens) with two real tokenizers: the default embedder's WordPiece
(minilm-l6-v2-int8's tokenizer.json) and SmolLM2's byte-level BPE (smollm2-135m-instruct's),
both without padding/truncation (the embedder's file pads to 128, which would break the peers):
  * chonkie ``TokenChunker(tokenizer=tok, chunk_size=256)``, the better of per-document calls and
    ``chunk_batch(docs, batch_size=len(docs), show_progress_bar=False)`` (encode_batch, threaded);
  * chonkie ``RecursiveChunker(tokenizer=tok, chunk_size=256)`` (one round);
  * semchunk ``chunkerify(tok, 256)(docs, offsets=True)``, memoized counter (its default; one round);
  * the tokenizer alone: ``tok.encode_batch(docs)``, the time a chunker that encodes every
    document cannot go below.
momoka ``FixedChunker(256, tokenizer=tok)`` and ``RecursiveChunker(256, tokenizer=tok)``: "cold"
rounds start with no cached word counts (a first pass over the corpus), "warm" rounds keep the
counts of the previous round (re-chunking the same corpus). Every chunk of every configuration is
re-encoded afterwards: the largest count is printed (momoka's contract: at most 256), and whether
each chunk's text is the document's text at its offsets (chonkie's TokenChunker decodes tokens,
so with WordPiece its chunk text is lower-cased word pieces, not the document's text).

Run:  PYTHONPATH=python python -m pytest bench/micro/bench_chunking.py --benchmark-only -s
"""

from __future__ import annotations

import json
import statistics
import time

import pytest

from momoka.chunking import FixedChunker, RecursiveChunker
from momoka.text import Document

CHAR_SIZES = (1000, 4000)
TOKENS = 256
ROUNDS = int(__import__("os").environ.get("BENCH_ROUNDS", "3"))
LC_SEPARATORS = ("\n\n", "\n", " ")  # langchain's defaults, minus the empty string
TOKENIZERS = {"WordPiece (minilm-l6-v2-int8)": "minilm-l6-v2-int8", "byte-level BPE (smollm2-135m)": "smollm2-135m-instruct"}


# -- inputs ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def docs(shared_data) -> list[str]:
    out = []
    for d in sorted(p for p in shared_data.iterdir() if (p / "documents.jsonl").exists()):
        with open(d / "documents.jsonl", encoding="utf-8") as f:
            out += [json.loads(line)["text"] for line in f]
    return out


def _tokenizer(model: str):
    tokenizers = pytest.importorskip("tokenizers")
    from momoka.models.catalog import models_dir

    p = models_dir() / model / "tokenizer.json"
    if not p.exists():
        pytest.skip(f"{model} is not installed (momoka models install)")
    tok = tokenizers.Tokenizer.from_file(str(p))
    tok.no_padding()
    tok.no_truncation()
    return tok


# -- timing -------------------------------------------------------------------------------------


def _mb(docs: list[str]) -> float:
    return sum(len(d.encode("utf-8")) for d in docs) / 1e6


def _interleaved(configs: dict, rounds: int, before: dict | None = None) -> dict:
    """{name: (median wall s, median CPU s)} running every config once per round, in turn."""
    wall: dict = {k: [] for k in configs}
    cpu: dict = {k: [] for k in configs}
    for name, fn in configs.items():  # one untimed run of momoka's (first-call set-up, imports)
        if name.startswith("momoka"):
            fn()
    for _ in range(rounds):
        for name, fn in configs.items():
            if name in FAILED:
                continue
            if before and name in before:
                before[name]()
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - a peer that fails on real text is reported, not timed
                FAILED[name] = f"{type(exc).__name__}: {str(exc)[:100]}"
                continue
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    return {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in configs if wall[k]}


FAILED: dict[str, str] = {}  # configuration -> the error it raised on the input


def _print(title: str, mb: float, res: dict, ours_prefix: str = "momoka", ref: str | None = None) -> None:
    print(f"\n  {title}  ({mb:.2f} MB; MB/s wall (per CPU-s))")
    peers = {k: v for k, v in res.items() if not k.startswith(ours_prefix) and not k.startswith("(")}
    best = ref or (min(peers, key=lambda k: peers[k][0]) if peers else None)
    for name, (w, c) in sorted(res.items(), key=lambda kv: kv[1][0]):
        ratio = ""
        if best and name.startswith(ours_prefix):
            bw, bc = res[best]
            ratio = f"   {bw / w:5.2f}x wall, {bc / c:5.2f}x CPU vs {best}"
        print(f"    {name:58s} {mb / w:8.2f} ({mb / c:8.2f}){ratio}")
    for name, err in FAILED.items():
        print(f"    {name:58s} failed: {err}")
    FAILED.clear()


# -- character chunks ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", CHAR_SIZES)
def test_character_chunking(benchmark, docs, size):
    chonkie = pytest.importorskip("chonkie")
    lts = pytest.importorskip("langchain_text_splitters")
    semchunk = pytest.importorskip("semchunk")
    lc_sep = RecursiveChunker(size, separators=LC_SEPARATORS, unit="chars")
    default = RecursiveChunker(size, unit="chars")
    ch_rec = chonkie.RecursiveChunker(tokenizer="character", chunk_size=size)
    ch_fast = chonkie.FastChunker(chunk_size=size)
    lc = lts.RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=0)
    sc = semchunk.chunkerify(len, size)
    configs = {
        "momoka recursive (langchain separators), Chunk objects": lambda: [lc_sep(Document(d)) for d in docs],
        "momoka recursive (langchain separators), offsets only": lambda: [lc_sep.spans(Document(d)) for d in docs],
        "momoka recursive (default: + sentences), Chunk objects": lambda: [default(Document(d)) for d in docs],
        "chonkie RecursiveChunker(tokenizer='character')": lambda: [ch_rec(d) for d in docs],
        "langchain RecursiveCharacterTextSplitter.split_text": lambda: [lc.split_text(d) for d in docs],
        "semchunk chunkerify(len), offsets=True": lambda: sc(docs, offsets=True),
        "(chonkie FastChunker: byte windows, another algorithm)": lambda: [ch_fast(d) for d in docs],
    }
    res = _interleaved(configs, ROUNDS)
    _print(f"character chunks of {size}", _mb(docs), res, ref="chonkie RecursiveChunker(tokenizer='character')")
    benchmark.pedantic(configs["momoka recursive (langchain separators), Chunk objects"], rounds=1, iterations=1)


# -- token chunks -----------------------------------------------------------------------------------


def _max_tokens(tok, texts: list[str]) -> int:
    return max((len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)), default=0)


@pytest.mark.parametrize("label", list(TOKENIZERS))
def test_token_chunking(benchmark, docs, label):
    chonkie = pytest.importorskip("chonkie")
    semchunk = pytest.importorskip("semchunk")
    tok = _tokenizer(TOKENIZERS[label])
    fixed = FixedChunker(TOKENS, tokenizer=tok)
    rec = RecursiveChunker(TOKENS, tokenizer=tok)
    tc = chonkie.TokenChunker(tokenizer=tok, chunk_size=TOKENS)
    def cold() -> None:  # forget every cached word count (the two chunkers share the tokenizer's)
        fixed._source._cache.clear()
        rec._source._cache.clear()

    configs = {
        "momoka FixedChunker, Chunk objects, cold": lambda: [fixed(Document(d)) for d in docs],
        "momoka FixedChunker, offsets only, cold": lambda: [fixed.spans(Document(d)) for d in docs],
        "momoka RecursiveChunker, Chunk objects, cold": lambda: [rec(Document(d)) for d in docs],
        "momoka FixedChunker, Chunk objects, warm": lambda: [fixed(Document(d)) for d in docs],
        "momoka RecursiveChunker, Chunk objects, warm": lambda: [rec(Document(d)) for d in docs],
        "chonkie TokenChunker, per document": lambda: [tc(d) for d in docs],
        "chonkie TokenChunker.chunk_batch": lambda: tc.chunk_batch(docs, batch_size=len(docs),
                                                                   show_progress_bar=False),
        "(tokenizer alone: encode_batch(docs))": lambda: tok.encode_batch(docs, add_special_tokens=False),
    }
    before = {k: cold for k in configs if k.endswith("cold")}
    res = _interleaved(configs, ROUNDS, before)
    ch_rec = chonkie.RecursiveChunker(tokenizer=tok, chunk_size=TOKENS)
    sc = semchunk.chunkerify(tok, TOKENS)
    res.update(_interleaved({
        "chonkie RecursiveChunker (one round)": lambda: [ch_rec(d) for d in docs],
        "semchunk chunkerify(tok), offsets=True (one round)": lambda: sc(docs, offsets=True),
    }, 1))
    chonkie_best = min(("chonkie TokenChunker, per document", "chonkie TokenChunker.chunk_batch"),
                       key=lambda k: res[k][0])
    _print(f"token chunks of {TOKENS}, {label}", _mb(docs), res, ref=chonkie_best)

    # equal output: chunk objects whose text is the document's text at their offsets, within the limit
    ours = [fixed(Document(d)) for d in docs]
    theirs = tc.chunk_batch(docs, batch_size=len(docs), show_progress_bar=False)
    exact_ours = sum(c.text == d[c.start : c.end] for d, cs in zip(docs, ours) for c in cs)
    exact_theirs = sum(c.text == d[c.start_index : c.end_index] for d, cs in zip(docs, theirs) for c in cs)
    n_ours, n_theirs = sum(map(len, ours)), sum(map(len, theirs))
    print(f"    chunks: momoka fixed {n_ours:,} ({exact_ours / n_ours:.1%} text == document[start:end], "
          f"most tokens re-encoded {_max_tokens(tok, [c.text for cs in ours for c in cs])}); "
          f"chonkie TokenChunker {n_theirs:,} ({exact_theirs / n_theirs:.1%}, "
          f"most {_max_tokens(tok, [c.text for cs in theirs for c in cs])})")
    benchmark.pedantic(configs["momoka FixedChunker, Chunk objects, warm"], rounds=1, iterations=1)


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


def test_offsets_on_repetitive_input(benchmark, docs):
    # one paragraph of a SQuAD article repeated 3000 times: offsets found by searching text go wrong
    tok = _tokenizer(TOKENIZERS["byte-level BPE (smollm2-135m)"])
    squad = max((d for d in docs if "European Union law" in d[:200]), key=len, default=docs[0])
    text = "\n\n".join([squad.split("\n")[0].strip()] * 3000)
    OFFSETS: dict[str, str] = {}
    doc = Document(text)
    for name, ch in [
        ("momoka recursive chars", RecursiveChunker(1000, unit="chars")),
        ("momoka recursive tokens (tokenizers)", RecursiveChunker(TOKENS, tokenizer=tok)),
        ("momoka fixed tokens (tokenizers)", FixedChunker(TOKENS, tokenizer=tok)),
    ]:
        OFFSETS[name] = _verdict(text, [(c.start, c.end, c.text) for c in ch(doc)])
    try:
        import langchain_text_splitters as lts

        sp = lts.RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=0, add_start_index=True)
        docs = sp.create_documents([text])
        OFFSETS["langchain (add_start_index)"] = _verdict(
            text, [(d.metadata["start_index"], d.metadata["start_index"] + len(d.page_content), d.page_content) for d in docs]
        )
    except ImportError:
        pass
    try:
        import chonkie

        for name, ch in [
            ("chonkie RecursiveChunker chars", chonkie.RecursiveChunker(tokenizer="character", chunk_size=1000)),
            ("chonkie TokenChunker (tokenizers)", chonkie.TokenChunker(tokenizer=tok, chunk_size=TOKENS)),
        ]:
            OFFSETS[name] = _verdict(text, [(c.start_index, c.end_index, c.text) for c in ch(text)])
    except ImportError:
        pass
    try:
        import semchunk

        chunks, offs = semchunk.chunk(text, 1000, len, offsets=True)
        OFFSETS["semchunk chars"] = _verdict(text, [(s, e, c) for c, (s, e) in zip(chunks, offs)])
    except ImportError:
        pass
    print("\n  offsets on the repetitive input (one paragraph x 3000)")
    for name, verdict in OFFSETS.items():
        print(f"    {name:48s} {verdict}")
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    assert OFFSETS["momoka recursive chars"].startswith("ok")
    assert OFFSETS["momoka recursive tokens (tokenizers)"].startswith("ok")
    assert OFFSETS["momoka fixed tokens (tokenizers)"].startswith("ok")
