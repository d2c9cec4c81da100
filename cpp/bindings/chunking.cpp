// Bindings of the chunking kernels (cpp/include/momoka/chunk.hpp). Each takes
// a Python str without copying it (ustr.hpp) and returns int64 numpy arrays
// of Python str offsets; the work runs with the GIL released.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <algorithm>
#include <string>
#include <type_traits>
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

py::array_t<std::int64_t> word_starts(py::handle text, bool solo) {
  auto v = visit_str(text, [solo](const auto* p, std::size_t n) {
    py::gil_scoped_release release;
    return momoka::chunk::word_starts(p, n, solo);
  });
  return vec_to_array(v);
}

py::tuple word_ids(py::handle text, bool solo) {
  auto w = visit_str(text, [solo](const auto* p, std::size_t n) {
    py::gil_scoped_release release;
    return momoka::chunk::word_ids(p, n, solo);
  });
  return py::make_tuple(vec_to_array(w.starts), vec_to_array(w.ends), vec_to_array(w.ids), vec_to_array(w.first));
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

using I64Array = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

// ranges: (R, 2) spans processed in order; levels: list of separator strings
// (searched inside each range) or 1-d arrays of sorted cut offsets.
py::array_t<std::int64_t> recursive_pack(py::handle text, I64Array ranges, py::list levels, std::int64_t size,
                                         py::object atom_starts, py::object cum, bool keep_oversize,
                                         py::object lead) {
  if (size < 1) throw py::value_error("size must be >= 1");
  if (ranges.ndim() != 2 || ranges.shape(1) != 2) throw py::value_error("ranges must be an (R, 2) array");
  std::vector<I64Array> keep;  // keep converted arrays alive
  std::vector<momoka::chunk::CutLevel> lv;
  for (py::handle item : levels) {
    momoka::chunk::CutLevel level;
    if (py::isinstance<py::str>(item)) {  // a separator searched on demand
      std::u32string u = to_u32(item);
      if (u.empty()) throw py::value_error("separator must not be empty");
      level.pattern.assign(u.begin(), u.end());
      level.sep_len = static_cast<std::int64_t>(u.size());
    } else {  // sorted cut offsets
      I64Array cuts = item.cast<I64Array>();
      if (cuts.ndim() != 1) throw py::value_error("cut arrays must be 1-d");
      keep.push_back(cuts);
      level.cuts = cuts.data();
      level.n = static_cast<std::size_t>(cuts.size());
    }
    lv.push_back(std::move(level));
  }
  const std::int64_t* as = nullptr;
  const std::int64_t* cm = nullptr;
  std::size_t na = 0;
  I64Array a_arr, c_arr;
  if (!atom_starts.is_none()) {
    a_arr = atom_starts.cast<I64Array>();
    c_arr = cum.cast<I64Array>();
    if (c_arr.size() != a_arr.size() + 1) throw py::value_error("cum must have one more entry than atom_starts");
    as = a_arr.data();
    cm = c_arr.data();
    na = static_cast<std::size_t>(a_arr.size());
  }
  const std::int64_t* ld = nullptr;
  I64Array l_arr;
  if (!lead.is_none()) {
    if (!as) throw py::value_error("lead needs atom_starts");
    l_arr = lead.cast<I64Array>();
    if (static_cast<std::size_t>(l_arr.size()) != na) throw py::value_error("lead must have one entry per atom");
    ld = l_arr.data();
  }
  const std::int64_t* r = ranges.data();
  const auto R = static_cast<std::size_t>(ranges.shape(0));
  std::vector<std::int64_t> flat = visit_str(text, [&](const auto* p, std::size_t n) {
    py::gil_scoped_release release;
    using CharT = std::remove_cv_t<std::remove_pointer_t<decltype(p)>>;
    momoka::chunk::RecursivePacker<CharT> packer(p, n, lv, size, as, cm, na, keep_oversize, ld);
    const auto N = static_cast<std::int64_t>(n);
    for (std::size_t k = 0; k < R; ++k) {
      const std::int64_t lo = std::clamp<std::int64_t>(r[2 * k], 0, N);
      const std::int64_t hi = std::clamp<std::int64_t>(r[2 * k + 1], lo, N);
      if (lo < hi) packer.run(lo, hi);
    }
    return std::move(packer.out);
  });
  py::array_t<std::int64_t> out({static_cast<py::ssize_t>(flat.size() / 2), static_cast<py::ssize_t>(2)});
  if (!flat.empty()) std::memcpy(out.mutable_data(), flat.data(), flat.size() * sizeof(std::int64_t));
  return out;
}

}  // namespace

void register_chunking(py::module_& m) {
  m.def("chunk_word_starts", &word_starts, py::arg("text"), py::arg("solo") = false,
        "Start offsets (int64) of the maximal non-whitespace runs of text (whitespace as str.isspace); with "
        "solo=True each character of a script written without spaces (CJK, kana, Thai...) is a word by itself.");
  m.def("chunk_word_ids", &word_ids, py::arg("text"), py::arg("solo") = false,
        "Words of text (maximal non-whitespace runs; solo as for chunk_word_starts) as (starts, ends, ids, "
        "first): ids[k] numbers word k by distinct content in order of first appearance; first[d] is the word "
        "index of distinct word d.");
  m.def("chunk_trim_bounds", &trim_bounds, py::arg("text"), py::arg("cuts"),
        "For each cut offset: (first non-whitespace offset at or after it, one past the last "
        "non-whitespace offset before it), as two int64 arrays.");
  m.def("chunk_find_all", &find_all, py::arg("text"), py::arg("sep"), py::arg("lo"), py::arg("hi"),
        "Offsets where sep occurs inside text[lo:hi] (overlapping occurrences included).");
  m.def("chunk_recursive_pack", &recursive_pack, py::arg("text"), py::arg("ranges"), py::arg("levels"),
        py::arg("size"), py::arg("atom_starts") = py::none(), py::arg("cum") = py::none(),
        py::arg("keep_oversize") = false, py::arg("lead") = py::none(),
        "Recursive greedy packing of each (lo, hi) range under size (chars, or tokens when atom_starts/cum "
        "are given; lead[k]: tokens added when atom k starts a span) over levels (a separator str, or a sorted "
        "array of cut offsets); returns untrimmed (K, 2) spans.");
}

}  // namespace momoka::bindings
