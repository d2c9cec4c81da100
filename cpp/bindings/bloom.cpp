// Binding of the Bloom filter (cpp/include/momoka/bloom.hpp). Keys (str, bytes
// or int) are hashed here, then the GIL is released around the filter work; the
// typed API is python/momoka/kernels.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "momoka/bloom.hpp"
#include "momoka/kernel_hash.hpp"
#include "ustr.hpp"

namespace py = pybind11;

namespace momoka::bindings {
namespace {

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

void register_bloom(py::module_& m) {
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
}

}  // namespace momoka::bindings
