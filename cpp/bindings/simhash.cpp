// Bindings of SimHash near-duplicate detection (cpp/include/momoka/simhash.hpp):
// feature hashing, batch SimHash fingerprints and near-duplicate pairs/clusters.
// The GIL is released around the work; the typed API is python/momoka/kernels.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "momoka/kernel_hash.hpp"
#include "momoka/kernel_parallel.hpp"
#include "momoka/simhash.hpp"
#include "ustr.hpp"

namespace py = pybind11;

namespace momoka::bindings {

void register_simhash(py::module_& m) {
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
        else if (tokenizer == "word+char") tok = SimTokenizer::WordChar;
        else throw py::value_error("tokenizer must be 'word', 'char' or 'word+char'");
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
}

}  // namespace momoka::bindings
