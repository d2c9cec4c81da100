"""onnxruntime sessions: execution providers, thread counts, clear load errors.

Every ONNX model in :mod:`momoka.models` (embedder, cross-encoder, causal LM)
is opened through :func:`create_session`, so device selection and thread
configuration behave the same everywhere:

- ``device=None`` reads ``MOMOKA_DEVICE`` (default ``"cpu"``);
- ``"cpu"`` uses ``CPUExecutionProvider``;
- ``"cuda"`` or ``"cuda:N"`` uses ``CUDAExecutionProvider`` on GPU ``N`` (CPU as
  fallback for unsupported nodes), with float32 products in float32 (TensorFloat-32
  off: the GPU's scores agree with the CPU's to float32 rounding), and raises :class:`~momoka.errors.ConfigError`
  when the installed onnxruntime has no CUDA provider (``pip install
  onnxruntime-gpu``) or when its CUDA provider cannot start (onnxruntime itself
  would then run the whole model on the CPU without saying so). The CUDA and
  cuDNN libraries of NVIDIA's pip packages (``onnxruntime-gpu[cuda,cudnn]``)
  are loaded first with ``onnxruntime.preload_dlls()``, since onnxruntime's
  CUDA provider does not find them on its own;
- ``threads=None`` reads ``MOMOKA_THREADS`` (default: onnxruntime's choice, one
  thread per physical core).
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .. import settings
from .._files import sha256_file
from .._validate import check_int
from ..errors import ConfigError, ModelError

__all__ = [
    "DeviceWarning",
    "resolve_device",
    "resolve_providers",
    "resolve_threads",
    "create_session",
    "open_session",
    "cuda_available",
    "sha256_file",
    "length_groups",
]


class DeviceWarning(UserWarning):
    """The model runs on the requested device only in part (some of its operators fall back to the CPU)."""


def _ort():
    try:
        import onnxruntime  # start-up: onnxruntime
    except ImportError as exc:  # pragma: no cover - declared dependency
        raise ModelError(
            "onnxruntime is not installed; momoka's models need it (pip install onnxruntime)"
        ) from exc
    return onnxruntime


def cuda_available() -> bool:
    """True when the installed onnxruntime offers ``CUDAExecutionProvider``."""
    return "CUDAExecutionProvider" in _ort().get_available_providers()


def resolve_device(device: str | None = None) -> str:
    """Normalise a device name: ``None`` -> ``$MOMOKA_DEVICE`` or ``"cpu"``.

    Returns ``"cpu"`` or ``"cuda:N"``. Raises ConfigError on anything else.
    """
    source = "device"
    if device is None:
        device, source = settings.get_text("MOMOKA_DEVICE"), "MOMOKA_DEVICE"
    if not isinstance(device, str):
        raise ConfigError(f"device must be a string such as 'cpu' or 'cuda', got {device!r}")
    d = device.strip().lower()
    if d == "cpu":
        return "cpu"
    if d in ("cuda", "gpu"):
        return "cuda:0"
    if d.startswith("cuda:"):
        idx = d[5:]
        if idx.isdigit():
            return f"cuda:{int(idx)}"
    raise ConfigError(f"unknown {source} {device!r}: use 'cpu', 'cuda' or 'cuda:N'")


def resolve_providers(device: str | None = None) -> list[Any]:
    """The onnxruntime provider list for ``device`` (see module docstring)."""
    d = resolve_device(device)
    if d == "cpu":
        return ["CPUExecutionProvider"]
    if not cuda_available():
        raise ConfigError(
            f"device {d!r} requested but this onnxruntime has no CUDAExecutionProvider "
            f"(available: {', '.join(_ort().get_available_providers())}); "
            "install onnxruntime-gpu, or use device='cpu'"
        )
    # use_tf32=0: float32 matrix products in float32, not TensorFloat-32 (10-bit mantissa), so scores on the
    # GPU match the CPU's to float32 rounding (measured: docs/models.md, CUDA provider)
    return [("CUDAExecutionProvider", {"device_id": int(d.split(":")[1]), "use_tf32": "0"}), "CPUExecutionProvider"]


_preload_report: str | None = None


def _preload_cuda_libraries() -> str:
    """Load the CUDA/cuDNN libraries of NVIDIA's pip packages once (``onnxruntime.preload_dlls``).

    Returns what onnxruntime printed while doing so (the libraries it could
    not load), for the error raised when the CUDA provider then fails.
    """
    global _preload_report
    if _preload_report is None:
        ort = _ort()
        buf = io.StringIO()
        if hasattr(ort, "preload_dlls"):  # onnxruntime >= 1.21
            with contextlib.redirect_stdout(buf):
                try:
                    ort.preload_dlls()
                except Exception as exc:  # a missing folder or library: reported if CUDA then fails
                    print(f"preload_dlls: {exc}")
        _preload_report = " ".join(buf.getvalue().split())
    return _preload_report


def open_session(path: str | os.PathLike, options: Any, device: str | None = None,
                 disabled_optimizers: Sequence[str] = ()):
    """``onnxruntime.InferenceSession(path, options)`` on ``device`` (see the module docstring),
    without the graph optimizers named in ``disabled_optimizers``.

    Raises ConfigError for an unknown device or one this onnxruntime cannot
    use, including a CUDA provider that fails to start (onnxruntime would fall
    back to the CPU silently). Errors of the model itself propagate as
    onnxruntime raises them; :func:`create_session` turns them into ModelError.
    """
    providers = resolve_providers(device)
    extra = {"disabled_optimizers": list(disabled_optimizers)} if disabled_optimizers else {}
    if providers[0] == "CPUExecutionProvider":
        return _ort().InferenceSession(str(path), sess_options=options, providers=providers, **extra)
    report = _preload_cuda_libraries()
    session = _ort().InferenceSession(str(path), sess_options=options, providers=providers, **extra)
    if "CUDAExecutionProvider" not in session.get_providers():
        raise ConfigError(
            f"device {resolve_device(device)!r} requested but onnxruntime's CUDA provider did not start "
            f"(the session got only {', '.join(session.get_providers())}): the CUDA 12/13 and cuDNN 9 "
            "libraries onnxruntime-gpu needs were not found (pip install 'onnxruntime-gpu[cuda,cudnn]', "
            "or put them on LD_LIBRARY_PATH), or no GPU is visible"
            + (f"; onnxruntime.preload_dlls said: {report}" if report else "")
        )
    return session


def resolve_threads(threads: int | None = None) -> int | None:
    """Intra-op thread count: ``threads``, else ``$MOMOKA_THREADS``, else None (onnxruntime default)."""
    if threads is None:
        return settings.get_int("MOMOKA_THREADS")
    return check_int(threads, "threads", minimum=1)


def create_session(path: str | os.PathLike, *, device: str | None = None, threads: int | None = None,
                   spinning: bool = True, disabled_optimizers: Sequence[str] = ()):
    """Open an ONNX model with onnxruntime, turning load failures into ModelError.

    ``spinning=False`` stops the intra-op threads from spin-waiting for work
    between operators (``session.intra_op.allow_spinning``): they sleep
    instead, which costs a wake-up per operator but leaves the cores to other
    work between forward passes (the embedder's choice: measured in
    ``bench/micro/bench_index_e2e.py``).

    ``disabled_optimizers``: names of onnxruntime graph transformers not to run
    (e.g. ``"SkipLayerNormFusion"``, whose fused CPU kernel is slower than the
    ``Add`` + ``LayerNormalization`` it replaces in the fused embedder; a model
    names them in its ``config.json``, see :mod:`momoka.models.onnx_embedder`).

    A missing file, a truncated or corrupted file, or a graph onnxruntime
    cannot run all raise :class:`~momoka.errors.ModelError` naming the file.
    """
    ort = _ort()
    p = Path(path)
    if not p.is_file():
        raise ModelError(f"model file not found: {p}")
    n = resolve_threads(threads)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    if not spinning:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if n is not None:
        so.intra_op_num_threads = n
        so.inter_op_num_threads = 1
    try:
        return open_session(p, so, device, disabled_optimizers)
    except ConfigError:  # the device, not the model
        raise
    except Exception as exc:  # onnxruntime raises its own pybind exception types
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(
            f"cannot load ONNX model {p} ({p.stat().st_size} bytes): {msg}. "
            "The file may be corrupted or truncated; reinstall it with `momoka models install --force`"
        ) from exc


def length_groups(order: Sequence[int], length: Callable[[int], int], batch_tokens: int,
                  max_items: int | None = None) -> Iterator[list[int]]:
    """Runs of ``order`` (sorted by ascending length) for padded batches.

    A run grows while its count times the next item's length (the padded size
    of the batch, since the newest item is the longest) stays within
    ``batch_tokens`` and, when given, its count stays within ``max_items``; a
    run holds at least one item. Shared by the embedder's bucketed batches and
    the causal LM's batched prefixes.
    """
    j = 0
    while j < len(order):
        group = [order[j]]
        j += 1
        while (j < len(order) and (max_items is None or len(group) < max_items)
               and length(order[j]) * (len(group) + 1) <= batch_tokens):
            group.append(order[j])
            j += 1
        yield group
