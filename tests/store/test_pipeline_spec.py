"""The typed PipelineSpec: manifests of earlier versions read and write back unchanged, and only the
writer serialises it.

The old pipelines below are written by hand in the shapes earlier versions wrote (key order included):
a plain build, an extend interrupted with documents pending, LLM fallback tallies, a component given as
an object, and a key this version does not know.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from momoka import Index
from momoka.errors import ReadOnlyError, StoreCorruptedError
from momoka.store import Store
from momoka.store.spec import ComponentSpec, PipelineSpec

from .conftest import HashEmbedder

DATA = Path(__file__).with_name("data")

OLD = [
    {},
    {"chunker": {"name": "recursive", "params": {"size": 12, "hard_wrap": "auto"}}, "enrich": [], "relate": []},
    {"chunker": {"name": "paragraph", "params": {}},
     "enrich": [{"name": "title", "params": {"max_chars": 80}, "object": False,
                 "settings": {"model": "m", "prompt_sha": "ab12"}}],
     "relate": [{"name": "paths", "params": {"referee": "embedding"}, "object": False,
                 "pending": ["d3", "d1"]},
                {"name": "mine", "params": {}, "object": True}],
     "llm_fallbacks": {"title": {"asked": 4, "fallbacks": 1, "documents": 1, "share": 0.25}}},
    # another key order, and keys this version does not know (kept as they are)
    {"relate": [{"params": {}, "name": "links", "object": False, "future": [1, 2]}], "enrich": [],
     "chunker": None, "recorded_by": "momoka 9.9"},
]


@pytest.mark.parametrize("old", OLD)
def test_old_pipelines_round_trip_unchanged(old):
    spec = PipelineSpec.from_dict(json.loads(json.dumps(old)))
    assert json.dumps(spec.to_dict()) == json.dumps(old)  # the same keys, values and order
    assert PipelineSpec.from_dict(None).to_dict() == {}


def test_the_spec_is_typed():
    spec = PipelineSpec.from_dict(OLD[2])
    assert spec.chunker == {"name": "paragraph", "params": {}}
    paths = spec.entry("relate", "paths")
    assert isinstance(paths, ComponentSpec) and paths.params == {"referee": "embedding"}
    assert paths.pending == ["d3", "d1"] and paths.settings is None and not paths.object
    assert spec.entry("relate", "mine").object and spec.entry("enrich", "paths") is None
    assert spec.fallbacks["title"]["share"] == 0.25
    spec.record_settings("relate", "paths", {"k": 3})
    paths.pending = None  # its extend finished
    out = spec.to_dict()
    assert out["relate"][0] == {"name": "paths", "params": {"referee": "embedding"}, "object": False, "settings": {"k": 3}}
    with pytest.raises(StoreCorruptedError):
        PipelineSpec.from_dict({"enrich": [{"params": {}}]})  # an entry without a name


@pytest.mark.parametrize("name", ["store-v2", "store-v3-notails"])
def test_a_stored_old_pipeline_is_written_back_unchanged(tmp_path, name):
    path = tmp_path / name
    shutil.copytree(DATA / name, path)
    before = json.loads((path / "manifest.json").read_text()).get("pipeline")
    w = Store.open(path, writable=True)
    w.mark_dirty()
    w.save()
    w.close()
    assert json.dumps(json.loads((path / "manifest.json").read_text())["pipeline"]) == json.dumps(before)


def test_only_the_writer_commits_the_spec(tmp_path, docs):
    ix = Index.build(docs[:2], store=tmp_path / "s", embedder=HashEmbedder(), chunker="paragraph", progress=False)
    ix.close()
    snap = Store.open(tmp_path / "s")
    with pytest.raises(ReadOnlyError):
        snap.pipeline = PipelineSpec()
    view = Index.open(tmp_path / "s", embedder=HashEmbedder())
    shown = view.corpus.pipeline
    shown["enrich"].append({"name": "x", "params": {}, "object": False})  # a copy: changes nothing
    assert view.corpus.pipeline["enrich"] == [] and view.store.pipeline.entry("enrich", "x") is None
    view.close()
    w = Store.open(tmp_path / "s", writable=True)
    w.pipeline.enrich.append(ComponentSpec("x", {"a": 1}))
    on_disk = json.loads((tmp_path / "s" / "manifest.json").read_text())["pipeline"]
    assert on_disk["enrich"] == []  # not yet: the commit writes it
    w.mark_dirty()
    w.save()
    w.close()
    on_disk = json.loads((tmp_path / "s" / "manifest.json").read_text())["pipeline"]
    assert on_disk["enrich"] == [{"name": "x", "params": {"a": 1}, "object": False}]
    snap.close()
