// Bindings of edit distance and fuzzy span location
// (cpp/include/momoka/{edit_distance, locate}.hpp): levenshtein, its pairwise and
// all-pairs batches, locate and the reusable Locator. Strings are read as raw
// code-unit views (zero copy) and the GIL is released around the work. The
// typed, validated API is python/momoka/kernels.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "momoka/edit_distance.hpp"
#include "momoka/kernel_parallel.hpp"
#include "momoka/locate.hpp"
#include "ustr.hpp"

namespace py = pybind11;

namespace momoka::bindings {
namespace {

std::size_t lev(const StrRef& a, const StrRef& b, bool bounded, std::size_t k) {
  return dispatch(a, [&](const auto* pa, std::size_t na) {
    return dispatch(b, [&](const auto* pb, std::size_t nb) { return levenshtein(pa, na, pb, nb, bounded, k); });
  });
}

py::object match_to_py(const Match& m) {
  if (!m.found()) return py::none();
  return py::make_tuple(m.start, m.end, m.distance);
}

}  // namespace

void register_edit_distance(py::module_& m) {
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
}

}  // namespace momoka::bindings
