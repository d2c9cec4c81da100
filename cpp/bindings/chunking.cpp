// Bindings of the chunking kernels (cpp/include/momoka/chunk.hpp). Each takes
// a Python str without copying it (ustr.hpp) and returns int64 numpy arrays
// of Python str offsets; the work runs with the GIL released.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <string>
#include <vector>

#include "momoka/chunk.hpp"
#include "ustr.hpp"

namespace py = pybind11;

namespace momoka::bindings {
namespace {

py::array_t<std::int64_t> vec_to_array(const std::vector<std::int64_t>& v) {
  py::array_t<std::int64_t> a(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(std::int64_t));
  return a;
}

py::array_t<std::int64_t> word_starts(py::handle text) {
  auto v = visit_str(text, [](const auto* p, std::size_t n) {
    py::gil_scoped_release release;
    return momoka::chunk::word_starts(p, n);
  });
  return vec_to_array(v);
}

py::tuple trim_bounds(py::handle text, py::array_t<std::int64_t, py::array::c_style | py::array::forcecast> cuts) {
  if (cuts.ndim() != 1) throw py::value_error("cuts must be a 1-d array of offsets");
  const auto m = static_cast<std::size_t>(cuts.size());
  py::array_t<std::int64_t> lo(static_cast<py::ssize_t>(m)), hi(static_cast<py::ssize_t>(m));
  const std::int64_t* c = cuts.data();
  std::int64_t* l = lo.mutable_data();
  std::int64_t* h = hi.mutable_data();
  visit_str(text, [&](const auto* p, std::size_t n) {
    py::gil_scoped_release release;
    momoka::chunk::trim_bounds(p, n, c, m, l, h);
    return 0;
  });
  return py::make_tuple(lo, hi);
}

py::array_t<std::int64_t> find_all(py::handle text, py::handle sep, std::int64_t lo, std::int64_t hi) {
  std::u32string s = to_u32(sep);
  if (s.empty()) throw py::value_error("separator must not be empty");
  std::vector<std::uint32_t> pat(s.begin(), s.end());
  auto v = visit_str(text, [&](const auto* p, std::size_t n) {
    const auto N = static_cast<std::int64_t>(n);
    const std::int64_t a = lo < 0 ? 0 : (lo > N ? N : lo);
    const std::int64_t b = hi < a ? a : (hi > N ? N : hi);
    py::gil_scoped_release release;
    return momoka::chunk::find_all(p, static_cast<std::size_t>(a), static_cast<std::size_t>(b), pat.data(),
                                   pat.size());
  });
  return vec_to_array(v);
}

}  // namespace

void register_chunking(py::module_& m) {
  m.def("chunk_word_starts", &word_starts, py::arg("text"),
        "Start offsets (int64) of the maximal non-whitespace runs of text (whitespace as str.isspace).");
  m.def("chunk_trim_bounds", &trim_bounds, py::arg("text"), py::arg("cuts"),
        "For each cut offset: (first non-whitespace offset at or after it, one past the last "
        "non-whitespace offset before it), as two int64 arrays.");
  m.def("chunk_find_all", &find_all, py::arg("text"), py::arg("sep"), py::arg("lo"), py::arg("hi"),
        "Offsets where sep occurs inside text[lo:hi] (overlapping occurrences included).");
}

}  // namespace momoka::bindings
