"""Loading evaluation sets: the real shared sets, and malformed folders."""

from __future__ import annotations

import json

import pytest

from momoka.errors import DatasetError
from momoka.eval import load_dataset
from momoka.eval.datasets import find_shared_data


def _write(tmp_path, docs, questions):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (tmp_path / "questions.jsonl").write_text(
        "".join((q if isinstance(q, str) else json.dumps(q)) + "\n" for q in questions)
    )
    return tmp_path


def test_squad_evidence_offsets_hold(shared_data):
    ds = load_dataset(shared_data / "squad_v1_dev_half_a", limit=300)
    assert ds.evidence_mode == "any" and len(ds.documents) == 24 and len(ds.questions) == 300
    # the set's dataset.json names the mode where the set has one; else it is inferred from the spans
    # (every span is an answer occurrence)
    meta = shared_data / "squad_v1_dev_half_a" / "dataset.json"
    if meta.is_file():
        assert json.loads(meta.read_text())["evidence_mode"] == "any"
        assert ds.evidence_mode_source == "metadata dataset.json"
    else:
        assert ds.evidence_mode_source.startswith("inferred")
    for q in ds.questions:
        text = ds.document(q.doc_id).text
        # The set's README: every evidence span equals one of the answers.
        assert all(text[s:e] in q.answers for _, s, e in q.gold)


def test_dragonball_cross_document_evidence(shared_data):
    ds = load_dataset(shared_data / "dragonball_finance_en")
    multi = [q for q in ds.questions if len({d for d, _, _ in q.gold}) > 1]
    assert multi, "the set has 2-document questions"
    assert sum(not q.gold for q in ds.questions) == 38  # unanswerable ones, per its README


def test_evidence_mode_never_from_the_folder_name(tmp_path):
    docs = [{"doc_id": "d", "text": "Paris is the capital of France. It lies on the Seine."}]
    passage = {"qid": "1", "doc_id": "d", "question": "capital?", "answers": ["Paris"], "evidence": [[0, 31]]}
    occurrence = {"qid": "2", "doc_id": "d", "question": "capital?", "answers": ["Paris"], "evidence": [[0, 5]]}
    # A folder named like a known set gets no mode from its name: passage evidence is not inferable.
    ds = load_dataset(_write(tmp_path / "squad_v1_dev_half_a", docs, [passage]))
    assert ds.evidence_mode is None and "metadata" in ds.evidence_mode_source
    with pytest.raises(DatasetError, match="--evidence-mode"):
        ds.require_evidence_mode()
    # Answer occurrences only: alternatives.
    assert load_dataset(_write(tmp_path / "occ", docs, [occurrence])).evidence_mode == "any"
    # Metadata wins over inference; the argument wins over metadata.
    folder = _write(tmp_path / "meta", docs, [passage, occurrence])
    (folder / "dataset.json").write_text(json.dumps({"evidence_mode": "all"}))
    assert load_dataset(folder).evidence_mode == "all"
    assert load_dataset(folder, evidence_mode="any").evidence_mode == "any"
    (folder / "dataset.json").write_text(json.dumps({"evidence_mode": "some"}))
    with pytest.raises(DatasetError, match="evidence_mode"):
        load_dataset(folder)


def test_eval_of_a_set_without_mode_is_an_error(tmp_path):
    from momoka.eval.runner import run_eval

    docs = [{"doc_id": "d", "text": "Paris is the capital of France. It lies on the Seine."}]
    q = {"qid": "1", "doc_id": "d", "question": "capital?", "answers": ["Paris"], "evidence": [[0, 31]]}
    with pytest.raises(DatasetError, match="evidence mode unknown"):
        run_eval(_write(tmp_path, docs, [q]), ["bm25"])  # before any indexing


def test_set_found_by_name(shared_data, monkeypatch):
    monkeypatch.setenv("MOMOKA_DATA", str(shared_data))
    assert load_dataset("leval_qasper").name == "leval_qasper"


def test_find_shared_data_order(tmp_path, monkeypatch):
    repo = tmp_path / "checkout" / "repo"
    repo.mkdir(parents=True)
    beside = tmp_path / "checkout" / "shared" / "data"
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.delenv("MOMOKA_SHARED_DATA", raising=False)
    assert find_shared_data(repo) is None  # neither the variable nor ../shared/data
    beside.mkdir(parents=True)
    assert find_shared_data(repo) == beside
    monkeypatch.setenv("MOMOKA_SHARED_DATA", str(elsewhere))
    assert find_shared_data(repo) == beside  # the variable names no folder: ignored
    elsewhere.mkdir()
    assert find_shared_data(repo) == elsewhere  # the variable comes first


def test_missing_folder_and_files(tmp_path):
    with pytest.raises(DatasetError, match="no data set"):
        load_dataset(tmp_path / "nope")
    with pytest.raises(DatasetError, match="missing file"):
        load_dataset(tmp_path)


def test_malformed_json_line_names_the_line(tmp_path):
    _write(tmp_path, [{"doc_id": "d", "title": "t", "text": "abc"}], ['{"qid": 1,'])
    with pytest.raises(DatasetError, match=r"questions.jsonl:1: invalid JSON"):
        load_dataset(tmp_path)


def test_evidence_outside_document(tmp_path):
    _write(
        tmp_path,
        [{"doc_id": "d", "title": "t", "text": "abc"}],
        [{"qid": "q", "doc_id": "d", "question": "?", "answers": ["a"], "evidence": [[1, 9]]}],
    )
    with pytest.raises(DatasetError, match="outside document"):
        load_dataset(tmp_path)


def test_missing_field_and_duplicate_doc(tmp_path):
    _write(tmp_path, [{"doc_id": "d", "text": "abc"}], [{"doc_id": "d", "question": "?"}])
    with pytest.raises(DatasetError, match="missing field 'qid'"):
        load_dataset(tmp_path)
    _write(tmp_path, [{"doc_id": "d", "text": "a"}, {"doc_id": "d", "text": "b"}], [])
    with pytest.raises(DatasetError, match="duplicate doc_id"):
        load_dataset(tmp_path)
