"""Document ids of files (issue 29, friction 5): one id per file, one file per id, however a path is typed."""

from __future__ import annotations

import os
import warnings

import pytest
from momoka import Index
from momoka.methods.sources import SourceFile, expand_paths


def _ids(items):
    return [(x.doc_id if isinstance(x, SourceFile) else x) for x in items]


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """tmp_path/licenses/{GPL-3 (no extension, text),MIT.txt}, tmp_path/{a,b}/README.txt, cwd = tmp_path."""
    (tmp_path / "licenses").mkdir()
    (tmp_path / "licenses" / "GPL-3").write_text("The GNU General Public License is a free, copyleft license.\n")
    (tmp_path / "licenses" / "MIT.txt").write_text("Permission is hereby granted, free of charge.\n")
    for d, text in (("a", "Alpha readme about comets."), ("b", "Beta readme about glaciers.")):
        (tmp_path / d).mkdir()
        (tmp_path / d / "README.txt").write_text(text + "\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_absolute_and_relative_spellings_give_one_id(tree):
    # before: the absolute path gave 'GPL-3', the relative one 'licenses/GPL-3'
    assert _ids(expand_paths([tree / "licenses" / "GPL-3"])) == ["GPL-3"]
    assert _ids(expand_paths(["licenses/GPL-3"])) == ["GPL-3"]
    assert _ids(expand_paths(["./licenses/../licenses/GPL-3"])) == ["GPL-3"]
    assert _ids(expand_paths([str(tree / "licenses")])) == _ids(expand_paths(["licenses"])) == ["GPL-3", "MIT"]


def test_same_file_twice_is_indexed_once_with_a_warning(tree):
    with pytest.warns(UserWarning, match="same file"):
        items = expand_paths(["licenses/GPL-3", str(tree / "licenses" / "GPL-3")])
    assert [(str(x.path), x.doc_id) for x in items] == [("licenses/GPL-3", "GPL-3")]
    with pytest.warns(UserWarning, match="same file"):  # a file inside a folder that is given too
        items = expand_paths(["licenses", "licenses/MIT.txt"])
    assert _ids(items) == ["GPL-3", "MIT"]
    os.link(tree / "licenses" / "MIT.txt", tree / "MIT-hardlink.txt")  # two names, one file
    with pytest.warns(UserWarning, match="same file"):
        assert len(expand_paths(["licenses/MIT.txt", "MIT-hardlink.txt"])) == 1


def test_two_files_of_one_name_in_different_folders_get_distinct_ids(tree):
    # before: both were 'README' and the second was refused as "given twice"
    items = expand_paths([tree / "a" / "README.txt", tree / "b" / "README.txt"])
    assert _ids(items) == ["a/README", "b/README"]
    assert _ids(expand_paths(["a", "b"])) == ["a/README", "b/README"]  # two folders: relative to their parent
    assert _ids(expand_paths(["a/README.txt", "licenses"])) == ["a/README", "licenses/GPL-3", "licenses/MIT"]


def test_ids_differing_only_by_extension_keep_it(tree):
    (tree / "notes.md").write_text("# Notes\n\nIn Markdown.\n")
    (tree / "notes.txt").write_text("In plain text.\n")
    assert _ids(expand_paths(["notes.md", "notes.txt", "a/README.txt"])) == ["notes.md", "notes.txt", "a/README"]


def test_folder_ids_are_as_before_and_other_items_pass(tree):
    (tree / "licenses" / "sub").mkdir()
    (tree / "licenses" / "sub" / "x.md").write_text("x\n")
    doc = {"doc_id": "d", "text": "t"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _ids(expand_paths([doc, "licenses"])) == [doc, "GPL-3", "MIT", "sub/x"]


def test_index_stores_one_file_once_under_any_spelling(tree):
    with pytest.warns(UserWarning, match="same file"):
        ix = Index.build(["licenses/GPL-3", tree / "licenses" / "GPL-3", tree / "a" / "README.txt",
                          tree / "b" / "README.txt"], store=tree / "s", embedder=None, chunker="paragraph",
                         progress=False)
    assert sorted(ix.corpus.doc_ids) == ["a/README", "b/README", "licenses/GPL-3"]
    hits = ix.search("copyleft license", k=5, retriever="bm25")
    assert [h.doc_id for h in hits].count("licenses/GPL-3") == 1  # before: every hit came back twice
    ix.close()


def test_folder_reads_text_files_without_an_extension_and_skips_binary_ones(tree):
    """``LICENSE``-like files (no extension, or a version number after the last dot) are read from a folder
    when their first bytes are text; a binary one, an empty one and a real other type are skipped, each
    with its reason."""
    from momoka.methods.sources import DOC_EXTENSIONS
    from momoka.text.io import FORMATS

    lic = tree / "licenses"
    (lic / "MPL-2.0").write_text("Mozilla Public License Version 2.0. A cure period of 30 days.\n")
    (lic / "tool").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)  # an executable
    (lic / "EMPTY").write_text("  \n")
    (lic / "graph.dot").write_text("digraph { a -> b }\n")
    skipped: list = []
    items = expand_paths(["licenses"], skipped)
    assert _ids(items) == ["GPL-3", "MIT", "MPL-2.0"]  # the version number stays in the id
    reasons = {p.name: why for p, why in skipped}
    assert set(reasons) == {"tool", "EMPTY", "graph.dot"}
    assert reasons["tool"].startswith("no extension and not text") and reasons["EMPTY"].startswith("no extension")
    assert reasons["graph.dot"].startswith("unsupported file type .dot")
    assert _ids(expand_paths(["licenses/MPL-2.0"])) == ["MPL-2.0"]  # given alone, too
    # a folder reads every extension the parsers know
    assert set(DOC_EXTENSIONS) == set(FORMATS)
    ix = Index.build(["licenses"], store=tree / "s2", embedder=None, progress=False)
    assert ix.search("cure period", k=1, retriever="bm25")[0].doc_id == "MPL-2.0"
