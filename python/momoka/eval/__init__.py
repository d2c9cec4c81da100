"""momoka.eval: evaluation sets, retrieval and answer metrics, chunking statistics."""

from .datasets import EVIDENCE_MODES, Dataset, DocRecord, Question, load_dataset, resolve_dataset_path
from .intervals import Interval, bootstrap_mean, paired_bootstrap
from .metrics import (
    RetrievalReport,
    answer_metrics,
    bleu,
    evaluate_retrieval,
    evidence_containment,
    exact_match,
    format_table,
    merge_spans,
    normalize_answer,
    question_metrics,
    rouge_l,
    token_f1,
)

__all__ = [
    "EVIDENCE_MODES",
    "Dataset",
    "DocRecord",
    "Interval",
    "Question",
    "RetrievalReport",
    "answer_metrics",
    "bleu",
    "bootstrap_mean",
    "evaluate_retrieval",
    "evidence_containment",
    "exact_match",
    "format_table",
    "load_dataset",
    "merge_spans",
    "normalize_answer",
    "paired_bootstrap",
    "question_metrics",
    "resolve_dataset_path",
    "rouge_l",
    "token_f1",
]
