"""ETS over the corpus (momoka.methods.ets.hops): the multi-hop passage retriever against a plain-Python
reference of its search on planted corpora, where the bridge page is reachable only through what the first
page says."""

from __future__ import annotations

import pytest

import momoka
from momoka.methods.grounding import content_terms
from tests.store.conftest import HashEmbedder

FILLER = "It is described in several books and articles written over the years by various people."


def _pages():
    pages = [
        ("Film Zorro", "Film Zorro is a 1999 drama film about a masked rider, directed by Jane Quimby and shot in "
                       "Spain over one summer. " + FILLER),
        # the bridge: the question shares no content word with it; only the first page names Jane Quimby
        ("J. Quimby (painter)", "Jane Quimby (born 1950 in Reykjavik) is a painter, photographer and writer who later "
                                "made films. She studied art in Paris. " + FILLER),
        ("Rome Studio", "Rome Studio is a painter's workshop in Italy that made films about art. " + FILLER),
    ]
    for i in range(12):  # other films, closer to the question's words than the bridge page
        pages.append((f"Film Mira {i}", f"Film Mira {i} is a drama film whose director was born in town {i}; "
                                        f"the director of the film was born there. " + FILLER))
    return [{"doc_id": f"p{i}", "title": t, "text": x} for i, (t, x) in enumerate(pages)]


def reference(ix, q: str, k: int, beam: int, expansion: int, hops: int, **hybrid) -> list[int]:
    """A plain re-statement of the search (module doc of momoka.methods.ets.hops), one query at a time:
    paths grown from the question's hybrid ranking by the hybrid ranking of the question's words the path does
    not hold followed by the path's words the question does not hold (passages not on the path), values the sums of scores normalised by each ranking's best,
    the ``beam`` best paths per depth, no path grown once it holds the question's content terms;
    then each first-ranking passage followed by the rest of its best path."""
    text = lambda c: ix.store.chunks.text(c)  # noqa: E731
    depth = max(k, expansion)

    def rank(query: str, n: int) -> list[tuple[int, float]]:
        return [(h.chunk_id, h.score) for h in ix.search(query, k=n, retriever="hybrid", **hybrid)]

    first = rank(q, depth)
    value = {(c,): s / first[0][1] for c, s in first[:expansion]}
    frontier = list(value)
    terms = content_terms(q)
    for _ in range(hops - 1):
        grown = []
        for p in frontier:
            if terms <= content_terms(" ".join(text(c) for c in p)):
                continue
            path_words = [w for c in p for w in text(c).split()]
            held = content_terms(" ".join(path_words))
            asked = [w for w in q.split() if not content_terms(w) or not content_terms(w) & held]
            added = [w for w in path_words if not content_terms(w) & terms][:120]
            r = rank(" ".join(asked + added), depth + hops * 4)
            kids = [(c, s) for c, s in r if c not in p][:expansion]
            for c, s in kids:
                path = p + (c,)
                if sorted(path) in [sorted(g) for g in grown]:
                    continue
                value[path] = value[p] + s / kids[0][1]
                grown.append(path)
        frontier = sorted(grown, key=lambda p: -value[p])[:beam]
        if not grown:
            break
    best = {}
    for p in sorted(value, key=lambda p: (-value[p], len(p))):
        best.setdefault(p[0], p)
    order = []
    for c, _ in first:
        for x in best.get(c, (c,)):
            if x not in order:
                order.append(x)
    return order[:k]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    with momoka.Index.build(_pages(), store=tmp_path_factory.mktemp("hops") / "s", embedder=HashEmbedder(),
                            progress=False) as ix:
        yield ix


def test_bridge_reached_through_the_first_page(index):
    q = "Where was the director of Film Zorro born?"
    plain = index.search(q, k=4, retriever="hybrid", links=0)
    assert plain[0].doc_id == "p0"
    assert "p1" not in [h.doc_id for h in plain]  # the question alone does not reach the bridge page
    got = index.search(q, k=4, retriever="ets", links=0)
    assert [h.doc_id for h in got[:2]] == ["p0", "p1"]  # the bridge right after the page that names its subject
    assert got[0].provenance["retriever"] == "ets" and got[0].provenance["hops"] == 2
    assert all(a.score >= b.score for a, b in zip(got, got[1:]))


@pytest.mark.parametrize("beam,expansion,hops", [(3, 3, 2), (1, 2, 2), (2, 3, 3), (3, 3, 1)])
def test_matches_the_plain_reference(index, beam, expansion, hops):
    for q in ("Where was the director of Film Zorro born?", "Which drama film was shot in Spain?",
              "Who studied art in Paris and made films?", "In which town was the director of Film Mira 3 born?"):
        got = index.corpus.retriever("ets", beam=beam, expansion=expansion, hops=hops, links=0).retrieve(q, 6)
        assert [h.chunk_id for h in got] == reference(index, q, 6, beam, expansion, hops, links=0), q


def test_one_hop_is_the_hybrid_ranking(index):
    q = "Where was the director of Film Zorro born?"
    assert ([h.chunk_id for h in index.search(q, k=5, retriever="ets", hops=1)]
            == [h.chunk_id for h in index.search(q, k=5, retriever="hybrid")])


def test_bad_options(index):
    for bad in ({"beam": 0}, {"hops": "two"}, {"expansion": -1}, {"links": -1}):
        with pytest.raises(momoka.errors.ConfigError):
            index.corpus.retriever("ets", **bad)
