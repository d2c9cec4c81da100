// Zero-copy access to a Python str as code units of its PEP 393 storage.
//
// A Python str is stored as 1, 2 or 4 bytes per code point. Handing the raw
// buffer to a kernel templated on the unit type means every index the kernel
// computes is already a Python str offset (code points), with no UTF-8
// round trip and no copy. Kernels in cpp/include take (const CharT*, size_t).
#pragma once

#include <pybind11/pybind11.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace momoka::bindings {

namespace py = pybind11;

// Calls f(const CharT* data, size_t length) with CharT one of uint8_t
// (Latin-1), uint16_t (UCS-2) or uint32_t (UCS-4). Throws TypeError for
// non-str objects.
template <class F>
decltype(auto) visit_str(py::handle obj, F&& f) {
  PyObject* o = obj.ptr();
  if (!PyUnicode_Check(o)) {
    throw py::type_error(std::string("expected str, got ") + Py_TYPE(o)->tp_name);
  }
#if PY_VERSION_HEX < 0x030C0000
  if (PyUnicode_READY(o) != 0) throw py::error_already_set();
#endif
  const Py_ssize_t n = PyUnicode_GET_LENGTH(o);
  void* data = PyUnicode_DATA(o);
  switch (PyUnicode_KIND(o)) {
    case PyUnicode_1BYTE_KIND:
      return f(static_cast<const std::uint8_t*>(data), static_cast<std::size_t>(n));
    case PyUnicode_2BYTE_KIND:
      return f(static_cast<const std::uint16_t*>(data), static_cast<std::size_t>(n));
    default:
      return f(static_cast<const std::uint32_t*>(data), static_cast<std::size_t>(n));
  }
}

// Copies a str to UTF-32 (for kernels that need one unit type for two
// strings of different kinds, e.g. edit distance between a Latin-1 pattern
// and a UCS-2 text).
inline std::u32string to_u32(py::handle obj) {
  return visit_str(obj, [](const auto* p, std::size_t n) {
    std::u32string s(n, U'\0');
    for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char32_t>(p[i]);
    return s;
  });
}

// A borrowed view of a Python str's storage (valid while the str lives).
struct StrRef {
  const void* data = nullptr;
  std::size_t n = 0;
  int kind = 1;  // bytes per code unit
};

inline std::string describe(py::handle o) {
  std::string t = Py_TYPE(o.ptr())->tp_name;
  if (PyFloat_Check(o.ptr()) && std::isnan(PyFloat_AsDouble(o.ptr()))) return t + " (NaN)";
  if (o.is_none()) return "None";
  return t;
}

inline StrRef str_ref(py::handle o, const char* what, std::size_t index = static_cast<std::size_t>(-1)) {
  if (!PyUnicode_Check(o.ptr())) {
    std::string msg = std::string(what);
    if (index != static_cast<std::size_t>(-1)) msg += "[" + std::to_string(index) + "]";
    throw py::type_error(msg + ": expected str, got " + describe(o));
  }
  return visit_str(o, [](const auto* p, std::size_t n) {
    return StrRef{p, n, static_cast<int>(sizeof(*p))};
  });
}

inline std::vector<StrRef> str_refs(const py::sequence& seq, const char* what) {
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

inline std::vector<std::uint32_t> to_u32(const StrRef& s) {
  return dispatch(s, [](const auto* p, std::size_t n) {
    return std::vector<std::uint32_t>(p, p + n);
  });
}

}  // namespace momoka::bindings
