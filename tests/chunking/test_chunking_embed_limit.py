"""``max_embed_tokens``: no chunk is longer than the embedder reads, counted by the embedder's own tokenizer.

The independent counter is the default embedder's ``tokenizer.json`` encoding each chunk again with its
special tokens and without truncation; the reference chunks are those of the same chunker without the
option (a chunk within the limit must come out unchanged, one over it split into pieces that tile it).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from momoka.chunking import FixedChunker, RecursiveChunker, StructureChunker
from momoka.cli import main
from momoka.chunking.headers import HEADER_TOKENS
from momoka.errors import ConfigError
from momoka.eval.datasets import load_dataset
from momoka.text import Document

REPO = Path(__file__).resolve().parents[2]

PROSE = ("Retrieval over long documents needs chunks that the embedder reads whole. "
         "Each chunk is embedded once and searched by its vector and by its words. ") * 3
#: A code line of few whitespace words but many WordPiece tokens (identifiers, numbers, punctuation).
CODE_LINE = "    x_{k} = np.frombuffer(buf[0x{k:02x}:0x{k2:02x}], dtype=np.uint32).reshape(-1, 4)[:, 1:3].sum(axis=0)"
#: A table row: ten numeric cells, each several WordPiece tokens.
TABLE_ROW = "| {k} | 12.5% | 3,456.78 | -0.0042 | 1e-9 | 7/8 | 2019-03-04 | $1,234 | 0.5x | (n=17) |"

MARKDOWN = (
    "# Embedding limits\n\n" + PROSE + "\n\n## Code\n\n```python\n"
    + "\n".join(CODE_LINE.format(k=k, k2=k + 1) for k in range(40))
    + "\n```\n\n## Table\n\n| id | a | b | c | d | e | f | g | h | i |\n|---|---|---|---|---|---|---|---|---|---|\n"
    + "\n".join(TABLE_ROW.format(k=k) for k in range(40))
    + "\n\n## After\n\n" + PROSE + "\n"
)


@pytest.fixture(scope="module")
def embedder():
    from momoka.models import Embedder

    return Embedder.default()


@pytest.fixture(scope="module")
def count(embedder):
    """Tokens of a text as the embedder would encode it, special tokens included, never truncated."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(embedder.tokenizer.to_str())
    tok.no_truncation()
    tok.no_padding()
    return lambda texts: np.array([len(e.ids) for e in tok.encode_batch(list(texts), add_special_tokens=True)])


def _nonws(text: str, spans) -> set:
    return {i for a, b in spans for i in range(a, b) if not text[i].isspace()}


def check_limit(doc, old_chunker, new_chunker, count, limit: int) -> tuple[list, list]:
    """The old and new spans; asserts the limit, the tiling and that chunks within the limit are unchanged."""
    text = doc.text
    old = [tuple(x) for x in old_chunker.spans(doc).tolist()]
    new = [tuple(x) for x in new_chunker.spans(doc).tolist()]
    n_old = count(text[a:b] for a, b in old)
    n_new = count(text[a:b] for a, b in new)
    assert n_new.max() <= limit, f"{int((n_new > limit).sum())} chunks over {limit}"
    # the same characters, each once, in order (no overlap was asked for)
    assert all(b <= c for (_, b), (c, _) in zip(new, new[1:]))
    assert _nonws(text, new) == _nonws(text, old) == {i for i, ch in enumerate(text) if not ch.isspace()}
    within = {s for s, n in zip(old, n_old) if n <= limit}
    assert within <= set(new)  # chunks within the limit are unchanged
    over = [s for s, n in zip(old, n_old) if n > limit]
    for a, b in set(new) - within:  # every other chunk is a piece of an over-long one
        assert any(x <= a and b <= y for x, y in over)
    return old, new


def test_markdown_code_and_table_are_split_at_lines(embedder, count):
    doc = Document.from_markdown(MARKDOWN)
    limit = embedder.max_length
    old_c = RecursiveChunker(size=100, hard_wrap="auto")
    new_c = RecursiveChunker(size=100, hard_wrap="auto", max_embed_tokens=limit, embed_tokenizer=embedder.tokenizer)
    old, new = check_limit(doc, old_c, new_c, count, limit)
    text = doc.text
    n_old = count(text[a:b] for a, b in old)
    assert (n_old > limit).sum() >= 2  # the code block was over the limit before
    # over-long chunks were split on the separator hierarchy: at line ends, never inside a code line
    for a, b in set(new) - set(old):
        assert b == len(text) or text[b] == "\n", text[a:b][-40:]
    assert new_c.params()["max_embed_tokens"] == limit and "max_embed_tokens" not in old_c.params()


def test_other_chunkers_keep_the_limit(embedder, count):
    doc = Document.from_markdown(MARKDOWN)
    tok, limit = embedder.tokenizer, 64  # a small limit: prose chunks are split too
    for old_c, new_c in ((StructureChunker(max_size=100), StructureChunker(max_size=100, max_embed_tokens=limit,
                                                                           embed_tokenizer=tok)),
                         (FixedChunker(size=100), FixedChunker(size=100, max_embed_tokens=limit, embed_tokenizer=tok))):
        check_limit(doc, old_c, new_c, count, limit)


def test_a_word_longer_than_the_limit_is_cut(embedder, count):
    text = "start " + "".join(f"{k:x}" for k in range(300)) + " end of the text."
    doc = Document.from_text(text)
    new_c = RecursiveChunker(size=100, max_embed_tokens=32, embed_tokenizer=embedder.tokenizer)
    check_limit(doc, RecursiveChunker(size=100), new_c, count, 32)


def test_shared_document(embedder, count, shared_data):
    if not (shared_data / "leval_nq" / "documents.jsonl").is_file():
        pytest.skip("the shared data set leval_nq is not here")
    ds = load_dataset(shared_data / "leval_nq")
    limit = embedder.max_length
    old_c = RecursiveChunker(size=100, hard_wrap="auto")
    new_c = RecursiveChunker(size=100, hard_wrap="auto", max_embed_tokens=limit, embed_tokenizer=embedder.tokenizer)
    changed = 0
    for rec in ds.documents[:3]:
        old, new = check_limit(rec.to_document(), old_c, new_c, count, limit)
        changed += len(set(new) - set(old))
    assert changed > 0  # NQ's documents (HTML tables flattened to text) had chunks over the limit


def test_bad_options(embedder):
    with pytest.raises(ConfigError, match="embed_tokenizer"):
        RecursiveChunker(max_embed_tokens=256)
    with pytest.raises(ConfigError, match="tokenizers.Tokenizer"):
        RecursiveChunker(max_embed_tokens=256, embed_tokenizer=str.split)
    with pytest.raises(ConfigError, match="only used with max_embed_tokens"):
        RecursiveChunker(embed_tokenizer=embedder.tokenizer)
    with pytest.raises(ConfigError, match="special tokens"):  # [CLS] and [SEP] leave no room
        RecursiveChunker(max_embed_tokens=2, embed_tokenizer=embedder.tokenizer)


def test_build_records_the_limit_and_old_stores_keep_theirs(embedder, tmp_path):
    import momoka

    md = tmp_path / "limits.md"
    md.write_text(MARKDOWN, encoding="utf-8")
    room = embedder.max_length - HEADER_TOKENS  # the chunk's share: its header is embedded with it
    with momoka.Index.build([md], store=tmp_path / "new", embedder=embedder, progress=False) as ix:
        assert ix.store.manifest["chunker"]["params"]["max_embed_tokens"] == room
        assert ix.corpus.embedding.last_truncated == 0
    with momoka.Index.open(tmp_path / "new", embedder=embedder) as ix:  # re-read from the manifest
        assert ix.writer.chunker.max_embed_tokens == room
    with momoka.Index.build([md], embedder=embedder, progress=False, headers=False) as ix:  # chunks alone: all of it
        assert ix.writer.chunker.max_embed_tokens == embedder.max_length
    # a store built before the option: new documents are chunked as before (no limit recorded, none used)
    old = tmp_path / "old"
    shutil.copytree(REPO / "tests" / "store" / "data" / "store-v3-notails", old)
    with momoka.Index.open(old) as ix:
        assert ix.writer.chunker.max_embed_tokens is None and "max_embed_tokens" not in ix.writer.chunker.params()


def test_cli_index_no_longer_warns(tmp_path, capsys):
    md = tmp_path / "limits.md"
    md.write_text(MARKDOWN, encoding="utf-8")
    assert main(["index", str(md), "--store", str(tmp_path / "s")]) == 0
    err = capsys.readouterr().err
    assert "truncated" not in err
    # without the limit (the chunks of the code before it), the same file is embedded truncated
    assert main(["index", str(md), "--store", str(tmp_path / "s2"), "-o", "recursive.max_embed_tokens=100000"]) == 0
    assert "embedded truncated" in capsys.readouterr().err


def test_cli_chunk_previews_the_limited_chunks(tmp_path, capsys, count):
    md = tmp_path / "limits.md"
    md.write_text(MARKDOWN, encoding="utf-8")
    assert main(["chunk", str(md), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert count(r["text"] for r in rows).max() <= 256
    assert main(["chunk", str(md), "--json", "--no-dense"]) == 0
    plain = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert count(r["text"] for r in plain).max() > 256 and len(plain) < len(rows)


def test_cli_eval_chunking_measures_the_limited_chunks(tmp_path, capsys, embedder):
    # eval-chunking measures the chunks `momoka index` stores: split to the embedder's input by default
    text = Document.from_file(_write(tmp_path / "limits.md", MARKDOWN)).text
    root = tmp_path / "set"
    root.mkdir()
    (root / "documents.jsonl").write_text(json.dumps({"doc_id": "d", "title": "limits", "text": text}) + "\n",
                                          encoding="utf-8")
    (root / "questions.jsonl").write_text(json.dumps({"qid": "q", "doc_id": "d", "question": "what?", "answers": [],
                                                      "evidence": [[0, 5]]}) + "\n", encoding="utf-8")
    (root / "dataset.json").write_text('{"evidence_mode": "all"}', encoding="utf-8")
    assert main(["eval-chunking", "--data", str(root), "--json"]) == 0
    limited = json.loads(capsys.readouterr().out)
    assert main(["eval-chunking", "--data", str(root), "--json", "--no-dense"]) == 0
    plain = json.loads(capsys.readouterr().out)
    room = embedder.max_length - HEADER_TOKENS
    assert limited["params"]["max_embed_tokens"] == room and "max_embed_tokens" not in plain["params"]
    doc = Document(text)
    assert plain["chunks"] == len(RecursiveChunker(size=100, hard_wrap="auto")(doc))
    assert limited["chunks"] == len(RecursiveChunker(size=100, hard_wrap="auto", max_embed_tokens=room,
                                                     embed_tokenizer=embedder.tokenizer)(doc)) > plain["chunks"]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
