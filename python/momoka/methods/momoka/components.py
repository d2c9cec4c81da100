"""Momoka-RAG as registered components.

Momoka-RAG = a chunker (``fixed`` or the paper's ``llm`` chunker) + the
``title`` enricher (T_D per document, and vector view ``titled``: the chunks
embedded as ``T_D + "\\n" + chunk``) + the ``paths`` relator (Momoka-Map's MCTS
paths, relation ``paths``) + the ``trail`` retriever (Algorithm 1). The ``mm``
retriever is dense retrieval over the ``titled`` view (the paper's "MM" row).

Where things live in the store: document metadata ``momoka_title`` (T_D),
``momoka_title_source`` and ``momoka_map`` (the per-document search record);
vector view ``titled``; relation ``paths`` (ordered: each chunk's path P_i as
chunk ids, root excluded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ... import settings
from ...errors import ConfigError
from ...store.store import RAW_VIEW
from ..fallbacks import FallbackTally, set_record
from ...registry import register
from ..standard.retrievers import DenseRetriever
from .llm_chunking import LLMChunker
from .map import DOC_RECORD_KEY, TITLE_KEY, TITLE_SOURCE_KEY, MomokaMap
from .referees import REFEREES
from .title import TITLE_MODES, TitleLedger, TitleStats, estimate_titles, make_titles, with_title
from .trail import TrailRetriever

#: The vector view of title-prefixed chunks and the relation of paths.
TITLED_VIEW = "titled"
PATHS_RELATION = "paths"


class TitleEnricher:
    """T_D for each document (Momoka-Map metadata) and the ``titled`` vector view.

    Args:
        mode: ``"auto"`` (LLM titles when an endpoint is configured, i.e. ``llm``
            given or ``MOMOKA_LLM_BASE_URL`` set; else the document's own title,
            first heading or first sentence), ``"llm"``, ``"prefer-document"``,
            ``"document"`` or ``"none"`` (see :func:`~momoka.methods.momoka.title.make_titles`).
        llm: the LLM client for ``"llm"`` titles (default ``client_from_env()``).
        view: name of the vector view written (default ``"titled"``).

    LLM titles are checked before they are kept (one short line, grounded in the
    document's own words, not the same title as an unrelated document's: see
    :mod:`momoka.methods.momoka.title`; ``ledger`` remembers the titles of earlier
    batches) and follow the rule of :mod:`momoka.methods.fallbacks`: ``fallbacks``
    counts the documents whose title fell back, each batch stops above
    ``--llm-max-failed`` before writing anything, and each document records
    whether its title is a fallback (a rerun asks it again). ``stats``: the
    :class:`~momoka.methods.momoka.title.TitleStats` of every batch merged (None before the first).
    """

    name = "title"

    def __init__(self, mode: str = "auto", *, llm: Any = None, view: str = TITLED_VIEW):
        if mode not in TITLE_MODES + ("auto",):
            raise ConfigError(f"title mode must be auto or one of {', '.join(TITLE_MODES)}, not {mode!r}")
        self.mode, self._llm, self.view = mode, llm, view
        self.stats: TitleStats | None = None
        self.fallbacks = FallbackTally("title", "title", "titles",
                                       "those documents got their own title, first heading or first sentence")
        self.ledger = TitleLedger()

    @property
    def effective_mode(self) -> str:
        """The mode with ``"auto"`` resolved."""
        if self.mode != "auto":
            return self.mode
        return "llm" if self._llm is not None or settings.get_text("MOMOKA_LLM_BASE_URL") else "document"

    def estimate(self, documents: Sequence[Any], chunks: Sequence[Sequence[Any]]) -> dict:
        """Pre-run estimate of the LLM calls and tokens of the titles (:func:`~momoka.methods.momoka.title.estimate_titles`)."""
        return estimate_titles(documents, self.effective_mode)

    def enrich(self, index: Any, doc_ids: Sequence[str]) -> None:
        """Write T_D into each document's metadata and embed its chunks with T_D into the titled view."""
        mode = self.effective_mode
        llm = None
        if mode in ("llm", "prefer-document"):
            if self._llm is None:
                from ...llm import client_from_env  # start-up: momoka.llm

                self._llm = client_from_env()
            llm = self._llm
        docs = [index.document(d) for d in doc_ids]
        titles, sources, st = make_titles(docs, mode=mode, llm=llm, fallbacks=self.fallbacks, ledger=self.ledger)
        self.fallbacks.check()
        self.stats = st if self.stats is None else self.stats.merge(st)
        store = index.store
        for d, t, src in zip(doc_ids, titles, sources):
            store.documents[d].metadata[TITLE_KEY] = t
            store.documents[d].metadata[TITLE_SOURCE_KEY] = src
            set_record(store.documents[d].metadata, self.fallbacks.key, self.fallbacks.take(d))
        if not store.has_vector_view(RAW_VIEW):
            return  # BM25-only index: titles are kept, nothing to embed
        self.prepare(index)
        ids, texts = [], []
        for d, t in zip(doc_ids, titles):
            for cid in store.documents[d].chunk_ids:
                ids.append(cid)
                texts.append(with_title(t, store.chunks.text(cid)))
        store.vector_view(self.view).add(ids, index.embed(texts, view=self.view, label="embedding titled chunks"))

    def prepare(self, batch: Any) -> None:
        """Create vector view :attr:`view` (the raw view's embedder) in ``batch.store`` when it is missing and
        the index has raw vectors (a BM25-only index gets titles only)."""
        store = batch.store
        if store.has_vector_view(RAW_VIEW) and not store.has_vector_view(self.view):
            raw = store.vector_view(RAW_VIEW)
            store.add_vector_view(self.view, embedder=raw.info["embedder"], dtype=raw.info.get("dtype", "float32"),
                                  source={"text": "title + newline + chunk", "by": self.name})

    def describe(self) -> dict:
        """Settings and counts (recorded in the manifest; the failure examples are not)."""
        counts = {} if self.stats is None else {k: v for k, v in self.stats.to_dict().items() if k != "failures"}
        return {"mode": self.effective_mode, "view": self.view, "stats": counts}


class PathRelator:
    """Momoka-Map semantic paths (MCTS per chunk) as the ordered relation ``paths``.

    Args:
        referee: ``"embedding"``, ``"llm"``, ``"ppl"`` or None (the default:
            ``llm`` when ``MOMOKA_LLM_BASE_URL`` is set, else ``embedding``; ``ppl`` takes
            seconds per pair and warns first with its estimated pairs and time).
        threshold: the referee's threshold (ppl edge / cosine); None: its default.
        title: the referee judges chunks with the document title T_D in front
            (eq. 2: a chunk is ``T_D + text``), when the ``title`` enricher has
            written one that is a title (the document's own, a heading or an
            LLM's; not the first-sentence fallback) (default True); False: the
            chunk text alone.
        options: everything else goes to :class:`~momoka.methods.momoka.map.MomokaMap`
            (``iterations``, ``rollout``, ``alpha`` ... ``preset``, ``long_docs``, ``seed``).

    A store records the settings its paths were made with; reopened, it rebuilds the relator with
    them where its recorded options are silent (:func:`recorded_options`), so documents added later
    get paths made as the earlier ones were, whatever the defaults are now.

    The embedding referee reuses the stored vectors (nothing is embedded twice):
    the ``titled`` view's when titles are used and present, else the raw view's.

    The LLM referee follows the rule of :mod:`momoka.methods.fallbacks`: ``fallbacks``
    counts the verdicts that stayed malformed (scored 0), the search stops above
    ``--llm-max-failed`` (as soon as 8 verdicts were asked, and at the end of each
    batch) before any path is stored, and each document records which pairs
    (``[[context chunk positions], candidate position]``) were scored 0 for want of a verdict.
    """

    name = "paths"

    def __init__(self, referee: str | None = None, *, threshold: float | None = None, llm: Any = None,
                 relation: str = PATHS_RELATION, title: bool = True, **options: Any):
        if isinstance(referee, str) and referee not in REFEREES:
            raise ConfigError(f"unknown referee {referee!r}; choose one of {', '.join(REFEREES)}")
        if not isinstance(title, bool):
            raise ConfigError(f"paths: title is True (the referee sees T_D + chunk, eq. 2) or False, not {title!r}")
        self.relation = relation
        self.title = title
        self.referee_name = referee
        self._bound = False
        try:
            self.map = MomokaMap(referee=referee, threshold=threshold, llm=llm, **options)
        except TypeError as exc:
            raise ConfigError(f"paths: {exc}") from None

    def relate(self, index: Any, doc_ids: Sequence[str]) -> None:
        """Search the paths of every chunk of ``doc_ids`` and store them."""
        store = index.store
        self.prepare(index)
        rel = store.relation(self.relation)
        ids = [list(store.documents[d].chunk_ids) for d in doc_ids]
        chunks = [[store.chunks.get(c) for c in cs] for cs in ids]
        titles = [self._referee_title(store.documents[d].metadata) for d in doc_ids]
        # eq. 2: the referee sees T_D + chunk (offsets are not used by the search)
        chunks = [[replace(c, text=with_title(t, c.text)) for c in cs] if t else cs for cs, t in zip(chunks, titles)]
        vectors = None
        if self._bound:
            view = TITLED_VIEW if self.title and any(titles) and store.has_vector_view(TITLED_VIEW) else RAW_VIEW
            vectors = [store.vector_view(view).get(cs) for cs in ids]
        paths, records = self.map.paths_for_documents(chunks, vectors=vectors)
        for d, cs, ps, rec in zip(doc_ids, ids, paths, records):
            store.documents[d].metadata[DOC_RECORD_KEY] = rec
            set_record(store.documents[d].metadata, self.fallbacks.key, self.fallbacks.take(d))
            for cid, p in zip(cs, ps):
                rel.set(cid, np.asarray([cs[j] for j in p], dtype=np.int64))

    def prepare(self, batch: Any) -> None:
        """Create the ordered relation :attr:`relation` in ``batch.store`` when it is missing (binding the named
        embedding referee to the index's embedder first: the relation records the referee's settings)."""
        named = self.referee_name is None or isinstance(self.referee_name, str)  # not a referee object
        if named and self.map.referee_name == "embedding" and batch.store.has_vector_view(RAW_VIEW) and not self._bound:
            self.map.use_embedder(batch.embedder)  # the named (or default) embedding referee: the index's embedder
            self._bound = True
        if not batch.store.has_relation(self.relation):
            batch.store.add_relation(self.relation, ordered=True, weighted=False,
                                     source={"by": self.name, "settings": self.map.settings()})

    @property
    def fallbacks(self) -> FallbackTally:
        """The malformed-verdict tally of the LLM referee (:attr:`MomokaMap.fallbacks`)."""
        return self.map.fallbacks

    def _referee_title(self, metadata: dict) -> str | None:
        """T_D for the referee: the enricher's title, unless it is only the document's first sentence.

        A first-sentence fallback is the first chunk's own text, not a summary of
        the document: put in front of every chunk it makes all chunks alike to
        the referee, so the chunks are judged alone then.
        """
        if not self.title or metadata.get(TITLE_SOURCE_KEY) == "sentence":
            return None
        return metadata.get(TITLE_KEY) or None

    def estimate(self, documents: Sequence[Any], chunks: Sequence[Sequence[Any]]) -> dict:
        """Pre-run estimate of referee calls and tokens (see :meth:`MomokaMap.estimate`)."""
        return self.map.estimate(documents, chunks)

    def describe(self) -> dict:
        """Settings and counts (recorded in the manifest)."""
        return {**self.map.describe(), "referee_sees_title": self.title}


def recorded_options(settings: dict) -> dict:
    """The options that rebuild a store's ``paths`` relator as it was built, from the settings it recorded
    (:meth:`PathRelator.describe`): the referee, the preset and what the preset set.

    A store whose settings name no preset was built before presets existed, by the paper's procedure.
    The options recorded with the relator (``params``) win over these (:meth:`momoka.registry.Entry.reopen_options`).
    """
    out: dict = {"preset": settings.get("preset", "paper")}
    out.update({k: settings[k] for k in ("prior_weight", "short_docs", "long_docs") if k in settings})
    name = (settings.get("referee") or {}).get("name")
    if name in REFEREES:
        out["referee"] = name
    return out


@register("enricher", "title", summary="Momoka T_D per document and the 'titled' vector view (option mode=auto)",
          produces=lambda o: (f"vectors/{o.get('view', TITLED_VIEW)}",))
def _title(**options: Any) -> TitleEnricher:
    return TitleEnricher(**options)


@register("relator", "paths", summary="Momoka-Map MCTS semantic paths per chunk (options referee=embedding|llm|ppl: "
                                     "llm with an endpoint, else embedding; preset=referee|paper; iterations, ...)",
          produces=lambda o: (f"relation/{o.get('relation', PATHS_RELATION)}",), reopen=recorded_options)
def _paths(**options: Any) -> PathRelator:
    return PathRelator(**options)


@register("retriever", "mm", summary="dense top-k over the title-prefixed view (Momoka 'MM' row)",
          requires={"enrich": ["title"]}, defaults={"view": TITLED_VIEW}, needs=lambda o: (f"vectors/{o['view']}",))
def _mm(index: Any, **options: Any) -> DenseRetriever:
    r = DenseRetriever(index, **options)
    r.name = "mm"
    return r


@register("retriever", "trail", summary="Momoka-Trail: 2K first stage, expand along paths, rerank (Algorithm 1)",
          requires={"enrich": ["title"], "relate": ["paths"]}, aliases=("momoka",),
          needs=lambda o: () if o.get("paths") is not None else (f"relation/{o.get('relation', PATHS_RELATION)}",))
def _trail(index: Any, **options: Any):
    return TrailRetriever(index, **options)


@register("chunker", "llm", summary="Momoka's LLM chunker (Figure 3 prompt), recovered onto the source")
def _llm_chunker(**options: Any):
    return LLMChunker(**options)
