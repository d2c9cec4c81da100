"""momoka.index: the persistent :class:`Store`, the native BM25 index and the :class:`Index` pipeline.

* :class:`BM25` -- Okapi BM25 in the native core (add/delete in place, threaded top-k).
* :class:`Store` -- a versioned, atomically written directory of named artifacts: the
  :class:`ChunkTable`, :class:`VectorView` (+ HNSW), :class:`BM25View`, :class:`Relation`
  and :class:`NodeTable`, with a single-writer lock.
* :class:`Index` -- documents in (paths, Documents, dicts), a chunker, enrichers and
  relators run over them, any registered retriever out: ``Index.build(...)``,
  ``Index.open(path)``, ``.search(query, k, retriever, doc_ids)`` (a
  :class:`momoka.methods.Result`), ``.add``, ``.extend``, ``.delete``, ``.save``.
"""

from .api import DEFAULT_RETRIEVER, Index
from .bm25 import BM25, ENGLISH_STOPWORDS, tokenize
from .bm25_view import BM25View
from .chunk_table import ChunkTable
from .node_table import NodeTable
from .relations import Relation
from .store import FORMAT_VERSION, DocEntry, Store, read_manifest
from .vectors import VectorView

__all__ = [
    "BM25",
    "BM25View",
    "ChunkTable",
    "DEFAULT_RETRIEVER",
    "DocEntry",
    "ENGLISH_STOPWORDS",
    "FORMAT_VERSION",
    "Index",
    "NodeTable",
    "Relation",
    "Store",
    "VectorView",
    "read_manifest",
    "tokenize",
]
