// Bindings of the text kernels (cpp/include/momoka/{edit_distance, locate,
// outlines, simhash, bloom, trie}.hpp). Python objects are converted to raw
// code-unit views here (zero copy where possible) and the GIL is released
// around the work. The typed, validated API is python/momoka/kernels.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "momoka/bloom.hpp"
#include "momoka/edit_distance.hpp"
#include "momoka/kernel_hash.hpp"
#include "momoka/locate.hpp"
#include "momoka/outlines.hpp"
#include "momoka/kernel_parallel.hpp"
#include "momoka/simhash.hpp"
#include "momoka/trie.hpp"
#include "ustr.hpp"

namespace py = pybind11;

namespace momoka::bindings {
namespace {

// A borrowed view of a Python str's storage (valid while the str lives).
struct StrRef {
  const void* data = nullptr;
  std::size_t n = 0;
  int kind = 1;  // bytes per code unit
};

std::string describe(py::handle o) {
  std::string t = Py_TYPE(o.ptr())->tp_name;
  if (PyFloat_Check(o.ptr()) && std::isnan(PyFloat_AsDouble(o.ptr()))) return t + " (NaN)";
  if (o.is_none()) return "None";
  return t;
}

StrRef str_ref(py::handle o, const char* what, std::size_t index = static_cast<std::size_t>(-1)) {
  if (!PyUnicode_Check(o.ptr())) {
    std::string msg = std::string(what);
    if (index != static_cast<std::size_t>(-1)) msg += "[" + std::to_string(index) + "]";
    throw py::type_error(msg + ": expected str, got " + describe(o));
  }
  return visit_str(o, [](const auto* p, std::size_t n) {
    return StrRef{p, n, static_cast<int>(sizeof(*p))};
  });
}

std::vector<StrRef> str_refs(const py::sequence& seq, const char* what) {
  std::vector<StrRef> out;
  out.reserve(py::len(seq));
  std::size_t i = 0;
  for (py::handle o : seq) out.push_back(str_ref(o, what, i++));
  return out;
}

template <class F>
decltype(auto) dispatch(const StrRef& s, F&& f) {
  switch (s.kind) {
    case 1: return f(static_cast<const std::uint8_t*>(s.data), s.n);
    case 2: return f(static_cast<const std::uint16_t*>(s.data), s.n);
    default: return f(static_cast<const std::uint32_t*>(s.data), s.n);
  }
}

std::vector<std::uint32_t> to_u32(const StrRef& s) {
  return dispatch(s, [](const auto* p, std::size_t n) {
    return std::vector<std::uint32_t>(p, p + n);
  });
}

std::size_t lev(const StrRef& a, const StrRef& b, bool bounded, std::size_t k) {
  return dispatch(a, [&](const auto* pa, std::size_t na) {
    return dispatch(b, [&](const auto* pb, std::size_t nb) { return levenshtein(pa, na, pb, nb, bounded, k); });
  });
}

py::object match_to_py(const Match& m) {
  if (!m.found()) return py::none();
  return py::make_tuple(m.start, m.end, m.distance);
}

// Symbols of a trie key: code points of a str, or non-negative ints < 2**32.
std::vector<std::uint32_t> symbols(py::handle o, int& kind) {
  if (PyUnicode_Check(o.ptr())) {
    kind = 0;
    return to_u32(str_ref(o, "key"));
  }
  kind = 1;
  if (py::isinstance<py::array>(o)) {
    py::array arr = py::reinterpret_borrow<py::array>(o);
    if (arr.ndim() != 1 || !(arr.dtype().kind() == 'i' || arr.dtype().kind() == 'u'))
      throw py::type_error("key: expected a str or a 1-D integer array, got array of dtype " +
                           std::string(py::str(arr.dtype())));
    auto a64 = py::array_t<std::int64_t, py::array::forcecast>::ensure(o);
    std::vector<std::uint32_t> out(static_cast<std::size_t>(a64.size()));
    auto r = a64.unchecked<1>();
    for (py::ssize_t i = 0; i < a64.size(); ++i) {
      if (r(i) < 0 || r(i) > 0xFFFFFFFFll) throw py::value_error("key: token ids must be in [0, 2**32)");
      out[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(r(i));
    }
    return out;
  }
  if (!py::isinstance<py::sequence>(o) || py::isinstance<py::bytes>(o))
    throw py::type_error("key: expected a str or a sequence of ints, got " + describe(o));
  py::sequence seq = py::reinterpret_borrow<py::sequence>(o);
  std::vector<std::uint32_t> out;
  out.reserve(py::len(seq));
  for (py::handle x : seq) {
    if (!PyLong_Check(x.ptr()) && !py::isinstance(x, py::module_::import("numpy").attr("integer")))
      throw py::type_error("key: token ids must be ints, got " + describe(x));
    const long long v = x.cast<long long>();
    if (v < 0 || v > 0xFFFFFFFFll) throw py::value_error("key: token ids must be in [0, 2**32)");
    out.push_back(static_cast<std::uint32_t>(v));
  }
  return out;
}

py::object symbols_to_py(const std::vector<std::uint32_t>& s, int kind) {
  if (kind == 0) {
    PyObject* o = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, s.data(), static_cast<Py_ssize_t>(s.size()));
    if (!o) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(o);
  }
  py::tuple t(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) t[i] = py::int_(s[i]);
  return std::move(t);
}

// 64-bit hash of a Bloom key: str (by code units), bytes, or int.
std::uint64_t key_hash(py::handle o) {
  if (PyUnicode_Check(o.ptr())) {
    StrRef s = str_ref(o, "key");
    return hash_bytes(s.data, s.n * static_cast<std::size_t>(s.kind), 0x5354520000000000ull + s.kind);
  }
  if (PyBytes_Check(o.ptr())) {
    return hash_bytes(PyBytes_AS_STRING(o.ptr()), static_cast<std::size_t>(PyBytes_GET_SIZE(o.ptr())),
                      0x4259544500000000ull);
  }
  if (PyLong_Check(o.ptr()) || py::isinstance(o, py::module_::import("numpy").attr("integer"))) {
    int overflow = 0;
    py::object as_int = py::reinterpret_steal<py::object>(PyNumber_Index(o.ptr()));
    if (!as_int) throw py::error_already_set();
    long long v = PyLong_AsLongLongAndOverflow(as_int.ptr(), &overflow);
    std::uint64_t u;
    if (overflow > 0) {
      unsigned long long uv = PyLong_AsUnsignedLongLong(as_int.ptr());
      if (PyErr_Occurred()) {
        PyErr_Clear();
        throw py::value_error("key: int keys must fit in 64 bits");
      }
      u = uv;
    } else if (overflow < 0) {
      throw py::value_error("key: int keys must fit in 64 bits");
    } else {
      u = static_cast<std::uint64_t>(v);
    }
    return mix64(u ^ 0x494E540000000000ull);
  }
  throw py::type_error("key: expected str, bytes or int, got " + describe(o));
}

std::vector<std::uint64_t> key_hashes(py::handle keys) {
  std::vector<std::uint64_t> out;
  if (py::isinstance<py::array>(keys)) {
    py::array arr = py::reinterpret_borrow<py::array>(keys);
    const char kd = arr.dtype().kind();
    if (kd == 'i' || kd == 'u') {
      auto a = py::array_t<std::int64_t, py::array::forcecast>::ensure(arr.attr("ravel")());
      auto r = a.unchecked<1>();
      out.resize(static_cast<std::size_t>(a.size()));
      for (py::ssize_t i = 0; i < a.size(); ++i)
        out[static_cast<std::size_t>(i)] = mix64(static_cast<std::uint64_t>(r(i)) ^ 0x494E540000000000ull);
      return out;
    }
    if (kd == 'U' || kd == 'S' || kd == 'O') keys = arr.attr("tolist")();
    else throw py::type_error("keys: unsupported array dtype " + std::string(py::str(arr.dtype())));
  }
  py::sequence seq = py::reinterpret_borrow<py::sequence>(keys);
  out.reserve(py::len(seq));
  std::size_t i = 0;
  for (py::handle o : seq) {
    try {
      out.push_back(key_hash(o));
    } catch (py::type_error& e) {
      throw py::type_error("keys[" + std::to_string(i) + "]: expected str, bytes or int, got " + describe(o));
    }
    ++i;
  }
  return out;
}

}  // namespace

void register_kernels(py::module_& m) {
  // --- edit distance -----------------------------------------------------
  m.def(
      "levenshtein",
      [](py::handle a, py::handle b, long long max_distance) {
        StrRef ra = str_ref(a, "a"), rb = str_ref(b, "b");
        py::gil_scoped_release nogil;
        return lev(ra, rb, max_distance >= 0, max_distance >= 0 ? static_cast<std::size_t>(max_distance) : 0);
      },
      py::arg("a"), py::arg("b"), py::arg("max_distance") = -1,
      "Levenshtein distance of two str (code points); with max_distance >= 0 the result is capped at "
      "max_distance + 1.");
  m.def(
      "levenshtein_pairwise",
      [](const py::sequence& a, const py::sequence& b, long long max_distance, long threads) {
        auto ra = str_refs(a, "a");
        auto rb = str_refs(b, "b");
        if (ra.size() != rb.size()) throw py::value_error("a and b must have the same length");
        py::array_t<std::int64_t> out(static_cast<py::ssize_t>(ra.size()));
        std::int64_t* o = out.mutable_data();
        {
          py::gil_scoped_release nogil;
          const bool bounded = max_distance >= 0;
          const std::size_t k = bounded ? static_cast<std::size_t>(max_distance) : 0;
          parallel_for(ra.size(), resolve_threads(threads), [&](std::size_t lo, std::size_t hi) {
            for (std::size_t i = lo; i < hi; ++i) o[i] = static_cast<std::int64_t>(lev(ra[i], rb[i], bounded, k));
          });
        }
        return out;
      },
      py::arg("a"), py::arg("b"), py::arg("max_distance") = -1, py::arg("threads") = 0);
  m.def(
      "levenshtein_cdist",
      [](const py::sequence& a, const py::sequence& b, long long max_distance, long threads) {
        auto ra = str_refs(a, "queries");
        auto rb = str_refs(b, "choices");
        py::array_t<std::int64_t> out({static_cast<py::ssize_t>(ra.size()), static_cast<py::ssize_t>(rb.size())});
        std::int64_t* o = out.mutable_data();
        {
          py::gil_scoped_release nogil;
          const bool bounded = max_distance >= 0;
          const std::size_t k = bounded ? static_cast<std::size_t>(max_distance) : 0;
          const std::size_t nb = rb.size();
          parallel_for(ra.size(), resolve_threads(threads), [&](std::size_t lo, std::size_t hi) {
            for (std::size_t i = lo; i < hi; ++i)
              for (std::size_t j = 0; j < nb; ++j)
                o[i * nb + j] = static_cast<std::int64_t>(lev(ra[i], rb[j], bounded, k));
          });
        }
        return out;
      },
      py::arg("queries"), py::arg("choices"), py::arg("max_distance") = -1, py::arg("threads") = 0);

  // --- span location -----------------------------------------------------
  m.def(
      "locate",
      [](py::handle pattern, py::handle text, std::size_t lo, std::size_t hi, long long max_distance) {
        StrRef p = str_ref(pattern, "pattern"), t = str_ref(text, "text");
        Match r;
        {
          py::gil_scoped_release nogil;
          auto pu = to_u32(p);
          r = dispatch(t, [&](const auto* tp, std::size_t) {
            return locate(pu.data(), pu.size(), tp, lo, hi, max_distance >= 0,
                          max_distance >= 0 ? static_cast<std::size_t>(max_distance) : 0);
          });
        }
        return match_to_py(r);
      },
      py::arg("pattern"), py::arg("text"), py::arg("lo"), py::arg("hi"), py::arg("max_distance") = -1);

  py::class_<Locator, std::shared_ptr<Locator>>(m, "Locator")
      .def(py::init([](py::handle text, std::size_t q) {
             StrRef t = str_ref(text, "text");
             py::gil_scoped_release nogil;
             return std::make_shared<Locator>(to_u32(t), q);
           }),
           py::arg("text"), py::arg("q") = 4)
      .def("__len__", &Locator::size)
      .def(
          "locate",
          [](const Locator& self, py::handle pattern, std::size_t lo, std::size_t hi, long long max_distance) {
            StrRef p = str_ref(pattern, "pattern");
            Match r;
            {
              py::gil_scoped_release nogil;
              PreparedPattern pat = dispatch(p, [](const auto* pp, std::size_t n) { return PreparedPattern(pp, n); });
              r = self.locate(pat, lo, hi, max_distance >= 0,
                              max_distance >= 0 ? static_cast<std::size_t>(max_distance) : 0);
            }
            return match_to_py(r);
          },
          py::arg("pattern"), py::arg("lo"), py::arg("hi"), py::arg("max_distance") = -1)
      .def(
          "locate_many",
          [](const Locator& self, const py::sequence& patterns, std::size_t lo, std::size_t hi,
             long long max_distance, long threads) {
            auto refs = str_refs(patterns, "patterns");
            py::array_t<std::int64_t> out({static_cast<py::ssize_t>(refs.size()), py::ssize_t{3}});
            std::int64_t* o = out.mutable_data();
            {
              py::gil_scoped_release nogil;
              parallel_for(refs.size(), resolve_threads(threads), [&](std::size_t a, std::size_t b) {
                for (std::size_t i = a; i < b; ++i) {
                  PreparedPattern pat =
                      dispatch(refs[i], [](const auto* pp, std::size_t n) { return PreparedPattern(pp, n); });
                  Match r = self.locate(pat, lo, hi, max_distance >= 0,
                                        max_distance >= 0 ? static_cast<std::size_t>(max_distance) : 0);
                  o[3 * i] = r.start;
                  o[3 * i + 1] = r.end;
                  o[3 * i + 2] = r.distance;
                }
              });
            }
            return out;
          },
          py::arg("patterns"), py::arg("lo"), py::arg("hi"), py::arg("max_distance") = -1,
          py::arg("threads") = 0);

  m.def(
      "recover_outlines",
      [](py::handle text, const py::sequence& heads, const py::sequence& tails, const std::vector<bool>& has_mask,
         double max_error, std::size_t window) {
        StrRef t = str_ref(text, "text");
        auto hr = str_refs(heads, "heads");
        auto tr = str_refs(tails, "tails");
        if (hr.size() != tr.size() || hr.size() != has_mask.size())
          throw py::value_error("heads, tails and has_mask must have the same length");
        std::vector<RecoveredChunk> res;
        {
          py::gil_scoped_release nogil;
          auto tu = to_u32(t);
          std::vector<OutlineSpec> specs(hr.size());
          for (std::size_t i = 0; i < hr.size(); ++i) {
            specs[i].head = to_u32(hr[i]);
            specs[i].tail = to_u32(tr[i]);
            specs[i].has_mask = has_mask[i];
          }
          OutlineRecoverer rec(tu.data(), tu.size(), max_error, window);
          res = rec.run(specs);
        }
        py::array_t<std::int64_t> out({static_cast<py::ssize_t>(res.size()), py::ssize_t{7}});
        auto w = out.mutable_unchecked<2>();
        for (std::size_t i = 0; i < res.size(); ++i) {
          const auto& r = res[i];
          const py::ssize_t x = static_cast<py::ssize_t>(i);
          w(x, 0) = r.start;
          w(x, 1) = r.end;
          w(x, 2) = r.match_start;
          w(x, 3) = r.match_end;
          w(x, 4) = r.head_distance;
          w(x, 5) = r.tail_distance;
          w(x, 6) = r.placed ? 1 : 0;
        }
        return out;
      },
      py::arg("text"), py::arg("heads"), py::arg("tails"), py::arg("has_mask"), py::arg("max_error"),
      py::arg("window"));

  // --- SimHash -------------------------------------------------------------
  m.def(
      "feature_hash",
      [](py::handle s) {
        StrRef r = str_ref(s, "feature");
        return dispatch(r, [](const auto* p, std::size_t n) {
          std::uint64_t h = kFnvOffset;
          for (std::size_t i = 0; i < n; ++i) h = fnv_step(h, lower_ascii(static_cast<std::uint32_t>(p[i])));
          return feature_hash_finish(h);
        });
      },
      py::arg("feature"), "64-bit hash of one SimHash feature string (ASCII lower-cased).");
  m.def(
      "simhash",
      [](const py::sequence& texts, const std::string& tokenizer, std::size_t ngram, py::object weights,
         long threads) {
        auto refs = str_refs(texts, "texts");
        SimTokenizer tok;
        if (tokenizer == "word") tok = SimTokenizer::Word;
        else if (tokenizer == "char") tok = SimTokenizer::Char;
        else throw py::value_error("tokenizer must be 'word' or 'char'");
        std::unique_ptr<FeatureWeights> wmap;
        if (!weights.is_none()) wmap = std::make_unique<FeatureWeights>(weights.cast<FeatureWeights>());
        py::array_t<std::uint64_t> out(static_cast<py::ssize_t>(refs.size()));
        std::uint64_t* o = out.mutable_data();
        {
          py::gil_scoped_release nogil;
          parallel_for(refs.size(), resolve_threads(threads), [&](std::size_t a, std::size_t b) {
            SimhashScratch scratch;
            for (std::size_t i = a; i < b; ++i)
              o[i] = dispatch(refs[i], [&](const auto* p, std::size_t n) {
                return simhash(p, n, tok, ngram, wmap.get(), scratch);
              });
          });
        }
        return out;
      },
      py::arg("texts"), py::arg("tokenizer") = "word", py::arg("ngram") = 3, py::arg("weights") = py::none(),
      py::arg("threads") = 1);
  m.def(
      "near_duplicate_pairs",
      [](py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast> hashes, int k) {
        const std::uint64_t* h = hashes.data();
        const std::size_t n = static_cast<std::size_t>(hashes.size());
        std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;
        {
          py::gil_scoped_release nogil;
          pairs = near_duplicate_pairs(h, n, k);
        }
        py::array_t<std::int64_t> out({static_cast<py::ssize_t>(pairs.size()), py::ssize_t{2}});
        std::int64_t* o = out.mutable_data();
        for (std::size_t i = 0; i < pairs.size(); ++i) {
          o[2 * i] = pairs[i].first;
          o[2 * i + 1] = pairs[i].second;
        }
        return out;
      },
      py::arg("hashes"), py::arg("k"));
  m.def(
      "near_duplicate_clusters",
      [](py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast> hashes, int k) {
        const std::uint64_t* h = hashes.data();
        const std::size_t n = static_cast<std::size_t>(hashes.size());
        std::vector<std::int64_t> labels;
        {
          py::gil_scoped_release nogil;
          labels = cluster_labels(n, near_duplicate_pairs(h, n, k));
        }
        return py::array_t<std::int64_t>(static_cast<py::ssize_t>(labels.size()), labels.data());
      },
      py::arg("hashes"), py::arg("k"));

  // --- Bloom filter --------------------------------------------------------
  py::class_<BloomFilter>(m, "BloomFilter")
      .def(py::init<std::uint64_t, double>(), py::arg("capacity"), py::arg("false_positive_rate"))
      .def_property_readonly("bits", &BloomFilter::bits)
      .def_property_readonly("hashes", &BloomFilter::hashes)
      .def_property_readonly("capacity", &BloomFilter::capacity)
      .def_property_readonly("false_positive_rate", &BloomFilter::fp_rate)
      .def_property_readonly("count", &BloomFilter::count)
      .def("add", [](BloomFilter& f, py::handle key) { return f.add_hash(key_hash(key)); })
      .def("contains", [](const BloomFilter& f, py::handle key) { return f.contains_hash(key_hash(key)); })
      .def("add_many",
           [](BloomFilter& f, py::handle keys) {
             auto hs = key_hashes(keys);
             std::size_t fresh = 0;
             py::gil_scoped_release nogil;
             for (auto h : hs) fresh += f.add_hash(h) ? 1 : 0;
             return fresh;
           })
      .def("contains_many",
           [](const BloomFilter& f, py::handle keys) {
             auto hs = key_hashes(keys);
             py::array_t<bool> out(static_cast<py::ssize_t>(hs.size()));
             bool* o = out.mutable_data();
             {
               py::gil_scoped_release nogil;
               for (std::size_t i = 0; i < hs.size(); ++i) o[i] = f.contains_hash(hs[i]);
             }
             return out;
           })
      .def("to_bytes", [](const BloomFilter& f) { return py::bytes(f.to_bytes()); })
      .def_static("from_bytes", [](const py::bytes& b) {
        std::string_view sv = b;
        return BloomFilter::from_bytes(sv.data(), sv.size());
      });

  // --- Trie ------------------------------------------------------------------
  py::class_<Trie>(m, "Trie")
      .def(py::init<>())
      .def("__len__", &Trie::size)
      .def_property_readonly("node_count", &Trie::node_count)
      .def("insert",
           [](Trie& t, py::handle key) {
             int kind;
             auto s = symbols(key, kind);
             return py::make_tuple(t.insert(s.data(), s.size()), kind);
           })
      .def("insert_many",
           [](Trie& t, const py::sequence& keys) {
             const std::size_t n = py::len(keys);
             if (n > 0 && PyUnicode_Check(py::handle(keys[0]).ptr())) {
               auto refs = str_refs(keys, "keys");
               std::size_t fresh = 0;
               {
                 py::gil_scoped_release nogil;
                 for (const auto& r : refs)
                   fresh += dispatch(r, [&](const auto* p, std::size_t m) { return t.insert(p, m) ? 1 : 0; });
               }
               return py::make_tuple(fresh, 0);
             }
             std::vector<std::vector<std::uint32_t>> all;
             all.reserve(n);
             std::size_t i = 0;
             for (py::handle k : keys) {
               int kind;
               all.push_back(symbols(k, kind));
               if (kind != 1)
                 throw py::type_error("keys[" + std::to_string(i) + "]: mixes str and token-id keys");
               ++i;
             }
             std::size_t fresh = 0;
             {
               py::gil_scoped_release nogil;
               for (auto& s : all) fresh += t.insert(s.data(), s.size()) ? 1 : 0;
             }
             return py::make_tuple(fresh, 1);
           })
      .def("contains",
           [](const Trie& t, py::handle key) {
             int kind;
             auto s = symbols(key, kind);
             return py::make_tuple(t.contains(s.data(), s.size()), kind);
           })
      .def("contains_many",
           [](const Trie& t, const py::sequence& keys, int kind) {
             const std::size_t n = py::len(keys);
             py::array_t<bool> out(static_cast<py::ssize_t>(n));
             bool* o = out.mutable_data();
             if (kind == 0) {
               auto refs = str_refs(keys, "keys");
               {
                 py::gil_scoped_release nogil;
                 for (std::size_t i = 0; i < n; ++i)
                   o[i] = dispatch(refs[i], [&](const auto* p, std::size_t m) { return t.contains(p, m); });
               }
               return out;
             }
             std::vector<std::vector<std::uint32_t>> all;
             all.reserve(n);
             std::size_t i = 0;
             for (py::handle k : keys) {
               int kd;
               all.push_back(symbols(k, kd));
               if (kd != 1) throw py::type_error("keys[" + std::to_string(i) + "]: expected a token-id sequence, got str");
               ++i;
             }
             {
               py::gil_scoped_release nogil;
               for (std::size_t j = 0; j < n; ++j) o[j] = t.contains(all[j].data(), all[j].size());
             }
             return out;
           })
      .def("count_prefix",
           [](const Trie& t, py::handle key) {
             int kind;
             auto s = symbols(key, kind);
             return t.count_prefix(s.data(), s.size());
           })
      .def("longest_common_prefix",
           [](const Trie& t, py::handle key) {
             int kind;
             auto s = symbols(key, kind);
             return t.longest_common_prefix(s.data(), s.size());
           })
      .def("longest_prefix_key",
           [](const Trie& t, py::handle key) {
             int kind;
             auto s = symbols(key, kind);
             return t.longest_prefix_key(s.data(), s.size());
           })
      .def("keys_with_prefix", [](const Trie& t, py::handle key, std::size_t limit, int out_kind) {
        int kind;
        auto s = symbols(key, kind);
        std::vector<std::vector<std::uint32_t>> keys;
        {
          py::gil_scoped_release nogil;
          keys = t.keys_with_prefix(s.data(), s.size(), limit);
        }
        py::list out;
        for (auto& k : keys) out.append(symbols_to_py(k, out_kind));
        return out;
      });

  m.def(
      "unique_prefix_lengths",
      [](const py::sequence& seqs) {
        std::vector<std::vector<std::uint32_t>> all;
        all.reserve(py::len(seqs));
        int first = -1;
        std::size_t i = 0;
        for (py::handle k : seqs) {
          int kind;
          all.push_back(symbols(k, kind));
          if (first < 0) first = kind;
          else if (kind != first)
            throw py::type_error("sequences[" + std::to_string(i) + "]: mixes str and token-id sequences");
          ++i;
        }
        py::array_t<std::int64_t> out(static_cast<py::ssize_t>(all.size()));
        std::int64_t* o = out.mutable_data();
        {
          py::gil_scoped_release nogil;
          Trie t;
          for (auto& s : all) t.insert(s.data(), s.size(), /*count_duplicates=*/true);
          for (std::size_t j = 0; j < all.size(); ++j)
            o[j] = static_cast<std::int64_t>(t.unique_prefix_length(all[j].data(), all[j].size()));
        }
        return out;
      },
      py::arg("sequences"));
}

}  // namespace momoka::bindings
