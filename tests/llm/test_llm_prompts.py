"""Prompt templates: faithful to their sources, safe rendering, overrides."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from momoka.errors import ConfigError, InputError
from momoka.llm import prompts

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
PAPER = {"momoka.": "000_", "moc.": "001_", "ets.": "002_", "jerr.": "003_", "mcindex.": "004_"}
WRITTEN_FOR_MOMOKA = {"momoka.title", "moc.meta_chunker_sized", "moc.router", "jerr.lookup"}
# input slots momoka adds where a paper prints none (each is stated in the template's note)
ADDED = {"jerr.entities": "\n\nParagraph: ", "jerr.elements": "\n\nParagraph: "}


def _norm(s: str, methods: bool = False) -> str:
    s = s.replace("\\", "")
    s = re.sub(r"[*`$]", "", s)
    s = s.replace("\u2014", "-")
    s = re.sub(r"-{2,}", "-", s)
    s = re.sub(r"\s+", " ", s)
    if methods:
        s = s.replace(" / ", " ")
    return s


def _source_text(name: str) -> tuple[str, bool] | None:
    t = prompts.default(name)
    if prompts.APACHE_NOTE in t.note:
        p = SHARED / "METHODS.md"
        return (p.read_text(encoding="utf-8"), True) if p.exists() else None
    for prefix, stem in PAPER.items():
        if name.startswith(prefix):
            files = sorted((SHARED / "papers").glob(stem + "*.txt")) if (SHARED / "papers").is_dir() else []
            return (files[0].read_text(encoding="utf-8"), False) if files else None
    return None


EXPECTED = {
    "momoka.llm_chunk", "momoka.referee", "momoka.referee_path", "moc.direct_chunking", "moc.meta_chunker",
    "ets.extraction", "ets.answering", "jerr.synopsis", "jerr.entities", "jerr.elements", "jerr.edge_attributes",
    "jerr.answer_quality", "jerr.answer", "mcindex.summary", "mcindex.keywords",
}


def test_every_required_prompt_is_there():
    assert EXPECTED <= set(prompts.names())


@pytest.mark.data  # ../shared/METHODS.md and ../shared/papers
@pytest.mark.parametrize("name", sorted(set(prompts.names()) - WRITTEN_FOR_MOMOKA))
def test_templates_quote_their_source(name):
    src = _source_text(name)
    if src is None:
        pytest.skip("the papers / METHODS.md are not available beside the repository")
    text, methods = src
    hay = _norm(text, methods)
    t = prompts.default(name)
    body = t.template
    if name in ADDED:
        assert "appends" in t.note and ADDED[name] in body
        body = body.replace(ADDED[name], " ")
    segments = re.split(r"\{[a-z_0-9]+\}", body)
    checked = 0
    for seg in segments:
        s = _norm(seg, methods).strip()
        if len(s) < 12:
            continue
        assert s in hay, f"{name}: {s[:70]!r} is not in its source"
        checked += 1
    assert checked >= 1


def test_render_fills_placeholders_once_and_leaves_other_braces():
    t = prompts.get("momoka.referee")
    out = t.render(initial_chunk="A {new_chunk} B", new_chunk="C {x} D")
    assert "Initial Chunk: A {new_chunk} B" in out and "New Chunk: C {x} D" in out
    p = prompts.get("mcindex.pairwise_eval")
    r = p.render(question="q", ground_truth_answer="g", answer_1="a1", answer_2="a2")
    assert '{"answer_1_score":"...", "answer_2_score":"..."}' in r


def test_render_errors():
    t = prompts.get("momoka.referee")
    # a placeholder without a value
    with pytest.raises(InputError, match="new_chunk"):
        t.render(initial_chunk="a")
    # a value without a placeholder (a typo would otherwise drop the text)
    with pytest.raises(InputError, match="new_chunck"):
        t.render(initial_chunk="a", new_chunk="b", new_chunck="c")
    # an unknown template name
    with pytest.raises(ConfigError, match="no prompt named"):
        prompts.get("momoka.nope")


def test_messages_have_system_when_the_source_has_one():
    m = prompts.messages("moc.meta_chunker_zh", window="文本")
    assert m[0] == {"role": "system", "content": " You are a helpful assistant."}
    assert m[1]["role"] == "user" and m[1]["content"].endswith("文档内容：文本\n\n分割好的文本块的列表格式输出：")
    assert [x["role"] for x in prompts.messages("momoka.llm_chunk", item="x")] == ["user"]


def test_msp_prompt_keeps_reference_layout():
    r = prompts.render("metachunking.msp_en", ab="A B", a="A", b="B")
    lines = r.split("\n")
    assert len(lines) == 4 and all(ln.startswith(" " * 8 + c) for ln, c in zip(lines[1:], "12P"))
    assert lines[1] == '        1. Split "A B" into "A" and "B" two parts;'


def test_override_reset_and_file(tmp_path):
    try:
        p = prompts.override("momoka.referee", "Does {new_chunk} complete {initial_chunk}? 1/0", system="judge")
        assert prompts.get("momoka.referee") is p
        assert prompts.messages("momoka.referee", initial_chunk="a", new_chunk="b") == [
            {"role": "system", "content": "judge"}, {"role": "user", "content": "Does b complete a? 1/0"}]
        assert "verification expert" in prompts.default("momoka.referee").template
        # an override that drops an input
        with pytest.raises(ConfigError, match="initial_chunk"):
            prompts.override("momoka.referee", "Is {new_chunk} good?")
        # an empty override
        with pytest.raises(ConfigError):
            prompts.override("momoka.referee", "  ")
        prompts.reset("momoka.referee")
        assert "verification expert" in prompts.get("momoka.referee").template
        f = tmp_path / "o.json"
        f.write_text(json.dumps({"jerr.synopsis": "Summarise: {text}",
                                 "ets.answering": {"template": "{background} / {query}", "system": "s"}}))
        assert prompts.load_overrides(f) == ["jerr.synopsis", "ets.answering"]
        assert prompts.render("jerr.synopsis", text="T") == "Summarise: T"
        assert prompts.get("ets.answering").system == "s"
        # overrides file problems
        bad = tmp_path / "bad.json"
        bad.write_text("[1, 2]")
        with pytest.raises(ConfigError):
            prompts.load_overrides(bad)
        bad.write_text("{not json")
        with pytest.raises(ConfigError):
            prompts.load_overrides(bad)
        with pytest.raises(ConfigError):
            prompts.load_overrides(tmp_path / "missing.json")
    finally:
        prompts.reset()
    assert prompts.get("jerr.synopsis").template.startswith("Please transfer")


def test_apache_attribution_is_kept():
    import momoka.methods.moc.prompts as moc_prompts

    assert "Apache License 2.0" in moc_prompts.__doc__   # the module that quotes them says so
    for n in ("moc.meta_chunker_zh", "moc.router_zh", "metachunking.msp_en", "metachunking.msp_zh"):
        assert "Apache" in prompts.default(n).note


def test_each_paper_keeps_its_prompts_in_its_own_package():
    import importlib

    by_module = {}
    for n in prompts.names():
        by_module.setdefault(n.split(".")[0], set()).add(n)
    # the name's prefix says the paper; its module under momoka/methods/<package>/prompts.py defines it
    package = {"momoka": "momoka", "moc": "moc", "metachunking": "moc", "ets": "ets", "jerr": "jerr",
               "mcindex": "mcindex"}
    assert set(by_module) <= set(package)
    for prefix, names in by_module.items():
        mod = importlib.import_module(f"momoka.methods.{package[prefix]}.prompts")
        src = open(mod.__file__, encoding="utf-8").read()
        assert all(f'"{n}"' in src for n in names), prefix
    with pytest.raises(ConfigError):
        prompts.define("momoka.referee", "x {a}", ("a",))      # defined once
    with pytest.raises(ConfigError):
        prompts.define("test.bad", "no slot", ("a",))          # a declared placeholder must occur
