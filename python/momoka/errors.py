"""Exceptions raised by momoka.

Every error momoka raises on bad input, bad configuration or a failing
dependency derives from :class:`MomokaError`, so callers can catch one type.
The CLI turns any ``MomokaError`` into a one-line message and a non-zero exit.
Each area of the library keeps its classes in its own section below.
"""

from __future__ import annotations


class MomokaError(Exception):
    """Base class of every momoka error."""


# --- input -----------------------------------------------------------------


class InputError(MomokaError, ValueError):
    """The input (a document, a query, an argument) cannot be used."""


class EmptyInputError(InputError):
    """The input holds no text (empty, or whitespace only)."""


class BinaryInputError(InputError):
    """The input looks like binary data, not text."""


class EncodingError(InputError):
    """The input is not valid in the expected encoding.

    ``offset`` is the byte offset of the first invalid byte when known.
    """

    def __init__(self, message: str, offset: int | None = None):
        super().__init__(message)
        self.offset = offset


class InputTooLargeError(InputError):
    """The input exceeds a documented size limit."""


class ParseError(InputError):
    """A structured input (Markdown, HTML, JSON, model output) could not be parsed."""


class EncryptedInputError(InputError):
    """The input (a PDF, a Word document) is encrypted and cannot be read without its password."""


class NoTextLayerError(EmptyInputError):
    """A PDF has pages but no text layer (a scan or images only): it needs OCR first."""


class ConfigError(MomokaError, ValueError):
    """An option or parameter has an invalid value."""


# --- data sets and evaluation ----------------------------------------------


class DatasetError(MomokaError):
    """An evaluation data set is missing or malformed."""


# --- native kernels and search -----------------------------------------------


class SearchError(MomokaError):
    """The MCTS engine was used incorrectly (wrong order of calls, bad rewards)."""


class RewardError(SearchError, ValueError):
    """Rewards given to the MCTS engine are unusable (NaN, infinite, wrong count)."""


class JudgeError(SearchError):
    """The reward judge called by ``MCTS.run`` / ``MCTS.arun`` raised; the cause is chained."""


class KernelInputError(InputError):
    """A text kernel got an unusable argument: a non-str item in a batch, a NaN,
    a key of the wrong type, a negative bound. The message names the argument
    and, in batches, the index of the bad item."""


class OutlineError(KernelInputError):
    """Meta-chunker outlines cannot be recovered at all (no outlines, no text)."""


class BloomFormatError(KernelInputError):
    """Bytes given to ``BloomFilter.from_bytes`` are not a serialised filter."""


# --- models ----------------------------------------------------------------


class ModelError(MomokaError):
    """A model file is missing, corrupted or incompatible."""


class ModelNotInstalledError(ModelError):
    """A default model is not installed and cannot be fetched."""


class UnsupportedModelError(ModelError):
    """A model's architecture or quantisation type is not supported."""


# --- LLM layer -------------------------------------------------------------


class LLMError(MomokaError):
    """An LLM request failed for good (after retries)."""


class LLMTimeoutError(LLMError):
    """An LLM request or batch ran past its time budget."""


class LLMResponseError(LLMError):
    """An LLM answer could not be parsed or validated."""


class LLMCapabilityError(LLMError):
    """The LLM server cannot do what was asked (e.g. return log-probabilities)."""


class LLMHTTPError(LLMError):
    """The LLM server answered with an HTTP error status (``status``)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class LLMConnectionError(LLMError):
    """The LLM server could not be reached, or dropped the connection."""


class LLMFallbackError(LLMError):
    """More of an LLM stage's answers were unusable (and would fall back) than ``--llm-max-failed`` allows.

    ``stage`` names the stage (e.g. ``"llm chunker"``), ``share`` is the share of
    unusable answers so far; the stage's output was not committed.
    """

    def __init__(self, message: str, stage: str = "", share: float = 0.0):
        super().__init__(message)
        self.stage = stage
        self.share = share


class LLMBatchError(LLMError):
    """Some requests of a batch failed for good; ``results`` holds every item's outcome."""

    def __init__(self, message: str, results: list | None = None):
        super().__init__(message)
        self.results = results or []


# --- index and store -------------------------------------------------------


class StoreError(MomokaError):
    """A store directory is missing, corrupted or incompatible."""


class StoreVersionError(StoreError):
    """The store was written by a newer (or unknown) format version."""


class StoreMismatchError(StoreError):
    """The store was built with other models or settings than requested."""


class StoreLockedError(StoreError):
    """Another process holds the store open for writing."""


class ReadOnlyError(StoreError, AttributeError):
    """A change was asked of a read-only object: a store :class:`~momoka.store.Snapshot` (a store opened for
    reading, as the store of an index opened for reading, which its retrievers' ``corpus.store`` is).

    It is an ``AttributeError`` too: a snapshot has no write methods (``hasattr(snapshot, "save")`` is False).
    """


class StoreCorruptedError(StoreError):
    """A store file is damaged (size, header or checksum differ from the manifest).

    ``path`` is the damaged file (or None when the damage is not in one file).
    """

    def __init__(self, message: str, path: object = None):
        super().__init__(message)
        self.path = path


class IndexingError(MomokaError):
    """Some inputs could not be indexed (``skipped``: ``[(source, reason), ...]``); the rest were."""

    def __init__(self, message: str, skipped: list | None = None):
        super().__init__(message)
        self.skipped = list(skipped or [])


# --- methods ---------------------------------------------------------------


class MissingArtifactError(StoreError):
    """A retriever needs a store artifact (a view, a relation, a node table) the index was built without; the
    message names the ``--enrich``/``--relate`` option that makes it."""


class PathsMissingError(MissingArtifactError):
    """The store holds no Momoka-Map paths, and the Trail retriever needs them."""
