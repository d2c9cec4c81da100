"""The former path of :mod:`momoka.methods.corpus` (what a component receives: :class:`Corpus`,
:class:`Batch`), kept so that imports written against it keep working; "context" now names only what a
reader is given to answer from."""

from .corpus import DEFAULT_K, MAX_RETRIEVERS, Batch, Corpus, stored_document  # noqa: F401 (re-exported)

__all__ = ["Batch", "Corpus", "DEFAULT_K", "MAX_RETRIEVERS", "stored_document"]
