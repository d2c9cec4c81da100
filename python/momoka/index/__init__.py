"""momoka.index: the native BM25 index, the persistent :class:`Store` and the :class:`Index` API.

* :class:`BM25` -- Okapi BM25 in the native core (add/delete in place, threaded top-k).
* :class:`Store` -- a versioned, atomically written directory of chunks, vectors,
  an HNSW graph and the BM25 index, with a single-writer lock.
* :class:`Index` -- documents in (paths, Documents, dicts), ranked :class:`Hit` out:
  ``Index.build(...)``, ``Index.open(path)``, ``.search(query, k, method, doc_ids)``,
  ``.add``, ``.delete``, ``.save``.
"""

from .api import METHODS, Index
from .bm25 import BM25, ENGLISH_STOPWORDS, tokenize
from .store import FORMAT_VERSION, Hit, Store, read_manifest

__all__ = [
           "BM25",
           "ENGLISH_STOPWORDS",
           "FORMAT_VERSION",
           "METHODS",
           "Hit",
           "Index",
           "Store",
           "read_manifest",
           "tokenize",
]
