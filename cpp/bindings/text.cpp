// Bindings of the text kernels: sentence and paragraph segmentation.
// Offsets are Python str offsets (code points); results are int64 numpy arrays.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "momoka/segment.hpp"
#include "ustr.hpp"

namespace py = pybind11;

namespace momoka::bindings {
namespace {

using momoka::text::Segmenter;
using momoka::text::SpanList;

py::array_t<std::int64_t> to_array(const std::vector<std::int64_t>& v) {
  py::array_t<std::int64_t> a(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(std::int64_t));
  return a;
}

py::tuple to_pair(const SpanList& s) { return py::make_tuple(to_array(s.starts), to_array(s.ends)); }

// Runs f(data, n) on the str's storage with the GIL released. The str is
// immutable and kept alive by the caller's reference, so the buffer stays
// valid while the GIL is released.
template <class F>
SpanList run_on_str(py::handle text, F&& f) {
  return visit_str(text, [&](const auto* p, std::size_t n) {
    py::gil_scoped_release release;
    return f(p, n);
  });
}

}  // namespace

void register_text(py::module_& m) {
  py::class_<Segmenter>(m, "Segmenter", R"doc(
Rule-based sentence segmenter over Python str code points.

Segmenter(newlines="auto", abbreviations=()) builds a segmenter;
``newlines`` says what a single line break does: "ignore" (whitespace),
"break" (ends a sentence) or "auto" (ends one after a heading-like line);
``abbreviations`` adds words that never end a sentence (case-insensitive,
a trailing period is ignored: "Ph.D", "approx.").
)doc")
      .def(py::init([](const std::string& newlines, const py::iterable& abbreviations) {
             momoka::text::NewlineMode mode;
             if (newlines == "auto") mode = momoka::text::NewlineMode::kAuto;
             else if (newlines == "break") mode = momoka::text::NewlineMode::kBreak;
             else if (newlines == "ignore") mode = momoka::text::NewlineMode::kIgnore;
             else throw py::value_error("newlines must be 'auto', 'break' or 'ignore', got '" + newlines + "'");
             auto s = std::make_unique<Segmenter>(mode);
             for (py::handle a : abbreviations) s->add_abbreviation(to_u32(a));
             return s;
           }),
           py::arg("newlines") = "auto", py::arg("abbreviations") = py::tuple())
      .def_property_readonly("newlines", [](const Segmenter& s) {
        switch (s.newlines()) {
          case momoka::text::NewlineMode::kBreak: return "break";
          case momoka::text::NewlineMode::kIgnore: return "ignore";
          default: return "auto";
        }
      })
      .def(
          "split",
          [](const Segmenter& seg, py::object text) {
            SpanList r = run_on_str(text, [&](const auto* p, std::size_t n) { return seg.split(p, n); });
            return to_pair(r);
          },
          py::arg("text"),
          "Sentence spans of ``text`` as (starts, ends) int64 arrays of str offsets.")
      .def(
          "split_within",
          [](const Segmenter& seg, py::object text, py::array_t<std::int64_t, py::array::c_style | py::array::forcecast> starts,
             py::array_t<std::int64_t, py::array::c_style | py::array::forcecast> ends) {
            if (starts.ndim() != 1 || ends.ndim() != 1 || starts.shape(0) != ends.shape(0)) {
              throw py::value_error("starts and ends must be 1-d arrays of the same length");
            }
            const std::int64_t* s = starts.data();
            const std::int64_t* e = ends.data();
            const std::size_t count = static_cast<std::size_t>(starts.shape(0));
            SpanList r = run_on_str(text, [&](const auto* p, std::size_t n) {
              return seg.split_within(p, n, s, e, count);
            });
            return to_pair(r);
          },
          py::arg("text"), py::arg("starts"), py::arg("ends"),
          "Sentence spans inside each [starts[k], ends[k]) span (e.g. paragraphs), in order.");

  m.def(
      "split_paragraphs",
      [](py::object text) {
        SpanList r = run_on_str(
            text, [](const auto* p, std::size_t n) { return momoka::text::split_paragraphs(p, n); });
        return to_pair(r);
      },
      py::arg("text"),
      "Paragraph spans (blank-line separated, whitespace-trimmed) as (starts, ends) int64 arrays.");
}

}  // namespace momoka::bindings
