"""momoka.settings: the one reader of MOMOKA_* variables, its table, and the docs page that shows it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from momoka import settings
from momoka.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "momoka"
DOC = ROOT / "docs" / "configuration.md"


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    for name in settings.SETTINGS:
        if name not in ("MOMOKA_HOME", "MOMOKA_LLM_CACHE", "MOMOKA_CACHE_DIR", "MOMOKA_SHARED_DATA"):
            monkeypatch.delenv(name, raising=False)


def _row(s: settings.Setting) -> str:
    """The docs table row of a setting (the page must hold exactly these rows)."""
    if s.default is None:
        default = "—"
    elif s.kind == "flag":
        default = "`1`" if s.default else "`0`"
    else:
        default = f"`{s.default:g}`" if isinstance(s.default, float) else f"`{s.default}`"
    return f"| `{s.name}` | {s.kind} | {default} | {s.allowed()} | `{s.reader}` | {s.description} |"


def test_the_docs_table_is_the_settings_table():
    text = DOC.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `MOMOKA_")]
    expected = [_row(s) for s in settings.SETTINGS.values()]
    assert rows == expected, "docs/configuration.md is out of step with momoka.settings; its rows are:\n" + "\n".join(
        expected)


def _package_files():
    return [p for p in PACKAGE.rglob("*.py") if p.name != "settings.py"]


def test_no_module_but_settings_reads_the_environment():
    """Outside settings.py the package only writes MOMOKA_* variables (the CLI's --llm-* flags) and
    ORT_DISABLE_TELEMETRY when unset (``import momoka``: onnxruntime's telemetry off), and reads two variables
    that are not momoka's (PYTHONPATH for Ray workers, XDG_CACHE_HOME for the home default)."""
    allowed = re.compile(r'os\.environ\[[A-Za-z_."]+\] = |os\.environ\.get\("(PYTHONPATH|XDG_CACHE_HOME)"'
                         r'|os\.environ\.setdefault\("ORT_DISABLE_TELEMETRY", "1"\)')
    offending = []
    for path in _package_files():
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(r"\benviron\b|\bgetenv\b", code) and not allowed.search(code):
                if "``" not in code and not code.strip().startswith(('"', "'")):  # docstring prose
                    offending.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert offending == []


def test_every_variable_the_package_names_is_in_the_table():
    named = set()
    for path in _package_files():
        for m in re.finditer(r"\bMOMOKA_[A-Z0-9_]*[A-Z0-9]\b(?!_\*)", path.read_text(encoding="utf-8")):
            named.add(m.group())
    named -= {"MOMOKA_LLM"}  # "MOMOKA_LLM_*", the family
    assert sorted(named - set(settings.SETTINGS)) == []


# ------------------------------------------------------------------ values
def test_unset_and_blank_give_the_defaults(monkeypatch):
    assert settings.get_float("MOMOKA_LLM_MAX_FAILED") == 0.25
    assert settings.get_float("MOMOKA_LLM_TIMEOUT") == 120.0
    assert settings.get_float("MOMOKA_LLM_DEADLINE") is None
    assert settings.get_int("MOMOKA_MERGE_FACTOR") == 10
    assert settings.get_flag("MOMOKA_PROGRESS") is None
    assert settings.get_flag("MOMOKA_NO_AUTO_INSTALL") is False
    monkeypatch.setenv("MOMOKA_COMMIT_DOCS", "  ")
    assert settings.get_int("MOMOKA_COMMIT_DOCS") == 256


def test_values_are_parsed(monkeypatch):
    monkeypatch.setenv("MOMOKA_LLM_MAX_FAILED", " 0.4 ")
    monkeypatch.setenv("MOMOKA_THREADS", "3")
    monkeypatch.setenv("MOMOKA_PROGRESS", "Off")
    monkeypatch.setenv("MOMOKA_NO_AUTO_INSTALL", "yes")
    monkeypatch.setenv("MOMOKA_DATA", "~/sets")
    monkeypatch.setenv("MOMOKA_LLM_MODEL", " qwen ")
    assert settings.get_float("MOMOKA_LLM_MAX_FAILED") == 0.4
    assert settings.get_int("MOMOKA_THREADS") == 3
    assert settings.get_flag("MOMOKA_PROGRESS") is False
    assert settings.get_flag("MOMOKA_NO_AUTO_INSTALL") is True
    assert settings.get_path("MOMOKA_DATA") == Path.home() / "sets"
    assert settings.get_text("MOMOKA_LLM_MODEL") == "qwen"


@pytest.mark.parametrize("name, bad, allowed", [
    ("MOMOKA_LLM_MAX_FAILED", "1.5", "a number in [0, 1]"),
    ("MOMOKA_LLM_MAX_FAILED", "-0.1", "a number in [0, 1]"),
    ("MOMOKA_LLM_MAX_FAILED", "most", "a number in [0, 1]"),
    ("MOMOKA_LLM_TIMEOUT", "0", "a number of seconds > 0"),
    ("MOMOKA_LLM_TIMEOUT", "inf", "a number of seconds > 0"),
    ("MOMOKA_THREADS", "0", "a positive integer"),
    ("MOMOKA_THREADS", "2.5", "a positive integer"),
    ("MOMOKA_MERGE_FACTOR", "1", "an integer >= 2"),
    ("MOMOKA_VERIFY_MB", "lots", "a number of MiB >= 0"),
    ("MOMOKA_COMMIT_DOCS", "0", "a positive integer"),
    ("MOMOKA_PROGRESS", "maybe", "0/false/no/off (off) or 1/true/yes/on (on)"),
])
def test_a_bad_value_is_a_config_error_naming_the_variable(monkeypatch, name, bad, allowed):
    monkeypatch.setenv(name, bad)
    read = {"int": settings.get_int, "float": settings.get_float, "flag": settings.get_flag}[settings.SETTINGS[name].kind]
    with pytest.raises(ConfigError) as info:
        read(name)
    assert str(info.value) == f"{name} must be {allowed}, not {bad!r}"


def test_an_accessor_of_the_wrong_kind_or_an_unknown_name_is_a_programming_error():
    with pytest.raises(TypeError):
        settings.get_int("MOMOKA_LLM_TIMEOUT")
    with pytest.raises(KeyError):
        settings.get_text("MOMOKA_NOT_A_SETTING")


# ------------------------------------------------------------------ the readers use it
def test_llm_max_failed_outside_0_1_is_refused_not_clamped(monkeypatch):
    """Regression: 1.5 was clamped to 1 and -1 to 0 in silence."""
    from momoka.llm.base import max_failed_share

    monkeypatch.setenv("MOMOKA_LLM_MAX_FAILED", "1.5")
    with pytest.raises(ConfigError, match="MOMOKA_LLM_MAX_FAILED"):
        max_failed_share()
    monkeypatch.setenv("MOMOKA_LLM_MAX_FAILED", "-1")
    with pytest.raises(ConfigError, match="MOMOKA_LLM_MAX_FAILED"):
        max_failed_share()
    monkeypatch.setenv("MOMOKA_LLM_MAX_FAILED", "1")
    assert max_failed_share() == 1.0


def test_verify_budget_in_mib_and_a_bad_value_refused(monkeypatch):
    """Regression: a bad MOMOKA_VERIFY_MB fell back to 64 MiB in silence."""
    from momoka.store._verify import _budget

    assert _budget() == 64 * 1024 * 1024
    monkeypatch.setenv("MOMOKA_VERIFY_MB", "0.5")
    assert _budget() == 512 * 1024
    monkeypatch.setenv("MOMOKA_VERIFY_MB", "lots")
    with pytest.raises(ConfigError, match="MOMOKA_VERIFY_MB"):
        _budget()


def test_progress_flag_refuses_an_unknown_word(monkeypatch):
    """Regression: MOMOKA_PROGRESS=maybe was ignored in silence (progress stayed on)."""
    from momoka.progress import progress_enabled

    monkeypatch.setenv("MOMOKA_PROGRESS", "no")
    assert progress_enabled(True) is False
    monkeypatch.setenv("MOMOKA_PROGRESS", "maybe")
    with pytest.raises(ConfigError, match="MOMOKA_PROGRESS"):
        progress_enabled()


def test_commit_settings_of_a_new_index(monkeypatch):
    """Regression: MOMOKA_COMMIT_DOCS=many was a bare ValueError."""
    from momoka.methods.index_writer import IndexWriter
    from momoka.methods.indexer import Embedding
    from momoka.store.store import Store

    def writer():  # an index's writer over a new in-memory store: the settings are read as it is made
        st = Store.create(None)
        return IndexWriter(st.pipeline, st, Embedding(st, None))

    monkeypatch.setenv("MOMOKA_COMMIT_DOCS", "7")
    monkeypatch.setenv("MOMOKA_COMMIT_SECONDS", "2.5")
    w = writer()
    assert (w.commit_docs, w.commit_seconds) == (7, 2.5)
    monkeypatch.setenv("MOMOKA_COMMIT_DOCS", "many")
    with pytest.raises(ConfigError, match="MOMOKA_COMMIT_DOCS must be a positive integer, not 'many'"):
        writer()


def test_bad_device_variable_is_named(monkeypatch):
    from momoka.models.runtime import resolve_device

    monkeypatch.setenv("MOMOKA_DEVICE", "tpu")
    with pytest.raises(ConfigError, match="MOMOKA_DEVICE 'tpu'"):
        resolve_device()
    with pytest.raises(ConfigError, match="unknown device 'tpu'"):
        resolve_device("tpu")
    monkeypatch.setenv("MOMOKA_DEVICE", "CUDA:1")
    assert resolve_device() == "cuda:1"


def test_no_auto_install_words(monkeypatch, tmp_path):
    """MOMOKA_NO_AUTO_INSTALL is a flag like MOMOKA_PROGRESS: 'false' now means off (it meant on)."""
    from momoka.errors import ModelNotInstalledError
    from momoka.models.installer import ensure_installed

    monkeypatch.setenv("MOMOKA_NO_AUTO_INSTALL", "true")
    with pytest.raises(ModelNotInstalledError, match="MOMOKA_NO_AUTO_INSTALL is set"):
        ensure_installed(["minilm-l6-v2-int8"], path=tmp_path / "models")
