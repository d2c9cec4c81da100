"""One rule for every LLM-backed indexing stage: fallbacks are counted, bounded, reported and redone.

A stage (the LLM chunker, the title / keywords / summary enrichers with an LLM,
JERR extraction) asks an LLM for many items (paragraphs, titles, chunk views,
units). An answer it cannot use falls back to a deterministic output (sentence
chunks, the document's first heading or sentence, the chunk text, the offline
extraction). Each stage keeps a :class:`FallbackTally`:

* when more than the bound (``--llm-max-failed``, :func:`momoka.llm.base.max_failed_share`,
  default 0.25) of its answers so far were unusable, the stage raises
  :class:`~momoka.errors.LLMFallbackError` before it hands over (and the index
  commits) that batch's output;
* below it, :meth:`momoka.Index.add` / :meth:`~momoka.Index.extend` warn once per
  stage with the share (:meth:`FallbackTally.warning`);
* every document records, per stage, how many items were asked and which
  outputs are fallbacks (document metadata :data:`FALLBACKS_KEY`); the manifest's
  ``pipeline["llm_fallbacks"]`` sums them per stage (:func:`summarize`). Adding
  the same document again indexes it again (:func:`has_fallbacks`): the usable
  answers come from the LLM cache, the unusable ones were never kept there, so
  only the fallback items are asked again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import LLMFallbackError
from ..store.spec import FALLBACKS_KEY as _SPEC_FALLBACKS_KEY

__all__ = ["FALLBACKS_KEY", "FallbackTally", "has_fallbacks", "set_record", "summarize"]

#: Document metadata key: ``{stage: {"asked": n, "fallbacks": [item, ...]}}``.
FALLBACKS_KEY = _SPEC_FALLBACKS_KEY  # "llm_fallbacks", the key of the tallies in the pipeline spec


@dataclass
class FallbackTally:
    """The answers one LLM stage asked for and the ones it could not use.

    Args:
        stage: the stage's name in messages (``"llm chunker"``, ``"title"``, ...).
        key: its key in the document records (``"chunker"``, ``"title"``, ...).
        noun: what was asked, in messages (``"answers"``).
        outcome: what happened to the unusable ones, in the warning
            (``"those paragraphs were chunked by sentences"``).
        max_failed: the bound on the share of unusable answers (None: ``$MOMOKA_LLM_MAX_FAILED``, else 0.25).

    Counts accumulate until :meth:`reset`; ``records`` holds the per-document
    records of the documents seen since they were last taken (:meth:`take`).
    """

    stage: str
    key: str
    noun: str = "answers"
    outcome: str = "those items fell back"
    max_failed: float | None = None
    asked: int = 0
    failed: int = 0
    example: str | None = None
    records: dict = field(default_factory=dict)

    def reset(self, max_failed: float | None = None) -> None:
        """Start a new run (counts at zero) with bound ``max_failed`` (None: keep the current one)."""
        self.asked = self.failed = 0
        self.example = None
        self.records.clear()
        if max_failed is not None:
            self.max_failed = float(max_failed)

    def ask(self, doc_id: Any, n: int = 1) -> None:
        """``n`` items of document ``doc_id`` were asked of the LLM."""
        self.asked += n
        rec = self.records.setdefault(doc_id, {"asked": 0, "fallbacks": []})
        rec["asked"] += n

    def fail(self, doc_id: Any, item: Any, answer: Any = None) -> None:
        """The answer for ``item`` (a JSON value naming the output) of document ``doc_id`` was unusable."""
        self.failed += 1
        self.records.setdefault(doc_id, {"asked": 0, "fallbacks": []})["fallbacks"].append(item)
        if self.example is None:
            self.example = " ".join(str(answer).split())[:80] if answer is not None else "no answer"

    @property
    def bound(self) -> float:
        """The share of unusable answers above which the stage stops."""
        if self.max_failed is not None:
            return self.max_failed
        from ..llm.base import max_failed_share  # start-up: momoka.llm.base

        return max_failed_share()

    @property
    def share(self) -> float:
        """Unusable answers / answers asked (0 when none was asked)."""
        return self.failed / self.asked if self.asked else 0.0

    def _counts(self) -> str:
        return f"{self.failed} of {self.asked} {self.noun} ({100 * self.share:.1f} %) were unusable"

    def check(self) -> None:
        """Raise :class:`~momoka.errors.LLMFallbackError` when the share so far is above the bound."""
        if self.failed and self.share > self.bound:
            raise LLMFallbackError(
                f"{self.stage}: {self._counts()}, more than --llm-max-failed {100 * self.bound:g} %; e.g. "
                f"{self.example!r}; nothing of this stage was committed (is --llm-url serving a chat model? "
                "--llm-max-failed raises the bound)", stage=self.stage, share=self.share)

    def warning(self) -> str | None:
        """The one-line warning of a run that had unusable answers (None when it had none)."""
        if not self.failed:
            return None
        return f"{self.stage}: {self._counts()}; {self.outcome}"

    def take(self, doc_id: Any) -> dict | None:
        """The record of ``doc_id`` (``{"asked", "fallbacks"}``; None when nothing was asked), removed."""
        return self.records.pop(doc_id, None)


def set_record(metadata: dict, key: str, record: dict | None) -> None:
    """Write (or, for None, remove) stage ``key``'s record in a document's ``metadata``."""
    recs = dict(metadata.get(FALLBACKS_KEY) or {})
    if record is None:
        recs.pop(key, None)
    else:
        recs[key] = {"asked": int(record["asked"]), "fallbacks": list(record["fallbacks"])}
    if recs:
        metadata[FALLBACKS_KEY] = recs
    else:
        metadata.pop(FALLBACKS_KEY, None)


def has_fallbacks(metadata: dict) -> bool:
    """Whether a document's record lists any fallback output."""
    return any(r.get("fallbacks") for r in (metadata.get(FALLBACKS_KEY) or {}).values())


def summarize(entries: Iterable[Any]) -> dict:
    """Per stage, over document entries (with ``.metadata``): ``{"asked", "fallbacks", "share", "documents"}``
    (``documents``: how many documents have a fallback output of that stage)."""
    out: dict[str, dict] = {}
    for e in entries:
        for key, r in (e.metadata.get(FALLBACKS_KEY) or {}).items():
            s = out.setdefault(key, {"asked": 0, "fallbacks": 0, "documents": 0})
            s["asked"] += int(r.get("asked", 0))
            s["fallbacks"] += len(r.get("fallbacks") or ())
            s["documents"] += bool(r.get("fallbacks"))
    for s in out.values():
        s["share"] = round(s["fallbacks"] / s["asked"], 4) if s["asked"] else 0.0
    return out
