"""The language-aware default embedder: mostly non-Latin documents build with multilingual-e5-small."""

from __future__ import annotations

import json
import warnings

import pytest

import momoka.methods.sources as sources_mod
from momoka.methods.sources import LanguageWarning, language_default_embedder
from momoka.models.catalog import MULTILINGUAL_EMBEDDER, build_version, installed_models, models_dir

ZH = [
    "长城是中国古代的军事防御工程，是一道高大、坚固而且连绵不断的长垣，用以限隔敌骑的行动。",
    "黄河是中国的第二长河，发源于青藏高原巴颜喀拉山脉北麓，最后流入渤海。",
    "故宫又称紫禁城，是明清两代的皇家宫殿，位于北京中轴线的中心。",
]
EN = [
    "The Great Wall of China is a series of fortifications built across the northern borders of ancient states.",
    "The Yellow River is the second-longest river in China and flows into the Bohai Sea.",
    "The Forbidden City was the imperial palace of the Ming and Qing dynasties in Beijing.",
]


def _docs(texts):
    return [{"doc_id": f"d{i}", "text": t} for i, t in enumerate(texts)]


def _fake_e5(home):
    """A cache whose manifest lists the multilingual model with its (dummy) file present: installed as far as
    the choice is concerned, without building it."""
    d = home / "models" / MULTILINGUAL_EMBEDDER
    d.mkdir(parents=True)
    (d / "model.onnx").write_bytes(b"x")
    entry = {"id": MULTILINGUAL_EMBEDDER, "dir": MULTILINGUAL_EMBEDDER, "build": build_version(MULTILINGUAL_EMBEDDER),
             "files": {"model.onnx": {"sha256": "-", "size": 1}}}
    (home / "models" / "manifest.json").write_text(json.dumps({"format": 1, "models": {MULTILINGUAL_EMBEDDER: entry}}))


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("MOMOKA_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(sources_mod, "_LANGUAGE_WARNED", set())
    return tmp_path / "home"


def test_chinese_with_the_model_installed(home):
    _fake_e5(home)
    said = []
    assert language_default_embedder(_docs(ZH), say=said.append) == MULTILINGUAL_EMBEDDER
    assert len(said) == 1 and "mostly in Han script" in said[0] and f"building with {MULTILINGUAL_EMBEDDER}" in said[0]


def test_chinese_files_say_one_line_on_stderr(home, tmp_path, capsys):
    _fake_e5(home)
    folder = tmp_path / "zh"
    folder.mkdir()
    for i, t in enumerate(ZH):
        (folder / f"d{i}.txt").write_text(t, encoding="utf-8")
    assert language_default_embedder(str(folder)) == MULTILINGUAL_EMBEDDER
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("momoka: the documents are mostly in Han script (100% of the words")


def test_chinese_without_the_model_warns_once(home):
    with pytest.warns(LanguageWarning, match="momoka models install multilingual-e5-small"):
        assert language_default_embedder(_docs(ZH)) == "default"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert language_default_embedder(_docs(ZH)) == "default"  # once per process


def test_english_and_other_latin_keep_the_default(home):
    _fake_e5(home)
    said = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert language_default_embedder(_docs(EN), say=said.append) == "default"
        fr = ["Les Normands ont donné leur nom à la Normandie, une région du nord de la France."]
        assert language_default_embedder(_docs(fr), say=said.append) == "default"
        # an English corpus with a few Chinese words stays English
        assert language_default_embedder(_docs(EN + ["长城"]), say=said.append) == "default"
    assert said == []


@pytest.mark.models
def test_build_picks_e5_for_chinese_and_keeps_english(tmp_path, capsys, monkeypatch):
    # The real models (read from the model cache): Chinese builds with e5, English exactly as before.
    import momoka

    present = installed_models(models_dir())
    if MULTILINGUAL_EMBEDDER not in present or "minilm-l6-v2-int8" not in present:
        pytest.skip(f"needs {MULTILINGUAL_EMBEDDER} and minilm-l6-v2-int8 installed")
    monkeypatch.setattr(sources_mod, "_LANGUAGE_WARNED", set())
    zh = momoka.Index.build(_docs(ZH), progress=False)
    assert zh.store.embedder_info["model_id"] == MULTILINGUAL_EMBEDDER
    assert "building with multilingual-e5-small" in capsys.readouterr().err
    en = momoka.Index.build(_docs(EN), progress=False)
    explicit = momoka.Index.build(_docs(EN), embedder="minilm-l6-v2-int8", progress=False)
    assert capsys.readouterr().err == ""
    assert en.store.embedder_info == explicit.store.embedder_info
    assert en.embed(EN).tobytes() == explicit.embed(EN).tobytes()
    # an explicit choice is kept for Chinese too
    zh_minilm = momoka.Index.build(_docs(ZH), embedder="minilm-l6-v2-int8", progress=False)
    assert zh_minilm.store.embedder_info["model_id"] == "minilm-l6-v2-int8"
    assert capsys.readouterr().err == ""
