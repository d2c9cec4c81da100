// Python bindings of the BM25 index and the word tokeniser.
//
// Strings are read in place (ustr.hpp), tokenised and scored with the GIL
// released; batch entry points spread queries over threads.
#include "momoka/kernel_parallel.hpp"
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "momoka/bm25.hpp"
#include "momoka/tokenize.hpp"
#include "ustr.hpp"

namespace py = pybind11;

namespace momoka::bindings {
namespace {

using Tokens = std::vector<std::string>;

// A view of a Python str's storage, valid while the str is referenced.
struct StrView {
  const void* data;
  std::size_t n;
  int kind;  // 1, 2 or 4 bytes per unit
};

StrView view_of(py::handle s) {
  return visit_str(s, [](const auto* p, std::size_t n) {
    return StrView{static_cast<const void*>(p), n, static_cast<int>(sizeof(*p))};
  });
}

void tokenize_view(const StrView& v, const tok::Options& opt, Tokens& out) {
  switch (v.kind) {
    case 1: tok::tokenize(static_cast<const std::uint8_t*>(v.data), v.n, opt, out); break;
    case 2: tok::tokenize(static_cast<const std::uint16_t*>(v.data), v.n, opt, out); break;
    default: tok::tokenize(static_cast<const std::uint32_t*>(v.data), v.n, opt, out); break;
  }
}

std::vector<StrView> views_of(const py::sequence& texts) {
  std::vector<StrView> v;
  v.reserve(texts.size());
  for (auto t : texts) v.push_back(view_of(t));
  return v;
}

// Tokenises many strings over threads (GIL must be released by the caller;
// the sequence that owns the strs must stay alive).
std::vector<Tokens> tokenize_many(const std::vector<StrView>& views, const tok::Options& opt, unsigned n_threads) {
  std::vector<Tokens> out(views.size());
  struct NoState {};
  momoka::parallel_each<NoState>(views.size(), static_cast<long>(n_threads),
                                 [&](std::size_t i, NoState&) { tokenize_view(views[i], opt, out[i]); });
  return out;
}

// The index together with its tokeniser settings.
struct PyBM25 {
  tok::Options opt;
  std::unique_ptr<bm25::Index> ix;
};

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

// Tokeniser settings are stored after the index bytes as a small trailer so
// that one blob restores everything: "MMKTOK\0\0", u8 lowercase, u8 stem,
// u32 n, n x (u32 len, bytes), u64 offset-of-trailer. `put(ptr, n)` receives
// the bytes in order (a string or a file), so saving needs no second copy.
template <class Put>
void write_all(const PyBM25& s, Put&& put) {
  std::uint64_t off = 0;
  s.ix->write([&](const void* p, std::size_t n) {
    put(p, n);
    off += n;
  });
  put("MMKTOK\0\0", 8);
  const char flags[2] = {static_cast<char>(s.opt.lowercase), static_cast<char>(s.opt.stem)};
  put(flags, 2);
  std::vector<std::string> sw(s.opt.stopwords.begin(), s.opt.stopwords.end());
  std::sort(sw.begin(), sw.end());
  auto put32 = [&](std::uint32_t v) { put(&v, 4); };
  put32(static_cast<std::uint32_t>(sw.size()));
  for (const auto& w : sw) {
    put32(static_cast<std::uint32_t>(w.size()));
    put(w.data(), w.size());
  }
  put(&off, 8);
}

std::string serialize_all(const PyBM25& s) {
  std::string out;
  write_all(s, [&](const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); });
  return out;
}

PyBM25 deserialize_all(const char* data, std::size_t n) {
  if (n < 16) throw std::runtime_error("not a momoka BM25 index (too short)");
  std::uint64_t off;
  std::memcpy(&off, data + n - 8, 8);
  if (off + 14 > n - 8 || std::memcmp(data + off, "MMKTOK\0\0", 8) != 0)
    throw std::runtime_error("not a momoka BM25 index (missing tokeniser trailer)");
  PyBM25 s;
  std::size_t p = off + 8;
  s.opt.lowercase = data[p++] != 0;
  s.opt.stem = data[p++] != 0;
  const std::size_t end = n - 8;
  auto get32 = [&]() {
    if (p + 4 > end) throw std::runtime_error("BM25 index is truncated or corrupted");
    std::uint32_t v;
    std::memcpy(&v, data + p, 4);
    p += 4;
    return v;
  };
  std::uint32_t nsw = get32();
  for (std::uint32_t i = 0; i < nsw; ++i) {
    std::uint32_t len = get32();
    if (p + len > end) throw std::runtime_error("BM25 index is truncated or corrupted");
    s.opt.stopwords.emplace(data + p, len);
    p += len;
  }
  if (p != end) throw std::runtime_error("BM25 index is corrupted (tokeniser trailer)");
  s.ix = std::make_unique<bm25::Index>(bm25::Index::deserialize(data, static_cast<std::size_t>(off)));
  return s;
}

}  // namespace

void register_bm25(py::module_& m) {
  m.def(
      "bm25_tokenize",
      [](py::handle text, bool lowercase, bool stem, const std::vector<std::string>& stopwords) {
        tok::Options opt;
        opt.lowercase = lowercase;
        opt.stem = stem;
        opt.stopwords.insert(stopwords.begin(), stopwords.end());
        StrView v = view_of(text);
        Tokens out;
        {
          py::gil_scoped_release nogil;
          tokenize_view(v, opt, out);
        }
        return out;
      },
      py::arg("text"), py::arg("lowercase") = true, py::arg("stem") = false,
      py::arg("stopwords") = std::vector<std::string>(),
      "Tokenises `text` as the BM25 index does: lowercased runs of letters and digits (any script), one token per "
      "CJK / kana / Thai character, optional Porter stemming of ASCII words and stopword removal (before stemming).");

  m.def(
      "porter_stem", [](std::string w) {
        stem::Porter::stem(w);
        return w;
      },
      py::arg("word"), "Porter (1980) stem of a lowercase ASCII word; other words are returned unchanged.");

  py::class_<PyBM25>(m, "BM25Index",
                     "Okapi BM25 inverted index with in-place add/delete (see momoka.index.BM25 for the documented "
                     "Python API).")
      .def(py::init([](double k1, double b, double epsilon, const std::string& idf, bool lowercase, bool stem,
                       const std::vector<std::string>& stopwords) {
             bm25::Params p;
             p.k1 = k1;
             p.b = b;
             p.epsilon = epsilon;
             p.idf = idf_of(idf);
             PyBM25 s;
             s.ix = std::make_unique<bm25::Index>(p);  // validates parameters (ValueError)
             s.opt.lowercase = lowercase;
             s.opt.stem = stem;
             s.opt.stopwords.insert(stopwords.begin(), stopwords.end());
             return s;
           }),
           py::arg("k1") = 1.5, py::arg("b") = 0.75, py::arg("epsilon") = 0.25, py::arg("idf") = "okapi",
           py::arg("lowercase") = true, py::arg("stem") = false, py::arg("stopwords") = std::vector<std::string>())
      .def_property_readonly("k1", [](const PyBM25& s) { return s.ix->params().k1; })
      .def_property_readonly("b", [](const PyBM25& s) { return s.ix->params().b; })
      .def_property_readonly("epsilon", [](const PyBM25& s) { return s.ix->params().epsilon; })
      .def_property_readonly("idf", [](const PyBM25& s) { return idf_name(s.ix->params().idf); })
      .def_property_readonly("lowercase", [](const PyBM25& s) { return s.opt.lowercase; })
      .def_property_readonly("stem", [](const PyBM25& s) { return s.opt.stem; })
      .def_property_readonly("stopwords",
                             [](const PyBM25& s) {
                               std::vector<std::string> v(s.opt.stopwords.begin(), s.opt.stopwords.end());
                               std::sort(v.begin(), v.end());
                               return v;
                             })
      .def_property_readonly("n_docs", [](const PyBM25& s) { return s.ix->n_docs(); })
      .def_property_readonly("n_slots", [](const PyBM25& s) { return s.ix->n_slots(); })
      .def_property_readonly("vocab_size", [](const PyBM25& s) { return s.ix->vocab_size(); })
      .def_property_readonly("memory_bytes", [](const PyBM25& s) { return s.ix->memory_bytes(); })
      .def_property_readonly("avgdl", [](const PyBM25& s) { return s.ix->avgdl(); })
      .def("alive", [](const PyBM25& s, std::uint32_t d) { return s.ix->alive(d); }, py::arg("slot"))
      .def("doc_len", [](const PyBM25& s, std::uint32_t d) { return s.ix->doc_len(d); }, py::arg("slot"))
      .def("doc_freq", [](const PyBM25& s, const std::string& t) { return s.ix->doc_freq(t); }, py::arg("term"))
      .def("tokenize",
           [](const PyBM25& s, py::handle text) {
             StrView v = view_of(text);
             Tokens out;
             {
               py::gil_scoped_release nogil;
               tokenize_view(v, s.opt, out);
             }
             return out;
           },
           py::arg("text"))
      .def("add",
           [](PyBM25& s, const py::sequence& texts, unsigned n_threads) {
             auto views = views_of(texts);
             std::vector<std::int64_t> ids(views.size());
             {
               py::gil_scoped_release nogil;
               // Tokenised in blocks, so memory holds one block's tokens, not the corpus's.
               constexpr std::size_t kAddBlock = 512;
               for (std::size_t lo = 0; lo < views.size(); lo += kAddBlock) {
                 const std::size_t hi = std::min(views.size(), lo + kAddBlock);
                 std::vector<StrView> block(views.begin() + lo, views.begin() + hi);
                 auto toks = tokenize_many(block, s.opt, n_threads);
                 for (std::size_t i = 0; i < toks.size(); ++i) ids[lo + i] = s.ix->add(toks[i]);
               }
             }
             return py::array_t<std::int64_t>(static_cast<py::ssize_t>(ids.size()), ids.data());
           },
           py::arg("texts"), py::arg("n_threads") = 0)
      .def("add_tokens",
           [](PyBM25& s, const std::vector<Tokens>& docs) {
             std::vector<std::int64_t> ids(docs.size());
             {
               py::gil_scoped_release nogil;
               for (std::size_t i = 0; i < docs.size(); ++i) ids[i] = s.ix->add(docs[i]);
             }
             return py::array_t<std::int64_t>(static_cast<py::ssize_t>(ids.size()), ids.data());
           },
           py::arg("docs"))
      .def("append",
           [](PyBM25& s, const PyBM25& o) {
             if (s.opt.lowercase != o.opt.lowercase || s.opt.stem != o.opt.stem || s.opt.stopwords != o.opt.stopwords)
               throw py::value_error(
                   "cannot append a BM25 index with different tokeniser settings (lowercase, stem, stopwords)");
             std::pair<std::size_t, std::size_t> r;
             {
               py::gil_scoped_release nogil;
               r = s.ix->append(*o.ix);  // parameters differ or the same index: std::invalid_argument (ValueError)
             }
             py::array_t<std::int64_t> ids(static_cast<py::ssize_t>(r.second));
             auto pi = ids.mutable_unchecked<1>();
             for (std::size_t i = 0; i < r.second; ++i) pi(static_cast<py::ssize_t>(i)) = static_cast<std::int64_t>(r.first + i);
             return ids;
           },
           py::arg("other"),
           "Appends `other`'s documents (deleted ones stay deleted) after this index's; returns their new ids.")
      .def("remove",
           [](PyBM25& s, const std::vector<std::int64_t>& ids) {
             std::size_t n = 0;
             py::gil_scoped_release nogil;
             for (auto d : ids)
               if (d >= 0 && d <= 0xFFFFFFFFLL && s.ix->remove(static_cast<std::uint32_t>(d))) ++n;
             return n;
           },
           py::arg("ids"))
      .def("get_scores",
           [](const PyBM25& s, py::handle query) {
             StrView v = view_of(query);
             std::vector<double> sc;
             {
               py::gil_scoped_release nogil;
               Tokens q;
               tokenize_view(v, s.opt, q);
               sc = s.ix->scores(q);
             }
             return py::array_t<double>(static_cast<py::ssize_t>(sc.size()), sc.data());
           },
           py::arg("query"))
      .def("get_scores_tokens",
           [](const PyBM25& s, const Tokens& q) {
             std::vector<double> sc;
             {
               py::gil_scoped_release nogil;
               sc = s.ix->scores(q);
             }
             return py::array_t<double>(static_cast<py::ssize_t>(sc.size()), sc.data());
           },
           py::arg("tokens"))
      .def("search",
           [](const PyBM25& s, py::handle query, std::size_t k, const py::object& mask) {
             StrView v = view_of(query);
             Mask mk = mask_of(mask);
             std::vector<bm25::Hit> hits;
             {
               py::gil_scoped_release nogil;
               Tokens q;
               tokenize_view(v, s.opt, q);
               hits = s.ix->top_k(q, k, mk.ptr, mk.len);
             }
             return hits_to_arrays(hits);
           },
           py::arg("query"), py::arg("k") = 10, py::arg("mask") = py::none())
      .def("search_tokens",
           [](const PyBM25& s, const Tokens& q, std::size_t k, const py::object& mask) {
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
           [](const PyBM25& s, const py::sequence& queries, std::size_t k, unsigned n_threads,
              const py::object& mask) {
             auto views = views_of(queries);
             Mask mk = mask_of(mask);
             std::vector<std::vector<bm25::Hit>> res;
             {
               py::gil_scoped_release nogil;
               auto toks = tokenize_many(views, s.opt, n_threads);
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
      .def("to_bytes",
           [](const PyBM25& s) {
             std::string b;
             {
               py::gil_scoped_release nogil;
               b = serialize_all(s);
             }
             return py::bytes(b);
           })
      .def_static("from_bytes",
                  [](const py::bytes& data) {
                    std::string_view sv(data);
                    PyBM25 s;
                    {
                      py::gil_scoped_release nogil;
                      s = deserialize_all(sv.data(), sv.size());
                    }
                    return s;
                  },
                  py::arg("data"))
      .def("save",
           [](const PyBM25& s, const std::string& path) {
             py::gil_scoped_release nogil;
             std::ofstream f(path, std::ios::binary | std::ios::trunc);
             if (!f) throw std::runtime_error("cannot open " + path + " for writing");
             write_all(s, [&](const void* p, std::size_t n) {
               f.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
             });
             f.flush();
             if (!f) throw std::runtime_error("write to " + path + " failed");
           },
           py::arg("path"))
      .def_static("load",
                  [](const std::string& path) {
                    PyBM25 s;
                    {
                      py::gil_scoped_release nogil;
                      std::ifstream f(path, std::ios::binary | std::ios::ate);
                      if (!f) throw std::runtime_error("cannot open " + path);
                      std::string b(static_cast<std::size_t>(f.tellg()), '\0');
                      f.seekg(0);
                      f.read(b.data(), static_cast<std::streamsize>(b.size()));
                      if (!f) throw std::runtime_error("cannot read " + path);
                      s = deserialize_all(b.data(), b.size());
                    }
                    return s;
                  },
                  py::arg("path"));
}

}  // namespace momoka::bindings
