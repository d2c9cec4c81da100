"""momoka.index: the native BM25 index, the persistent :class:`Store` and the :class:`Index` API.

* :class:`BM25` -- Okapi BM25 in the native core (add/delete in place, threaded top-k).
* :class:`Store` -- a versioned, atomically written directory of named artifacts: the
  :class:`ChunkTable`, :class:`VectorView` (+ HNSW), :class:`BM25View`, :class:`Relation`
  and :class:`NodeTable`, with a single-writer lock.
* :class:`Index` -- documents in (paths, Documents, dicts), ranked :class:`Hit` out:
  ``Index.build(...)``, ``Index.open(path)``, ``.search(query, k, method, doc_ids)``,
  ``.add``, ``.delete``, ``.save``.
"""

from .api import METHODS, Hit, Index
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
           "DocEntry",
           "ENGLISH_STOPWORDS",
           "FORMAT_VERSION",
           "METHODS",
           "Hit",
           "Index",
           "NodeTable",
           "Relation",
           "Store",
           "read_manifest",
           "tokenize",
           "VectorView",
]
