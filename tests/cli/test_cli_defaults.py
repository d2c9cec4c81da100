"""One default per setting across commands, and ``momoka index --estimate`` that only estimates.

``momoka chunk`` must preview exactly the chunks ``momoka index`` stores (same chunker, same
default size), and ``--estimate`` must price with the build's settings without running a model
or calling an LLM.
"""

from __future__ import annotations

import json
import time

import pytest

from momoka.cli import main
from momoka.methods.pipeline import DEFAULT_CHUNK_SIZE, DEFAULT_CHUNKER, Index

# 3 paragraphs: 3 sentences, 1 sentence, 4 sentences (the LLM chunker asks about paragraphs of >= 2 sentences).
SHORT = (
    "The harbor opened in spring. Ships came from the north. Traders sold salt and fish.\n\n"
    "A storm closed it in May.\n\n"
    "The town rebuilt the pier. Workers came from the valley. The new pier was longer. It opened in June.\n"
)


def _long_text() -> str:
    # about 900 whitespace tokens in 30 paragraphs: many chunks at size 100, fewer at 200
    paras = []
    for i in range(30):
        paras.append(" ".join(f"Sentence {i}-{j} speaks of lighthouse keeper number {j} and the tide." for j in range(3)))
    return "\n\n".join(paras) + "\n"


@pytest.fixture
def clean_llm_env(monkeypatch):
    """--llm-url sets the endpoint variables for the process: restore them after the test."""
    for var in ("MOMOKA_LLM_BASE_URL", "MOMOKA_LLM_MODEL"):
        monkeypatch.setenv(var, "x")
        monkeypatch.delenv(var)
    return monkeypatch


def _stored_chunks(store, doc_id):
    st = Index.open(store).store
    return [st.chunks.row(c)[1:4] for c in st.documents[doc_id].chunk_ids]


def test_chunk_previews_exactly_what_index_stores(tmp_path, capsys):
    f = tmp_path / "harbor.txt"
    f.write_text(_long_text(), encoding="utf-8")
    assert main(["chunk", str(f), "--json"]) == 0
    preview = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["index", str(f), "--store", str(tmp_path / "s"), "--no-dense"]) == 0
    stored = _stored_chunks(tmp_path / "s", "harbor")
    assert [(c["start"], c["end"], c["text"]) for c in preview] == stored
    # the shared default: the recursive chunker at 100 whitespace tokens (no chunk is longer, and it is
    # not the chunker's own default of 256, which would give fewer chunks)
    assert DEFAULT_CHUNKER == "recursive" and DEFAULT_CHUNK_SIZE == 100
    assert max(len(t.split()) for _, _, t in stored) <= 100 < sum(len(t.split()) for _, _, t in stored[:2])


def test_estimate_counts_the_chunks_index_builds(tmp_path, capsys):
    f = tmp_path / "harbor.txt"
    f.write_text(_long_text(), encoding="utf-8")
    for extra in ([], ["--chunker", "fixed", "--size", "40"]):
        assert main(["index", str(f), "--store", str(tmp_path / "e"), "--no-dense", "--estimate", *extra]) == 0
        est = json.loads(capsys.readouterr().out)
        assert not (tmp_path / "e").exists()
        store = tmp_path / ("s" + "".join(extra))
        assert main(["index", str(f), "--store", str(store), "--no-dense", *extra]) == 0
        capsys.readouterr()
        assert est["chunks"] == len(_stored_chunks(store, "harbor")), extra


def test_estimate_names_the_files_index_would_skip(tmp_path, capsys):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "harbor.txt").write_text(SHORT, encoding="utf-8")
    (d / "image.bin").write_bytes(bytes(range(256)))  # a type a folder is not read for
    (tmp_path / "outside.txt").write_text("not to be read", encoding="utf-8")
    (d / "link.txt").symlink_to(tmp_path / "outside.txt")  # a link leaving the folder given
    assert main(["index", str(d), "--store", str(tmp_path / "e"), "--no-dense", "--estimate"]) == 0
    cap = capsys.readouterr()
    est = json.loads(cap.out)
    assert est["documents"] == 1 and not (tmp_path / "e").exists()
    assert sorted(src for src, _ in est["skipped"]) == [str(d / "image.bin"), str(d / "link.txt")]
    assert f"momoka: warning: skipped {d / 'link.txt'}: " in cap.err
    assert f"momoka: warning: skipped {d / 'image.bin'}: " in cap.err
    # --on-error stop stops on them, as index does
    assert main(["index", str(d), "--store", str(tmp_path / "e"), "--no-dense", "--estimate",
                 "--on-error", "stop"]) == 2
    assert capsys.readouterr().err.startswith("momoka: error: ")


def test_estimate_with_the_llm_chunker_calls_no_llm(tmp_path, capsys, make_server, clean_llm_env):
    srv = make_server()  # counts every request it receives
    f = tmp_path / "harbor.txt"
    f.write_text(SHORT, encoding="utf-8")
    t0 = time.monotonic()
    rc = main(["index", str(f), "--store", str(tmp_path / "s"), "--chunker", "llm", "--relate", "paths",
               "-o", "paths.referee=llm", "--llm-url", srv.base_url, "--llm-model", "m", "--estimate"])
    took = time.monotonic() - t0
    assert rc == 0
    est = json.loads(capsys.readouterr().out)
    assert srv.count == 0, srv.requests
    assert took < 10
    priced = est["chunker"]["estimate"]
    # by hand: the 3- and 4-sentence paragraphs are asked about, the 1-sentence one is kept whole
    assert priced["llm_calls"] == 2
    assert priced["chunks_min"] == 3 and priced["chunks_max"] == 1 + 3 + 4
    assert priced["prompt_tokens"] > (len(SHORT) - 25) // 4  # both asked paragraphs are in the prompts
    assert est["chunks"] is None and "not run" in est["priced_on"]
    assert est["relators"]["paths"]["referee"] == "llm"
    assert not (tmp_path / "s").exists()


def test_estimate_prices_enrichers_and_relators_by_backend(tmp_path, capsys, make_server, clean_llm_env):
    srv = make_server()  # counts every request it receives
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "harbor.txt").write_text(_long_text(), encoding="utf-8")
    (docs / "short.txt").write_text(SHORT, encoding="utf-8")
    base = ["index", str(docs), "--store", str(tmp_path / "s"), "--no-dense", "--estimate",
            "--enrich", "title,keywords,summary", "--relate", "jerr"]
    assert main(base + ["-o", "title.mode=llm", "-o", "keywords.backend=llm", "-o", "jerr.backend=llm",
                        "--llm-url", srv.base_url, "--llm-model", "m"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert srv.count == 0, srv.requests
    title, kw, sm = (est["enrichers"][n] for n in ("title", "keywords", "summary"))
    # by hand: one title per document; one keyword list per chunk; summaries only of long texts (none here)
    assert title["llm_calls"] == 2 and title["completion_tokens_max"] == 2 * 48
    assert title["prompt_tokens"] > (len(SHORT) + min(len(_long_text()), 4000)) // 4
    assert kw["backend"] == "llm" and kw["llm_calls"] == est["chunks"] == kw["chunks"]
    assert sm["backend"] == "llm" and sm["llm_calls"] == 0
    assert est["relators"]["jerr"]["backend"] == "llm" and est["relators"]["jerr"]["llm_calls_max"] == 6 * est["relators"]["jerr"]["units"]
    # offline: nothing is asked of an LLM (auto would follow the endpoint --llm-url set above)
    assert main(base + ["-o", "title.mode=document", "-o", "keywords.backend=offline", "-o", "summary.backend=offline",
                        "-o", "jerr.backend=offline"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert [est["enrichers"][n]["llm_calls"] for n in ("title", "keywords", "summary")] == [0, 0, 0]
    assert est["relators"]["jerr"] == {"backend": "offline", "units": est["relators"]["jerr"]["units"], "llm_calls": 0}
    assert not (tmp_path / "s").exists()


def test_estimate_names_the_language_aware_embedder(tmp_path, capsys):
    # a Chinese corpus without --embedder: the estimate names the embedder the build chose (the
    # multilingual one when it is installed) and counts the chunks that build stores
    from momoka.models.catalog import MULTILINGUAL_EMBEDDER, is_installed

    if not is_installed(MULTILINGUAL_EMBEDDER):
        pytest.skip(f"{MULTILINGUAL_EMBEDDER} is not installed")
    f = tmp_path / "zh.txt"
    f.write_text("\n\n".join("长城是中国古代的军事防御工程，是一道高大、坚固而且连绵不断的长垣。" * 6 for _ in range(4)),
                 encoding="utf-8")
    assert main(["index", str(f), "--store", str(tmp_path / "e"), "--estimate"]) == 0
    cap = capsys.readouterr()
    est = json.loads(cap.out)
    assert est["embedder"] == MULTILINGUAL_EMBEDDER and "building with " + MULTILINGUAL_EMBEDDER in cap.err
    assert not (tmp_path / "e").exists()
    store = tmp_path / "s"
    assert main(["index", str(f), "--store", str(store)]) == 0
    capsys.readouterr()
    assert est["chunks"] == len(_stored_chunks(store, "zh"))
    # --embedder keeps its choice; --no-dense has none
    assert main(["index", str(f), "--store", str(tmp_path / "e"), "--estimate", "--embedder", "minilm-l6-v2-int8"]) == 0
    assert json.loads(capsys.readouterr().out)["embedder"] == "minilm-l6-v2-int8"
    assert main(["index", str(f), "--store", str(tmp_path / "e"), "--estimate", "--no-dense"]) == 0
    assert json.loads(capsys.readouterr().out)["embedder"] is None
