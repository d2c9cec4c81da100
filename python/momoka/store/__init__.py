"""momoka.store: the persistent :class:`Store` of named artifacts and the native BM25 index.

* :class:`BM25` -- Okapi BM25 in the native core (add/delete in place, pruned exact top-k).
* :class:`Store` -- a versioned, atomically written directory of named artifacts: the
  :class:`ChunkTable`, :class:`VectorView` (+ HNSW), :class:`BM25View`, :class:`Relation`
  and :class:`NodeTable`, kept as append-only segments (a commit writes only its changes;
  :mod:`momoka.store.segments`). Opened for reading it is a :class:`Snapshot` (one leased
  generation, read-only); created, or opened with ``writable=True``, it is the
  :class:`StoreWriter` (the single-writer lock, changes, commits and merges).
* :class:`Delta` -- the changes of one batch built apart, by its own ids; :meth:`Store.apply`
  renumbers and adds them.

The pipeline that fills a store with registered components and searches it,
:class:`momoka.Index`, lives one layer up (:mod:`momoka.methods.pipeline`).
"""

from .bm25 import BM25, ENGLISH_STOPWORDS, tokenize
from .bm25_view import BM25View
from .chunk_table import ChunkTable
from .delta import Delta
from .node_table import NodeTable
from .relations import Relation
from .store import FORMAT_VERSION, DocEntry, Store, read_manifest
from .snapshot import Snapshot
from .writer import StoreWriter
from .vectors import VectorView

__all__ = [
    "BM25",
    "BM25View",
    "ChunkTable",
    "Delta",
    "DocEntry",
    "ENGLISH_STOPWORDS",
    "FORMAT_VERSION",
    "NodeTable",
    "Relation",
    "Snapshot",
    "Store",
    "StoreWriter",
    "VectorView",
    "read_manifest",
    "tokenize",
]
