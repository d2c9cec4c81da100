// Bindings of the trie (cpp/include/momoka/trie.hpp) over str code points or
// token ids, and the batch unique-prefix lengths. The GIL is released around the
// work; the typed API is python/momoka/kernels.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "momoka/trie.hpp"
#include "ustr.hpp"

namespace py = pybind11;

namespace momoka::bindings {
namespace {

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

}  // namespace

void register_trie(py::module_& m) {
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
