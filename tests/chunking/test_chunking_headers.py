"""Contextual headers (momoka.chunking.headers): hand-computed headers, and an index that embeds and
BM25-indexes each chunk with its header while returning the chunk's own text."""

from __future__ import annotations

import numpy as np

from momoka.chunking import RecursiveChunker
from momoka.chunking.headers import HEADED_TEXT, HEADER_CHARS, context_headers, headed, with_header
from momoka.text import Document

PLAIN = ("Battle of Calabria\nThe Battle of Calabria was a naval battle of the Second World War. "
         "It was fought near Punta Stilo. Both sides claimed victory and returned to their bases.\n\n"
         "Williams sisters\nVenus and Serena Williams are professional tennis players who have won many titles.")


def _chunks(doc, size=20):
    return RecursiveChunker(size=size, unit="tokens", glue_titles=True)(doc)


def test_plain_text_title_lines_and_the_document_title():
    doc = Document.from_text(PLAIN, title="Naval  battles")
    chunks = _chunks(doc)
    heads = context_headers(doc, chunks)
    assert len(chunks) >= 3
    for c, h in zip(chunks, heads):
        # the title line over the chunk: the last one starting at or before it (read here from the text)
        line = "Williams sisters" if c.start >= PLAIN.index("Williams sisters") else "Battle of Calabria"
        want = ["Naval battles"]  # whitespace of the title folded
        if not c.text.startswith(line):
            want.append(line)
        assert h == "\n".join(want), (c.text, h)
    # no title: only the title lines; the first chunk of each section starts with its own
    bare = Document.from_text(PLAIN)
    heads = context_headers(bare, _chunks(bare))
    assert heads[0] == "" and "Battle of Calabria" in heads[1]


def test_sections_give_the_heading_path():
    md = "# Guide\n\n## Install\n\n### Linux\n\n" + " ".join(f"Step {i} runs a command." for i in range(30))
    doc = Document.from_markdown(md)
    chunks = RecursiveChunker(size=30)(doc)
    heads = context_headers(doc, chunks)
    assert doc.title == "Guide"
    assert heads[0] == ""  # the first chunk starts with the headings themselves
    assert all(h == "Guide\nInstall\nLinux" for h in heads[1:]), heads  # the title is the path's first part once


def test_long_headers_are_cut_and_the_indexed_text():
    doc = Document.from_text("Some text of the document that is long enough to be a chunk.", title="T" * 500)
    (h,) = context_headers(doc, _chunks(doc, 100))
    assert h == "T" * HEADER_CHARS
    assert with_header("A title", "text") == "A title\ntext" and with_header("", "text") == "text"
    assert headed({"text": HEADED_TEXT}) and not headed({"text": "chunk"}) and not headed(None)


def _docs():
    return [{"doc_id": "pf", "title": "Phineas and Ferb",
             "text": "Cast\nVincent Martella voices the elder stepbrother, and Thomas Brodie-Sangster voices the "
                     "younger one, in every season of the animated series."},
            {"doc_id": "ow", "title": "Ocean weather",
             "text": "Storms over the ocean form when warm water evaporates and the air above it rises quickly."}]


def test_the_index_searches_headers_and_returns_chunk_text(tmp_path):
    import momoka

    with momoka.Index.build(_docs(), store=tmp_path / "h", progress=False) as ix:
        st = ix.store
        assert st.bm25_view("raw").source["text"] == HEADED_TEXT == st.vector_view("raw").source["text"]
        # "phineas" is only in the header: BM25 finds the chunk, whose text comes back without it
        res = ix.search("phineas", retriever="bm25", k=1)
        assert res.items[0].members[0].doc_id == "pf" and "Phineas" not in res.items[0].text
        cid = res.items[0].members[0].chunk_id
        assert st.chunks.get(cid).metadata["header"] == "Phineas and Ferb"
        # the stored vector is the embedding of header + newline + text (computed here by the embedder itself)
        want = np.asarray(ix.corpus.embedder.embed(["Phineas and Ferb\n" + st.chunks.get(cid).text]))[0]
        got = st.vector_view("raw").get(np.array([cid]))[0]
        assert float(np.dot(want, got) / np.linalg.norm(want) / np.linalg.norm(got)) > 0.999
        # a new version of the document keeps that chunk: its vector (of the same header and text) is reused
        new = dict(_docs()[0], text=_docs()[0]["text"] + "\n\n" + " ".join(f"Episode {i} aired." for i in range(60)))
        ix.add([new], existing="replace")
        assert ix.report.reused >= 1 and ix.report.embedded >= 1
    with momoka.Index.build(_docs(), store=tmp_path / "plain", progress=False, headers=False) as ix:
        assert ix.store.bm25_view("raw").source["text"] == "chunk"
        assert not ix.search("phineas", retriever="bm25", k=1).items  # the chunk alone does not name it
        assert all("header" not in ix.store.chunks.get(c).metadata for c in range(ix.store.n_chunks))



def test_cli_index_records_headers_and_no_headers(tmp_path, capsys):
    from momoka.cli import main
    from momoka.store import Store

    f = tmp_path / "guide.md"
    f.write_text("# Guide\n\n## Install\n\nRun the installer and follow the steps it shows.\n", encoding="utf-8")
    assert main(["index", str(f), "--store", str(tmp_path / "a")]) == 0
    assert main(["index", str(f), "--store", str(tmp_path / "b"), "--no-headers"]) == 0
    # on an existing store the option is a note: the store keeps how it was built
    assert main(["index", str(f), "--store", str(tmp_path / "a"), "--no-headers"]) == 0
    assert "--no-headers applies to new stores" in capsys.readouterr().err
    for name, want in (("a", HEADED_TEXT), ("b", "chunk")):
        st = Store.open(tmp_path / name)
        assert st.bm25_view("raw").source["text"] == want == st.vector_view("raw").source["text"]
        st.close()
