"""Every ``MOMOKA_*`` environment variable momoka reads: one table, one reader, one message for a bad value.

:data:`SETTINGS` lists each variable with its type, default, the values it takes, what it does and
the part of momoka that reads it (``docs/configuration.md`` shows the same table; a test keeps them
in step). The accessors (:func:`get_int`, :func:`get_float`, :func:`get_flag`, :func:`get_text`,
:func:`get_choice`, :func:`get_path`) read the environment when called, never at import, so a variable set later (or
by a test) is seen. An unset or blank variable gives the default; a value outside what the table
allows is a :class:`~momoka.errors.ConfigError` naming the variable and what it takes, never a
silent fall back or clamp. No other module of the package reads ``MOMOKA_*`` variables.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NamedTuple

from ._validate import check_float, check_int, describe_range
from .errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["Setting", "SETTINGS", "get_int", "get_float", "get_flag", "get_text", "get_choice", "get_path", "default"]

#: The words a flag takes for off and on.
FLAG_OFF = ("0", "false", "no", "off")
FLAG_ON = ("1", "true", "yes", "on")


class Setting(NamedTuple):
    """One environment variable: ``kind`` is ``int``, ``float``, ``flag``, ``text``, ``choice`` or ``path``;
    numbers lie in [``minimum``, ``maximum``] (``above``: ``minimum`` itself excluded); a choice is one of
    ``choices``; ``reader`` is the module that reads it."""

    name: str
    kind: str
    default: Any
    description: str
    reader: str
    minimum: float | None = None
    maximum: float | None = None
    above: bool = False
    unit: str = ""
    values: str = ""
    choices: tuple[str, ...] = ()

    def allowed(self) -> str:
        """The values it takes, in words (``values`` when the table gives them)."""
        if self.values:
            return self.values
        if self.kind in ("int", "float"):
            return describe_range(self.minimum, self.maximum, integer=self.kind == "int", above=self.above,
                                  unit=self.unit)
        if self.kind == "flag":
            return f"{'/'.join(FLAG_OFF)} (off) or {'/'.join(FLAG_ON)} (on)"
        if self.kind == "choice":
            return f"{', '.join(self.choices[:-1])} or {self.choices[-1]}"
        return "a path" if self.kind == "path" else "text"


def _table(*rows: Setting) -> dict[str, Setting]:
    return {s.name: s for s in rows}


#: The variables, by name (the order of ``docs/configuration.md``).
SETTINGS: dict[str, Setting] = _table(
    # where momoka keeps its files
    Setting("MOMOKA_HOME", "path", None, "momoka's cache root: installed models (`models/`), the LLM response cache, "
            "computed model outputs (default `$XDG_CACHE_HOME/momoka`, else `~/.cache/momoka`)", "momoka.models.catalog"),
    Setting("MOMOKA_CACHE_DIR", "path", None, "computed model outputs reused across runs, e.g. the `ppl` chunker's "
            "log-probs (default `$MOMOKA_HOME/cache`)", "momoka.models.catalog"),
    Setting("MOMOKA_NO_AUTO_INSTALL", "flag", False, "on: a missing default model is an error naming "
            "`momoka models install` instead of being installed on first use", "momoka.models.installer"),
    # local models
    Setting("MOMOKA_DEVICE", "text", "cpu", "where ONNX models run (`gpu` is `cuda`, `cuda` is `cuda:0`)",
            "momoka.models.runtime", values="cpu, cuda, gpu or cuda:N"),
    Setting("MOMOKA_THREADS", "int", None, "threads of a model session (default: onnxruntime's choice; the "
            "embedder runs this many forward passes at once)", "momoka.models.runtime", minimum=1),
    Setting("MOMOKA_LLM_RUNTIME", "choice", "auto", "what generates text with the local causal LM: `native` is "
            "momoka's C++ decoder on the GGUF the model was converted from (same logits as `onnx`, decoding "
            "about 3x faster), `llama` llama.cpp (the `llama` extra, `llama-cpp-python`) on that GGUF, `onnx` "
            "momoka's loop on onnxruntime, `auto` the native decoder where the GGUF is found and the CPU has "
            "AVX2 or AVX-512, else llama.cpp where it is installed and faster for the call, else onnxruntime "
            "(log-probs always run on onnxruntime)", "momoka.models.causal_generate",
            choices=("auto", "onnx", "llama", "native")),
    Setting("MOMOKA_LLM_ACTIVATIONS", "choice", "int8", "activations of the native decoder's products with "
            "Q4_K and Q6_K weights (the opt-in Qwen2.5 models): `int8` quantises them per 256 values as "
            "llama.cpp does and multiplies with integer dot products, `float32` keeps them float32 (the "
            "quantised model's exact logits, about 2-3x slower prefill)", "momoka.models.causal_native",
            choices=("int8", "float32")),
    Setting("MOMOKA_RERANK_BASE_URL", "text", None, "API root of the endpoint reranker (requests go to "
            "`{url}/rerank`)", "momoka.models.rerank_endpoint", values="an http(s) URL"),
    Setting("MOMOKA_RERANK_MODEL", "text", None, "model name sent to the endpoint reranker",
            "momoka.models.rerank_endpoint"),
    Setting("MOMOKA_RERANK_API_KEY", "text", None, "bearer token of the endpoint reranker",
            "momoka.models.rerank_endpoint"),
    # LLMs
    Setting("MOMOKA_LLM_BASE_URL", "text", None, "OpenAI-compatible API root; when set, components whose backend "
            "is auto use the LLM (else the local model or an offline backend)", "momoka.llm.openai_client",
            values="an http(s) URL"),
    Setting("MOMOKA_LLM_MODEL", "text", None, "model name at the endpoint (default: the one model the server "
            "lists)", "momoka.llm.openai_client"),
    Setting("MOMOKA_LLM_API_KEY", "text", None, "bearer token of the LLM endpoint", "momoka.llm.openai_client"),
    Setting("MOMOKA_LLM_LOCAL_MODEL", "text", None, "the local causal LM of every LLM-backed stage: a causal LM "
            "id of `momoka models list` (`llm-qwen2.5-1.5b`, `llm-qwen2.5-0.5b`) or a model folder (default: "
            "`smollm2-135m-instruct`)", "momoka.models.installer",
            values="a causal LM id or a model folder"),
    Setting("MOMOKA_LLM_CACHE", "path", None, "the LLM response cache file (default `$MOMOKA_HOME/llm.sqlite`)",
            "momoka.llm.cache"),
    Setting("MOMOKA_LLM_TIMEOUT", "float", 120.0, "seconds per LLM request", "momoka.llm.base",
            minimum=0, above=True, unit="seconds"),
    Setting("MOMOKA_LLM_DEADLINE", "float", None, "seconds an LLM client (one LLM stage) may take in all "
            "(default: none)", "momoka.llm.base", minimum=0, above=True, unit="seconds"),
    Setting("MOMOKA_LLM_MAX_FAILED", "float", 0.25, "share of unusable LLM answers above which an LLM stage "
            "stops with an error (below it, fallbacks are used and counted)", "momoka.llm.base",
            minimum=0, maximum=1),
    Setting("MOMOKA_LLM_GLOBAL_CONCURRENCY", "int", 16, "LLM requests in flight over all workers of a "
            "distributed (Ray) build", "momoka.methods.distributed", minimum=1),
    Setting("MOMOKA_RAY_WRITE_PARTS", "flag", True, "Ray workers write their batches' vectors into the store's "
            "staging folder, which the driver adopts (off: they ship the vectors to the driver)",
            "momoka.methods.distributed"),
    # indexing and the store
    Setting("MOMOKA_COMMIT_DOCS", "int", 256, "documents an `add(..., commit=True)` indexes between two saved "
            "generations", "momoka.methods.index_writer", minimum=1),
    Setting("MOMOKA_COMMIT_SECONDS", "float", 60.0, "seconds after which such an add saves a generation "
            "(whichever of the two comes first)", "momoka.methods.index_writer", minimum=0, unit="seconds"),
    Setting("MOMOKA_MERGE_FACTOR", "int", 10, "segments of one level merged into one after a commit",
            "momoka.store.segments", minimum=2),
    Setting("MOMOKA_MERGE_BACKGROUND", "flag", True, "merges of segments run in a background thread of the "
            "writer (off: in the save, each as a commit of its own)", "momoka.store.segments"),
    Setting("MOMOKA_VERIFY_MB", "float", 64.0, "MiB of eagerly read store files whose sha256 is verified "
            "on every open (the rest block by block as it is read)", "momoka.store._verify", minimum=0, unit="MiB"),
    Setting("MOMOKA_MAX_INPUT_BYTES", "int", 100 * 1024 * 1024, "bytes: input files larger than this are refused "
            "(`InputTooLargeError`)", "momoka.text.io", minimum=0),
    # serving
    Setting("MOMOKA_SERVE_TOKEN", "text", None, "the bearer token `momoka serve` requires of every request "
            "(`Authorization: Bearer TOKEN`) when `--token` is not given; a server on an address other than "
            "loopback needs one", "momoka.cli.serve", values="16 or more of A-Z a-z 0-9 - . _ ~ + / ="),
    # progress and evaluation
    Setting("MOMOKA_PROGRESS", "flag", None, "progress reporting forced off or on (default: on)",
            "momoka.progress"),
    Setting("MOMOKA_PROGRESS_INTERVAL", "float", None, "seconds between plain progress lines when stderr is "
            "not a terminal", "momoka.progress", minimum=0, unit="seconds"),
    Setting("MOMOKA_DATA", "path", None, "folder searched first for an evaluation set given by name",
            "momoka.eval.datasets"),
    Setting("MOMOKA_SHARED_DATA", "path", None, "the shared data folder of a checkout (default "
            "`<checkout>/../shared/data`)", "momoka.eval.datasets"),
)


def _setting(name: str, kind: str) -> Setting:
    try:
        s = SETTINGS[name]
    except KeyError:
        raise KeyError(f"{name} is not in momoka.settings.SETTINGS") from None
    if s.kind != kind:
        raise TypeError(f"{name} is a {s.kind} setting, not {kind}")
    return s


def _raw(name: str) -> str:
    return os.environ.get(name, "").strip()


def _bad(s: Setting, raw: str) -> ConfigError:
    return ConfigError(f"{s.name} must be {s.allowed()}, not {raw!r}")


def default(name: str) -> Any:
    """The value of ``name`` when it is unset (as in :data:`SETTINGS`)."""
    return SETTINGS[name].default


def get_int(name: str) -> int | None:
    """The integer in ``$name``, else its default; a bad value is a ConfigError naming the variable."""
    s = _setting(name, "int")
    raw = _raw(name)
    if not raw:
        return s.default
    try:
        return check_int(int(raw), name, minimum=_int(s.minimum), maximum=_int(s.maximum))
    except (ValueError, ConfigError):
        raise _bad(s, raw) from None


def _int(x: float | None) -> int | None:
    return None if x is None else int(x)


def get_float(name: str) -> float | None:
    """The number in ``$name``, else its default; a bad value is a ConfigError naming the variable."""
    s = _setting(name, "float")
    raw = _raw(name)
    if not raw:
        return s.default
    try:
        return check_float(float(raw), name, minimum=s.minimum, maximum=s.maximum, above=s.above)
    except (ValueError, ConfigError):
        raise _bad(s, raw) from None


def get_flag(name: str) -> bool | None:
    """``$name`` as a bool (0/false/no/off or 1/true/yes/on, any case), else its default."""
    s = _setting(name, "flag")
    raw = _raw(name).lower()
    if not raw:
        return s.default
    if raw in FLAG_OFF:
        return False
    if raw in FLAG_ON:
        return True
    raise _bad(s, raw)


def get_text(name: str) -> str | None:
    """``$name`` (stripped), else its default."""
    s = _setting(name, "text")
    return _raw(name) or s.default


def get_choice(name: str) -> str | None:
    """``$name`` (stripped, lower case) when it is one of the setting's choices, else its default; any other
    value is a ConfigError naming the variable and the choices."""
    s = _setting(name, "choice")
    raw = _raw(name)
    if not raw:
        return s.default
    if raw.lower() not in s.choices:
        raise _bad(s, raw)
    return raw.lower()


def get_path(name: str) -> Path | None:
    """``$name`` as a path (``~`` expanded), else its default."""
    s = _setting(name, "path")
    raw = _raw(name)
    if not raw:
        return s.default
    from pathlib import Path  # start-up: pathlib, which the CLI's start-up does not need

    return Path(raw).expanduser()
