// momoka._core: the one native extension module. Each area of the core has
// its own binding file exposing a register_* function; this file only wires
// them together, so areas can grow independently.
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace momoka::bindings {
void register_text(py::module_& m);     // text.cpp: sentence / paragraph segmentation
void register_edit_distance(py::module_& m);  // edit_distance.cpp: Levenshtein, locate, Locator
void register_outlines(py::module_& m);       // outlines.cpp: outline recovery
void register_simhash(py::module_& m);        // simhash.cpp: SimHash, near-duplicate pairs / clusters
void register_bloom(py::module_& m);          // bloom.cpp: Bloom filter
void register_trie(py::module_& m);           // trie.cpp: trie, unique prefix lengths
void register_mcts(py::module_& m);     // mcts.cpp: the ask/tell MCTS engine
void register_bm25(py::module_& m);     // bm25.cpp: tokenisation, BM25 index, top-k
void register_chunking(py::module_& m);  // chunking.cpp: word starts, whitespace trimming, separator search
void register_llama_decode(py::module_& m);  // llama_decode.cpp: the native Llama decoder
}  // namespace momoka::bindings

#ifndef MOMOKA_VERSION
#error "MOMOKA_VERSION must be defined by the build (CMakeLists.txt takes it from pyproject.toml)"
#endif

PYBIND11_MODULE(_core, m) {
  m.doc() = "momoka native core (C++17): text kernels, MCTS engine, BM25, Llama decoder";
  m.attr("__version__") = MOMOKA_VERSION;
  momoka::bindings::register_text(m);
  momoka::bindings::register_edit_distance(m);
  momoka::bindings::register_outlines(m);
  momoka::bindings::register_simhash(m);
  momoka::bindings::register_bloom(m);
  momoka::bindings::register_trie(m);
  momoka::bindings::register_mcts(m);
  momoka::bindings::register_bm25(m);
  momoka::bindings::register_chunking(m);
  momoka::bindings::register_llama_decode(m);
}
