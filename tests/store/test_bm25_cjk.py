"""BM25 tokeniser rule 2: runs of CJK characters as their characters and overlapping character bigrams
(Lucene's CJKBigramFilter with unigrams kept).

References: tokens written out by hand, the plain-Python tokeniser of ``tests/_oracles/bm25_tokens.py``
(CJK runs told by Unicode names, everything else by the rule-1 tokeniser), rank_bm25 over the reference's
tokens, and a store written by the code before rules had versions (``data/store-v3-cjk-unigram``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from momoka import Index, _core
from momoka.chunking.headers import indexed_text
from momoka.errors import ConfigError, StoreError
from momoka.store import BM25
from momoka.store.bm25 import ENGLISH_STOPWORDS, tokenize
from momoka.text import Document

from _oracles import bm25_tokens as ref

DATA = Path(__file__).parent / "data"

MIXED = [
    "iPhone手机 中文分词。好 東京タワーへ行く ไทย Hello World",
    "北京大学的研究者在2023年发布了GPT-4的评测：效果很好！",
    "ｈｅｌｌｏ世界，Ünïcode 와 한국어 すし〇々",
    "单",
    "",
]


def test_hand_computed_tokens():
    text = MIXED[0]
    assert tokenize(text, tokenizer_version=2) == [
        "iphone", "手", "手机", "机", "中", "中文", "文", "文分", "分", "分词", "词", "好", "東", "東京", "京", "京タ",
        "タ", "タワ", "ワ", "ワー", "ー", "ーへ", "へ", "へ行", "行", "行く", "く", "ไ", "ท", "ย", "hello", "world"]
    assert tokenize(text, tokenizer_version=1) == [
        "iphone", "手", "机", "中", "文", "分", "词", "好", "東", "京", "タ", "ワ", "ー", "へ", "行", "く",
        "ไ", "ท", "ย", "hello", "world"]
    # a digit or Latin word inside a CJK run ends it: no bigram across it
    assert tokenize("在2023年发布GPT模型", tokenizer_version=2) == [
        "在", "2023", "年", "年发", "发", "发布", "布", "gpt", "模", "模型", "型"]
    # fullwidth letters fold to ASCII as before; Korean (written with spaces) stays whole words
    assert tokenize("ｈｅｌｌｏ世界 한국어", tokenizer_version=2) == ["hello", "世", "世界", "界", "한국어"]
    assert tokenize("单", tokenizer_version=2) == ["单"] and tokenize("", tokenizer_version=2) == []


def test_default_rule_is_bigrams():
    assert BM25().params["tokenizer_version"] == 2
    assert tokenize("中文分词") == ["中", "中文", "文", "文分", "分", "分词", "词"]
    assert BM25(tokenizer_version=1).tokenize("中文分词") == ["中", "文", "分", "词"]


@pytest.mark.parametrize("text", MIXED)
@pytest.mark.parametrize("version", [1, 2])
def test_native_matches_reference_on_mixed_script(text, version):
    assert tokenize(text, tokenizer_version=version) == ref.tokenize(text, version)
    stops = list(ENGLISH_STOPWORDS)
    assert tokenize(text, stem=True, stopwords="english", tokenizer_version=version) == ref.tokenize(
        text, version, stem=True, stopwords=stops)


_ALPHABET = st.sampled_from(list("中文分词北京大学東京タワーへ行くすしカナ〇々ㄅㄆ ，。！、abcXYZ019 éüß한국ไทย-_'\n"))


@settings(max_examples=300, deadline=None)
@given(st.lists(_ALPHABET, max_size=40).map("".join))
def test_native_matches_reference_on_random_mixed_text(text):
    for version in (1, 2):
        assert _core.bm25_tokenize(text, True, True, list(ENGLISH_STOPWORDS), version) == ref.tokenize(
            text, version, stem=True, stopwords=ENGLISH_STOPWORDS)


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(max_codepoint=0x2E7F, blacklist_categories=("Cs",)), max_size=60))
def test_text_without_cjk_tokenises_as_before(text):
    """Below the CJK blocks (every Latin, Greek, Cyrillic, Arabic, Indic, Thai ... character) nothing changes."""
    for stem, stops in ((False, []), (True, list(ENGLISH_STOPWORDS))):
        assert _core.bm25_tokenize(text, True, stem, stops, 2) == _core.bm25_tokenize(text, True, stem, stops, 1)


CORPUS = ["中文分词是自然语言处理的基础。", "北京大学的研究者发布了新的中文模型。", "東京大学で日本語を研究する。",
          "Rivers and mountains in spring.", "文分离不是一个词。"]


@pytest.mark.parametrize("version", [1, 2])
def test_scores_equal_rank_bm25_over_reference_tokens(version):
    rank_bm25 = pytest.importorskip("rank_bm25")
    ix = BM25(tokenizer_version=version)
    ix.add(CORPUS)
    want = rank_bm25.BM25Okapi([ref.tokenize(t, version) for t in CORPUS])
    for q in ("中文分词", "北京大学", "東京", "rivers 中文"):
        np.testing.assert_allclose(ix.get_scores(q), want.get_scores(ref.tokenize(q, version)), rtol=1e-12,
                                   atol=1e-12)


def test_bigrams_rank_the_phrase_above_scattered_characters():
    """"文分离" holds 文 and 分 but not the word 分词: with bigrams the text about word segmentation wins."""
    docs = ["分离的词，分开写的分。", "中文分词的方法。", "天气很好。", "今天下雨。"]
    uni, bi = BM25(tokenizer_version=1), BM25(tokenizer_version=2)
    uni.add(docs)
    bi.add(docs)
    assert bi.search("分词", k=4)[0].tolist() == [1, 0]
    assert uni.search("分词", k=4)[0].tolist() == [0, 1]  # 分 three times and 词 once outweigh the word


def test_version_survives_bytes_and_files(tmp_path):
    for v in (1, 2):
        ix = BM25(tokenizer_version=v)
        ix.add(CORPUS)
        back = BM25.from_bytes(ix.to_bytes())
        assert back.params["tokenizer_version"] == v
        assert back.tokenize("中文分词") == ix.tokenize("中文分词")
        ix.save(tmp_path / f"v{v}.bin")
        assert BM25.load(tmp_path / f"v{v}.bin").params == ix.params


def test_rule_1_files_keep_the_old_trailer():
    """A rule-1 index writes the trailer as before versions existed ("MMKTOK\\0\\0"), so older readers read it."""
    data = BM25(tokenizer_version=1).to_bytes()
    off = int.from_bytes(data[-8:], "little")
    assert data[off:off + 8] == b"MMKTOK\0\0"
    data2 = BM25(tokenizer_version=2).to_bytes()
    off2 = int.from_bytes(data2[-8:], "little")
    assert data2[off2:off2 + 8] == b"MMKTOK\x02\0"
    bad = data2[:off2 + 6] + b"\x07" + data2[off2 + 7:]
    with pytest.raises(StoreError, match="tokeniser rule version 7"):
        BM25.from_bytes(bad)


def test_bad_version_and_mixed_append():
    for v in (0, 3, "2", True, 2.0):
        with pytest.raises(ConfigError, match="tokenizer_version"):
            BM25(tokenizer_version=v)
        with pytest.raises(ConfigError, match="tokenizer_version"):
            tokenize("中文", tokenizer_version=v)
    a, b = BM25(tokenizer_version=1), BM25(tokenizer_version=2)
    with pytest.raises(ConfigError, match="tokenizer_version 1 != 2"):
        a.append(b)


def _texts(ix) -> list[str]:
    st_ = ix.store
    return [indexed_text(st_.chunks.get(c), True) for c in st_.chunks.ids()]


def test_store_written_before_versions_keeps_unigrams(tmp_path):
    """The fixture was written by the code before rule 2 (CJK characters one token each): it opens with rule 1,
    ranks as rank_bm25 over unigram tokens, and a document added to it is indexed by the same rule."""
    rank_bm25 = pytest.importorskip("rank_bm25")
    path = tmp_path / "old"
    shutil.copytree(DATA / "store-v3-cjk-unigram", path)
    ix = Index.open(path, progress=False)
    view = ix.store.bm25_view("raw")
    assert view.params["tokenizer_version"] == 1 and view.index.params["tokenizer_version"] == 1
    stops = list(ENGLISH_STOPWORDS)

    def check(texts):
        want = rank_bm25.BM25Okapi([ref.tokenize(t, 1, stem=True, stopwords=stops) for t in texts])
        for q in ("北京大学", "中文", "rivers 春天"):
            got = dict(view.search(q, 10))
            exp = want.get_scores(ref.tokenize(q, 1, stem=True, stopwords=stops))
            assert sorted(got) == [i for i, s in enumerate(exp) if s != 0]
            np.testing.assert_allclose([got[i] for i in sorted(got)], [s for s in exp if s != 0], rtol=1e-12)

    check(_texts(ix))
    ix.add([Document.from_text("北京的大学很多。", doc_id="added")], progress=False)
    ix.save()
    ix.close()
    ix = Index.open(path, progress=False)
    view = ix.store.bm25_view("raw")
    assert view.params["tokenizer_version"] == 1 and view.index.params["tokenizer_version"] == 1
    check(_texts(ix))
    ix.close()


def test_new_store_uses_bigrams_and_records_the_rule(tmp_path):
    docs = [Document.from_text(t, doc_id=f"d{i}") for i, t in enumerate(CORPUS)]
    ix = Index.build(docs, store=tmp_path / "new", embedder=None, progress=False)
    ix.save()
    ix.close()
    ix = Index.open(tmp_path / "new", progress=False)
    view = ix.store.bm25_view("raw")
    assert view.params["tokenizer_version"] == 2 and view.index.params["tokenizer_version"] == 2
    assert view.index.tokenize("分词") == ["分", "分词", "词"]
    ix.close()
