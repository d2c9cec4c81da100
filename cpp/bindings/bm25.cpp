// Python bindings of the BM25 index and the word tokeniser.
//
// Strings are read in place (ustr.hpp), tokenised and scored with the GIL
// released; batch entry points spread queries over threads. The file format
// (index bytes plus the tokeniser trailer) is the core's: bm25_file.hpp.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "momoka/bm25_file.hpp"
#include "momoka/kernel_parallel.hpp"
#include "momoka/tokenize.hpp"
#include "ustr.hpp"

namespace py = pybind11;

namespace momoka::bindings {
namespace {

using Tokens = std::vector<std::string>;
using bm25::TextIndex;

void tokenize_ref(const StrRef& r, const tok::Options& opt, Tokens& out) {
  dispatch(r, [&](const auto* p, std::size_t n) { tok::tokenize(p, n, opt, out); });
}

// Tokenises many strings over threads (GIL must be released by the caller;
// the sequence that owns the strs must stay alive).
std::vector<Tokens> tokenize_many(const StrRef* refs, std::size_t n, const tok::Options& opt, unsigned n_threads) {
  std::vector<Tokens> out(n);
  struct NoState {};
  momoka::parallel_each<NoState>(n, static_cast<long>(n_threads),
                                 [&](std::size_t i, NoState&) { tokenize_ref(refs[i], opt, out[i]); });
  return out;
}

tok::Options options_of(bool lowercase, bool stem, const std::vector<std::string>& stopwords, int version) {
  if (version < tok::kRuleUnigram || version > tok::kRuleLatest)
    throw py::value_error("tokenizer version must be 1 (CJK characters one token each) or 2 (CJK characters and "
                          "character bigrams), not " + std::to_string(version));
  tok::Options opt;
  opt.version = version;
  opt.lowercase = lowercase;
  opt.stem = stem;
  opt.stopwords.insert(stopwords.begin(), stopwords.end());
  return opt;
}

struct Mask {
  py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast> arr;
  const std::uint8_t* ptr = nullptr;
  std::size_t len = 0;
};

Mask mask_of(const py::object& m) {
  Mask out;
  if (m.is_none()) return out;
  out.arr = py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast>::ensure(m);
  if (!out.arr || out.arr.ndim() != 1) throw py::value_error("mask must be a 1-d array of booleans, one per slot");
  out.ptr = out.arr.data();
  out.len = static_cast<std::size_t>(out.arr.shape(0));
  return out;
}

py::tuple hits_to_arrays(const std::vector<bm25::Hit>& hits) {
  py::array_t<std::int64_t> ids(static_cast<py::ssize_t>(hits.size()));
  py::array_t<double> scores(static_cast<py::ssize_t>(hits.size()));
  auto pi = ids.mutable_unchecked<1>();
  auto ps = scores.mutable_unchecked<1>();
  for (std::size_t i = 0; i < hits.size(); ++i) {
    pi(i) = hits[i].doc;
    ps(i) = hits[i].score;
  }
  return py::make_tuple(ids, scores);
}

bm25::Idf idf_of(const std::string& s) {
  if (s == "okapi") return bm25::Idf::kOkapi;
  if (s == "lucene") return bm25::Idf::kLucene;
  throw py::value_error("idf must be 'okapi' or 'lucene', got '" + s + "'");
}

std::string idf_name(bm25::Idf i) { return i == bm25::Idf::kOkapi ? "okapi" : "lucene"; }

}  // namespace

void register_bm25(py::module_& m) {
  m.def(
      "bm25_tokenize",
      [](py::handle text, bool lowercase, bool stem, const std::vector<std::string>& stopwords, int version) {
        const tok::Options opt = options_of(lowercase, stem, stopwords, version);
        const StrRef r = str_ref(text, "text");
        Tokens out;
        {
          py::gil_scoped_release nogil;
          tokenize_ref(r, opt, out);
        }
        return out;
      },
      py::arg("text"), py::arg("lowercase") = true, py::arg("stem") = false,
      py::arg("stopwords") = std::vector<std::string>(), py::arg("version") = static_cast<int>(tok::kRuleUnigram),
      "Tokenises `text` as the BM25 index does: lowercased runs of letters and digits (any script), one token per "
      "Thai / Lao / Khmer / Myanmar / Tibetan character, CJK runs one token per character (version 1) or "
      "each character and the overlapping character bigrams (version 2), optional Porter stemming of ASCII words and stopword removal "
      "(before stemming).");

  m.def(
      "porter_stem", [](std::string w) {
        stem::Porter::stem(w);
        return w;
      },
      py::arg("word"), "Porter (1980) stem of a lowercase ASCII word; other words are returned unchanged.");

  py::class_<TextIndex>(m, "BM25Index",
                        "Okapi BM25 inverted index with in-place add/delete (see momoka.index.BM25 for the "
                        "documented Python API).")
      .def(py::init([](double k1, double b, double epsilon, const std::string& idf, bool lowercase, bool stem,
                       const std::vector<std::string>& stopwords, int version) {
             bm25::Params p;
             p.k1 = k1;
             p.b = b;
             p.epsilon = epsilon;
             p.idf = idf_of(idf);
             return TextIndex(p, options_of(lowercase, stem, stopwords, version));  // validates parameters (ValueError)
           }),
           py::arg("k1") = 1.5, py::arg("b") = 0.75, py::arg("epsilon") = 0.25, py::arg("idf") = "okapi",
           py::arg("lowercase") = true, py::arg("stem") = false, py::arg("stopwords") = std::vector<std::string>(),
           py::arg("version") = static_cast<int>(tok::kRuleUnigram))
      .def_property_readonly("k1", [](const TextIndex& s) { return s.ix->params().k1; })
      .def_property_readonly("b", [](const TextIndex& s) { return s.ix->params().b; })
      .def_property_readonly("epsilon", [](const TextIndex& s) { return s.ix->params().epsilon; })
      .def_property_readonly("idf", [](const TextIndex& s) { return idf_name(s.ix->params().idf); })
      .def_property_readonly("version", [](const TextIndex& s) { return s.opt.version; })
      .def_property_readonly("lowercase", [](const TextIndex& s) { return s.opt.lowercase; })
      .def_property_readonly("stem", [](const TextIndex& s) { return s.opt.stem; })
      .def_property_readonly("stopwords",
                             [](const TextIndex& s) { return s.sorted_stopwords(); })
      .def_property_readonly("n_docs", [](const TextIndex& s) { return s.ix->n_docs(); })
      .def_property_readonly("n_slots", [](const TextIndex& s) { return s.ix->n_slots(); })
      .def_property_readonly("vocab_size", [](const TextIndex& s) { return s.ix->vocab_size(); })
      .def_property_readonly("memory_bytes", [](const TextIndex& s) { return s.ix->memory_bytes(); })
      .def_property_readonly("avgdl", [](const TextIndex& s) { return s.ix->avgdl(); })
      .def("alive", [](const TextIndex& s, std::uint32_t d) { return s.ix->alive(d); }, py::arg("slot"))
      .def("doc_len", [](const TextIndex& s, std::uint32_t d) { return s.ix->doc_len(d); }, py::arg("slot"))
      .def("doc_freq", [](const TextIndex& s, const std::string& t) { return s.ix->doc_freq(t); }, py::arg("term"))
      .def("tokenize",
           [](const TextIndex& s, py::handle text) {
             const StrRef r = str_ref(text, "text");
             Tokens out;
             {
               py::gil_scoped_release nogil;
               tokenize_ref(r, s.opt, out);
             }
             return out;
           },
           py::arg("text"))
      .def("add",
           [](TextIndex& s, const py::sequence& texts, unsigned n_threads) {
             const auto refs = str_refs(texts, "texts");
             std::vector<std::int64_t> ids(refs.size());
             {
               py::gil_scoped_release nogil;
               // Tokenised in blocks, so memory holds one block's tokens, not the corpus's.
               constexpr std::size_t kAddBlock = 512;
               for (std::size_t lo = 0; lo < refs.size(); lo += kAddBlock) {
                 const std::size_t hi = std::min(refs.size(), lo + kAddBlock);
                 auto toks = tokenize_many(refs.data() + lo, hi - lo, s.opt, n_threads);
                 for (std::size_t i = 0; i < toks.size(); ++i) ids[lo + i] = s.ix->add(toks[i]);
               }
             }
             return py::array_t<std::int64_t>(static_cast<py::ssize_t>(ids.size()), ids.data());
           },
           py::arg("texts"), py::arg("n_threads") = 0)
      .def("add_tokens",
           [](TextIndex& s, const std::vector<Tokens>& docs) {
             std::vector<std::int64_t> ids(docs.size());
             {
               py::gil_scoped_release nogil;
               for (std::size_t i = 0; i < docs.size(); ++i) ids[i] = s.ix->add(docs[i]);
             }
             return py::array_t<std::int64_t>(static_cast<py::ssize_t>(ids.size()), ids.data());
           },
           py::arg("docs"))
      .def("append",
           [](TextIndex& s, const TextIndex& o) {
             std::pair<std::size_t, std::size_t> r;
             {
               py::gil_scoped_release nogil;
               r = s.append(o);  // settings differ or the same index: std::invalid_argument (ValueError)
             }
             py::array_t<std::int64_t> ids(static_cast<py::ssize_t>(r.second));
             auto pi = ids.mutable_unchecked<1>();
             for (std::size_t i = 0; i < r.second; ++i) pi(static_cast<py::ssize_t>(i)) = static_cast<std::int64_t>(r.first + i);
             return ids;
           },
           py::arg("other"),
           "Appends `other`'s documents (deleted ones stay deleted) after this index's; returns their new ids.")
      .def("remove",
           [](TextIndex& s, const std::vector<std::int64_t>& ids) {
             std::size_t n = 0;
             py::gil_scoped_release nogil;
             for (auto d : ids)
               if (d >= 0 && d <= 0xFFFFFFFFLL && s.ix->remove(static_cast<std::uint32_t>(d))) ++n;
             return n;
           },
           py::arg("ids"))
      .def("get_scores",
           [](const TextIndex& s, py::handle query) {
             const StrRef r = str_ref(query, "query");
             std::vector<double> sc;
             {
               py::gil_scoped_release nogil;
               Tokens q;
               tokenize_ref(r, s.opt, q);
               sc = s.ix->scores(q);
             }
             return py::array_t<double>(static_cast<py::ssize_t>(sc.size()), sc.data());
           },
           py::arg("query"))
      .def("get_scores_tokens",
           [](const TextIndex& s, const Tokens& q) {
             std::vector<double> sc;
             {
               py::gil_scoped_release nogil;
               sc = s.ix->scores(q);
             }
             return py::array_t<double>(static_cast<py::ssize_t>(sc.size()), sc.data());
           },
           py::arg("tokens"))
      .def("search",
           [](const TextIndex& s, py::handle query, std::size_t k, const py::object& mask) {
             const StrRef r = str_ref(query, "query");
             Mask mk = mask_of(mask);
             std::vector<bm25::Hit> hits;
             {
               py::gil_scoped_release nogil;
               Tokens q;
               tokenize_ref(r, s.opt, q);
               hits = s.ix->top_k(q, k, mk.ptr, mk.len);
             }
             return hits_to_arrays(hits);
           },
           py::arg("query"), py::arg("k") = 10, py::arg("mask") = py::none())
      .def("search_tokens",
           [](const TextIndex& s, const Tokens& q, std::size_t k, const py::object& mask) {
             Mask mk = mask_of(mask);
             std::vector<bm25::Hit> hits;
             {
               py::gil_scoped_release nogil;
               hits = s.ix->top_k(q, k, mk.ptr, mk.len);
             }
             return hits_to_arrays(hits);
           },
           py::arg("tokens"), py::arg("k") = 10, py::arg("mask") = py::none())
      .def("search_batch",
           [](const TextIndex& s, const py::sequence& queries, std::size_t k, unsigned n_threads,
              const py::object& mask) {
             const auto refs = str_refs(queries, "queries");
             Mask mk = mask_of(mask);
             std::vector<std::vector<bm25::Hit>> res;
             {
               py::gil_scoped_release nogil;
               auto toks = tokenize_many(refs.data(), refs.size(), s.opt, n_threads);
               res = s.ix->top_k_batch(toks, k, mk.ptr, mk.len, n_threads);
             }
             const py::ssize_t nq = static_cast<py::ssize_t>(res.size());
             py::array_t<std::int64_t> ids({nq, static_cast<py::ssize_t>(k)});
             py::array_t<double> scores({nq, static_cast<py::ssize_t>(k)});
             auto pi = ids.mutable_unchecked<2>();
             auto ps = scores.mutable_unchecked<2>();
             for (py::ssize_t i = 0; i < nq; ++i)
               for (py::ssize_t j = 0; j < static_cast<py::ssize_t>(k); ++j) {
                 const bool has = static_cast<std::size_t>(j) < res[i].size();
                 pi(i, j) = has ? static_cast<std::int64_t>(res[i][j].doc) : std::int64_t{-1};  // not uint32 -1
                 ps(i, j) = has ? res[i][j].score : 0.0;
               }
             return py::make_tuple(ids, scores);
           },
           py::arg("queries"), py::arg("k") = 10, py::arg("n_threads") = 0, py::arg("mask") = py::none())
      .def("holds",
           [](const TextIndex& s, const std::vector<std::int64_t>& docs, const Tokens& terms) {
             std::vector<std::uint32_t> slots(docs.size());
             for (std::size_t i = 0; i < docs.size(); ++i)  // out of range: no slot (reported as not live)
               slots[i] = docs[i] >= 0 && docs[i] < 0xFFFFFFFFLL ? static_cast<std::uint32_t>(docs[i]) : 0xFFFFFFFFu;
             const auto nd = static_cast<py::ssize_t>(docs.size()), nt = static_cast<py::ssize_t>(terms.size());
             py::array_t<std::uint8_t> out({nd, nt});
             py::array_t<std::uint32_t> distinct(nd);
             std::uint8_t* po = out.mutable_data();
             std::uint32_t* pd = distinct.mutable_data();
             {
               py::gil_scoped_release nogil;
               s.ix->holds(slots, terms, po, pd);
             }
             return py::make_tuple(out, distinct);
           },
           py::arg("docs"), py::arg("terms"),
           "For slots `docs` and tokens `terms`: (uint8 array [len(docs), len(terms)], 1 where a live slot holds "
           "a term; uint32 array, each slot's number of distinct terms, 0 when not live).")
      .def("to_bytes",
           [](const TextIndex& s) {
             std::string b;
             {
               py::gil_scoped_release nogil;
               b = s.serialize();
             }
             return py::bytes(b);
           })
      .def_static("from_bytes",
                  [](const py::bytes& data) {
                    std::string_view sv(data);
                    TextIndex s;
                    {
                      py::gil_scoped_release nogil;
                      s = TextIndex::deserialize(sv.data(), sv.size());
                    }
                    return s;
                  },
                  py::arg("data"))
      .def("save",
           [](const TextIndex& s, const std::string& path) {
             py::gil_scoped_release nogil;
             s.save(path);
           },
           py::arg("path"))
      .def_static("load",
                  [](const std::string& path) {
                    py::gil_scoped_release nogil;
                    return TextIndex::load(path);
                  },
                  py::arg("path"));
}

}  // namespace momoka::bindings
