"""Loading evaluation sets in the layout of ``shared/data/<name>/``.

A set is a folder with ``documents.jsonl`` (``doc_id``, ``title``, ``text``)
and ``questions.jsonl`` (``qid``, ``doc_id``, ``question``, ``answers``,
``evidence``: ``[[start, end], ...]`` char offsets into that document's text,
plus per-set extra fields). Cross-document evidence is read from
``evidence_multi`` (``[[doc_id, start, end], ...]``) where a set has it.

How gold evidence counts differs by set. ``evidence_mode="all"``: every gold
span is needed (HotpotQA's two supporting paragraphs, DragonBall's reference
sentences). ``evidence_mode="any"``: the spans are alternatives (SQuAD's
annotator answers, every occurrence of an NQ or Qasper answer), so retrieving
one is enough.

The mode is never guessed from a folder name. It comes, in this order, from
the ``evidence_mode`` argument (``momoka eval --evidence-mode``), from the
set's own metadata (``"evidence_mode"`` in a ``dataset.json`` or ``stats.json``
beside the JSONL files), or from the evidence itself in the one unambiguous
case: when every evidence span of every question is an occurrence of one of
that question's answers, the occurrences are alternatives (``"any"``). Other
sets load with ``evidence_mode=None`` and ``evidence_mode_source`` saying why;
retrieval metrics on them raise :class:`~momoka.errors.DatasetError` until a
mode is given.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .. import settings
from .._answer_metrics import normalize_answer
from ..errors import DatasetError
from ..text import Document

#: The evidence modes a set can have.
EVIDENCE_MODES = ("all", "any")
#: Metadata files read for ``evidence_mode``, first found wins.
METADATA_FILES = ("dataset.json", "stats.json")

Span = tuple[str, int, int]  # (doc_id, start, end)


@dataclass(frozen=True)
class DocRecord:
    """One document of an evaluation set."""

    doc_id: str
    title: str
    text: str
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_document(self):
        """This record as a :class:`momoka.text.Document` (plain-text parsing)."""
        return Document.from_text(self.text, title=self.title or None, doc_id=self.doc_id)


@dataclass(frozen=True)
class Question:
    """One question of an evaluation set.

    ``gold`` holds the evidence as ``(doc_id, start, end)`` spans (empty when
    the set has none for this question); ``extra`` keeps the set's other fields.
    """

    qid: str
    doc_id: str
    question: str
    answers: tuple[str, ...]
    gold: tuple[Span, ...]
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def has_evidence(self) -> bool:
        return bool(self.gold)


@dataclass
class Dataset:
    """An evaluation set: its documents, its questions and how evidence counts."""

    name: str
    path: Path
    documents: list[DocRecord]
    questions: list[Question]
    evidence_mode: str | None = "all"
    evidence_mode_source: str = "argument"

    def __post_init__(self) -> None:
        self._by_id = {d.doc_id: d for d in self.documents}

    def require_evidence_mode(self) -> str:
        """The evidence mode, or :class:`DatasetError` saying how to give one."""
        if self.evidence_mode is None:
            raise DatasetError(
                f"{self.name}: evidence mode unknown ({self.evidence_mode_source}); give --evidence-mode all|any "
                "(all: every gold span is needed; any: the spans are alternatives) or put "
                '"evidence_mode" in the set\'s dataset.json')
        return self.evidence_mode

    def document(self, doc_id: str) -> DocRecord:
        try:
            return self._by_id[doc_id]
        except KeyError:
            raise DatasetError(f"{self.name}: no document {doc_id!r}") from None

    def questions_with_evidence(self) -> list[Question]:
        return [q for q in self.questions if q.gold]

    def __repr__(self) -> str:
        return (
            f"Dataset({self.name!r}, documents={len(self.documents)}, "
            f"questions={len(self.questions)}, evidence_mode={self.evidence_mode!r})"
        )


def data_roots() -> list[Path]:
    """Folders searched for a set given by name: ``$MOMOKA_DATA``, then
    ``./shared/data`` and ``../shared/data`` relative to the working directory."""
    roots = []
    env = settings.get_path("MOMOKA_DATA")
    if env is not None:
        roots.append(env)
    cwd = Path.cwd()
    roots += [cwd / "shared" / "data", cwd.parent / "shared" / "data"]
    return roots


def find_shared_data(repo_root: str | os.PathLike) -> Path | None:
    """The shared data folder for a checkout at ``repo_root``: ``$MOMOKA_SHARED_DATA``
    when it names a folder, else ``<repo_root>/../shared/data``; None when neither exists."""
    env = settings.get_path("MOMOKA_SHARED_DATA")
    candidates = [env] if env is not None else []
    candidates.append(Path(repo_root).parent / "shared" / "data")
    for c in candidates:
        if c.is_dir():
            return c
    return None


def resolve_dataset_path(name_or_path: str | os.PathLike) -> Path:
    """The folder of a set given as a path or as a name found in :func:`data_roots`."""
    p = Path(name_or_path).expanduser()
    if p.is_dir():
        return p
    if not p.is_absolute() and len(p.parts) == 1:
        for root in data_roots():
            if (root / p).is_dir():
                return root / p
    raise DatasetError(
        f"no data set at {str(name_or_path)!r} (give a folder holding documents.jsonl and "
        "questions.jsonl, or a set name under $MOMOKA_DATA)"
    )


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    if not path.is_file():
        raise DatasetError(f"missing file {path}")
    with path.open("r", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise DatasetError(f"{path}:{lineno}: expected a JSON object")
            yield lineno, obj


def _require(obj: dict, key: str, where: str, typ: type | tuple[type, ...]) -> Any:
    if key not in obj:
        raise DatasetError(f"{where}: missing field {key!r}")
    val = obj[key]
    if not isinstance(val, typ):
        raise DatasetError(f"{where}: field {key!r} has type {type(val).__name__}")
    return val


def load_dataset(
    name_or_path: str | os.PathLike,
    *,
    evidence_mode: str | None = None,
    limit: int | None = None,
) -> Dataset:
    """Load an evaluation set.

    Args:
        name_or_path: a folder (``../shared/data/squad_v1_dev_half_a``) or a
            set name looked up in :func:`data_roots`.
        evidence_mode: ``"all"`` or ``"any"`` (see the module docstring);
            default: the set's metadata, else inferred where unambiguous, else None.
        limit: keep only the first ``limit`` questions (documents are all kept).

    Raises:
        DatasetError: a missing file, invalid JSON, a missing field, or
            evidence offsets outside their document.
    """
    path = resolve_dataset_path(name_or_path)
    name = path.name
    if evidence_mode is not None and evidence_mode not in EVIDENCE_MODES:
        raise DatasetError(f"evidence_mode must be 'all' or 'any', not {evidence_mode!r}")

    docs: list[DocRecord] = []
    lengths: dict[str, int] = {}
    for lineno, obj in _read_jsonl(path / "documents.jsonl"):
        where = f"{path / 'documents.jsonl'}:{lineno}"
        doc_id = str(_require(obj, "doc_id", where, (str, int)))
        text = _require(obj, "text", where, str)
        if doc_id in lengths:
            raise DatasetError(f"{where}: duplicate doc_id {doc_id!r}")
        title = obj.get("title") or ""
        extra = {k: v for k, v in obj.items() if k not in ("doc_id", "title", "text")}
        docs.append(DocRecord(doc_id, str(title), text, extra))
        lengths[doc_id] = len(text)
    if not docs:
        raise DatasetError(f"{path / 'documents.jsonl'} holds no documents")

    questions: list[Question] = []
    for lineno, obj in _read_jsonl(path / "questions.jsonl"):
        where = f"{path / 'questions.jsonl'}:{lineno}"
        qid = str(_require(obj, "qid", where, (str, int)))
        doc_id = str(_require(obj, "doc_id", where, (str, int)))
        question = _require(obj, "question", where, str)
        answers = obj.get("answers") or []
        if isinstance(answers, str):
            answers = [answers]
        raw_multi = obj.get("evidence_multi")
        spans: list[Span] = []
        if raw_multi:
            for item in raw_multi:
                if not (isinstance(item, list) and len(item) == 3):
                    raise DatasetError(f"{where}: evidence_multi items must be [doc_id, start, end]")
                spans.append((str(item[0]), int(item[1]), int(item[2])))
        else:
            for item in obj.get("evidence") or []:
                if not (isinstance(item, list) and len(item) == 2):
                    raise DatasetError(f"{where}: evidence items must be [start, end]")
                spans.append((doc_id, int(item[0]), int(item[1])))
        for d, s, e in spans:
            if d not in lengths:
                raise DatasetError(f"{where}: evidence names unknown document {d!r}")
            if not 0 <= s < e <= lengths[d]:
                raise DatasetError(
                    f"{where}: evidence span [{s}, {e}] outside document {d!r} of length {lengths[d]}"
                )
        if doc_id not in lengths and spans:
            raise DatasetError(f"{where}: unknown document {doc_id!r}")
        extra = {
            k: v
            for k, v in obj.items()
            if k not in ("qid", "doc_id", "question", "answers", "evidence", "evidence_multi")
        }
        questions.append(
            Question(qid, doc_id, question, tuple(str(a) for a in answers), tuple(dict.fromkeys(spans)), extra)
        )
        if limit is not None and len(questions) >= limit:
            break
    if evidence_mode is not None:
        mode, source = evidence_mode, "argument"
    else:
        mode, source = _metadata_mode(path)
        if mode is None:
            mode, source = _inferred_mode(questions, {d.doc_id: d.text for d in docs})
    return Dataset(name=name, path=path, documents=docs, questions=questions, evidence_mode=mode,
                   evidence_mode_source=source)


def _metadata_mode(path: Path) -> tuple[str | None, str]:
    """``evidence_mode`` from the set's metadata file, with where it was read."""
    for fname in METADATA_FILES:
        f = path / fname
        if not f.is_file():
            continue
        try:
            meta = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DatasetError(f"{f}: unreadable metadata ({exc})") from None
        mode = meta.get("evidence_mode") if isinstance(meta, dict) else None
        if mode is None:
            continue
        if mode not in EVIDENCE_MODES:
            raise DatasetError(f"{f}: evidence_mode must be 'all' or 'any', not {mode!r}")
        return mode, f"metadata {fname}"
    return None, ""


def _inferred_mode(questions: list[Question], texts: dict[str, str]) -> tuple[str | None, str]:
    """``"any"`` when every evidence span is an occurrence of one of its question's answers, else None."""
    with_evidence = [q for q in questions if q.gold]
    if not with_evidence:
        return None, "no question has evidence"
    for q in with_evidence:
        answers = {normalize_answer(a) for a in q.answers}
        for d, s, e in q.gold:
            if normalize_answer(texts[d][s:e]) not in answers:
                return None, (f"not in the set's metadata, and its evidence is not only answer occurrences "
                              f"(question {q.qid})")
    return "any", "inferred: every evidence span is an occurrence of an answer (alternatives)"
