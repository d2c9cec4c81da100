"""``bench/data/crud_rag.py`` on a planted CRUD-RAG checkout: a handful of articles and items written here,
with every evidence offset counted by hand."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from momoka.eval.datasets import load_dataset

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "data" / "crud_rag.py"


def _module():
    spec = importlib.util.spec_from_file_location("crud_rag", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


XIAN = "西安市发放500万元体育消费券，全市173家体育场馆可用。"
XIAN_2 = "陕西西安市今日发放500万元体育消费券，市民可在全市173家体育场馆使用。"
SHANGHAI = "上海市体育局联合美团发放消费券。总额500万元的体育消费券覆盖3000多家本地运动门店。"
CHENGDU = "成都市体育局借大运会契机发放惠民运动券，并举办大型体育展会活动。"
PART_1 = [f"2023-07-01 10:00，正文：  {XIAN}", f"[ 2023-07-02 ] ，正文：{SHANGHAI}", "2023-07-03，正文：今天天气晴朗，适合户外运动。",
          f"2023-07-01 10:00，正文：  {XIAN}",  # an exact duplicate: dropped
          "没有正文标记的一行。"]
PART_2 = [f"2023-07-04，正文：{CHENGDU}", f"2023-07-05，正文：{XIAN_2}"]
ONE = {
    "A": {"key_info": ["西安市", "500万元体育消费券", "全市173家体育场馆"],
          "question": ["哪个城市发放了消费券？", "总金额是多少？", "有多少家场馆？", "什么是消费券？", "有多少人领取？"],
          "answers": ["西安市", "500万元", "173家", "无法推断", "一千人"]},
    "C": {"key_info": ["不存在的事实一", "不存在的事实二"], "question": ["问？"], "answers": ["答案"]},
}
TWO = {
    "B": {"key_info": ["上海市体育局", "3000多家本地运动门店", "总额500万元的体育消费券", "成都市体育局", "大型体育展会活动",
                       "惠民运动券"],
          "question": ["哪个城市的体育局联合美团？", "覆盖多少门店？", "成都举办什么活动？", "有哪些面额？"],
          "answers": ["上海市", "3000多家", "大型体育展会活动", "无法推断"]},
}


@pytest.fixture()
def checkout(tmp_path):
    root = tmp_path / "CRUD_RAG"
    docs = root / "data" / "80000_docs"
    docs.mkdir(parents=True)
    (docs / "documents_dup_part_1_part_1").write_text("\n".join(PART_1) + "\n", encoding="utf-8")
    (docs / "documents_dup_part_1_part_2").write_text("\n".join(PART_2), encoding="utf-8")
    q = root / "src" / "quest_eval"
    q.mkdir(parents=True)
    (q / "QuestAnswer1Doc_quest_gt_save.json").write_text(json.dumps(ONE, ensure_ascii=False), encoding="utf-8")
    (q / "QuestAnswer2Docs_quest_gt_save.json").write_text(json.dumps(TWO, ensure_ascii=False), encoding="utf-8")
    return root


def _read(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_planted_checkout(checkout, tmp_path):
    out = tmp_path / "out"
    stats = _module().convert(checkout, out, tasks=("1doc", "2docs"), distractors=1, seed=0, log=lambda m: None)
    docs = {d["doc_id"]: d for d in _read(out / "documents.jsonl")}
    xian, xian2 = "crud_part_1_part_1_0000", "crud_part_1_part_2_0001"
    shanghai, chengdu = "crud_part_1_part_1_0001", "crud_part_1_part_2_0000"
    assert docs[xian]["text"] == XIAN and docs[xian]["date"] == "2023-07-01 10:00"  # leading spaces stripped
    assert docs[shanghai]["date"] == "2023-07-02" and docs[xian2]["text"] == XIAN_2
    assert {xian, xian2, shanghai, chengdu} <= set(docs) and len(docs) == 5  # 4 sources + 1 distractor
    assert sum(not d["source"] for d in docs.values()) == 1
    qs = {q["qid"]: q for q in _read(out / "questions.jsonl")}
    assert list(qs) == ["crud_1doc_A_q0", "crud_1doc_A_q1", "crud_1doc_A_q2", "crud_2docs_B_q0", "crud_2docs_B_q1",
                        "crud_2docs_B_q2"]
    # item A: both reports of the Xi'an news hold all three key facts, so both are sources (alternatives)
    assert qs["crud_1doc_A_q0"]["evidence_multi"] == [[xian, 0, 3], [xian2, 2, 5]]
    assert qs["crud_1doc_A_q0"]["doc_id"] == xian and qs["crud_1doc_A_q0"]["evidence"] == [[0, 3]]
    assert qs["crud_1doc_A_q1"]["evidence_multi"] == [[xian, 5, 10], [xian2, 9, 14]]
    assert qs["crud_1doc_A_q2"]["evidence_multi"] == [[xian, 18, 22], [xian2, 26, 30]]
    assert qs["crud_1doc_A_q2"]["n_sources"] == 1 and qs["crud_1doc_A_q2"]["task"] == "1doc"
    # item B: two source articles, each question's answer in one of them
    assert qs["crud_2docs_B_q0"]["evidence_multi"] == [[shanghai, 0, 3]]
    assert qs["crud_2docs_B_q1"]["evidence_multi"] == [[shanghai, 31, 37]]
    assert qs["crud_2docs_B_q2"]["evidence_multi"] == [[chengdu, 23, 31]]
    assert qs["crud_2docs_B_q2"]["n_sources"] == 2 and qs["crud_2docs_B_q2"]["doc_ids"] == [chengdu]
    for q in qs.values():
        for d, s, e in q["evidence_multi"]:
            assert docs[d]["text"][s:e] == q["answers"][0]
    one, two = stats["tasks"]["1doc"], stats["tasks"]["2docs"]
    assert (one["items"], one["items_placed"], one["items_not_placed"]) == (2, 1, 1)
    assert (one["questions"], one["dropped_unanswerable"], one["dropped_answer_not_verbatim"],
            one["dropped_item_not_placed"]) == (3, 1, 1, 1)
    assert (two["items_with_2_sources"], two["questions"], two["dropped_unanswerable"]) == (1, 3, 1)
    assert json.loads((out / "dataset.json").read_text()) == {"evidence_mode": "any"}
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert "IAAR-Shanghai/CRUD_RAG" in readme and "Apache-2.0" in readme and "6 questions" in readme
    ds = load_dataset(out)
    assert ds.evidence_mode == "any" and len(ds.questions_with_evidence()) == 6
    assert {g[0] for g in ds.questions[0].gold} == {xian, xian2}


def test_missing_files_are_clear_errors(checkout, tmp_path, capsys):
    mod = _module()
    assert mod.main([str(checkout), str(tmp_path / "o")]) == 2  # the 3-article task's file is absent
    assert "missing src/quest_eval/QuestAnswer3Docs_quest_gt_save.json" in capsys.readouterr().err
    assert mod.main([str(tmp_path / "nothing"), str(tmp_path / "o")]) == 2
    assert "no corpus parts" in capsys.readouterr().err
    assert mod.main([str(checkout), str(tmp_path / "o"), "--tasks", "4docs"]) == 2
    assert "unknown task '4docs'" in capsys.readouterr().err
