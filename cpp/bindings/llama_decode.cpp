// Bindings of the native Llama decoder (cpp/include/momoka/llama_decode.hpp): a
// matrix is a dict of numpy arrays (codes, scales, offsets), converted once; the
// GIL is released while tokens run. The typed API is python/momoka/models/causal_native.py.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "momoka/llama_decode.hpp"

namespace py = pybind11;

namespace momoka::bindings {

namespace {

using llm::Codes;
using llm::Matrix;
using llm::Simd;

template <class T>
std::vector<T> vec(const py::handle& h, const char* what) {
  auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(h);
  if (!a) throw py::type_error(std::string(what) + " must be an array");
  return std::vector<T>(a.data(), a.data() + a.size());
}

template <class T>
std::vector<T> opt_vec(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return {};
  return vec<T>(d[key], key);
}

Matrix matrix(const py::dict& d) {
  Matrix w;
  w.rows = d["rows"].cast<int>();
  w.cols = d["cols"].cast<int>();
  const auto codes = d["codes"].cast<std::string>();
  if (codes == "q4k" || codes == "q6k") {  // GGUF superblocks as the file stores them, re-laid here
    const bool q4 = codes == "q4k";
    auto raw = py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast>::ensure(d["raw"]);
    if (!raw) throw py::type_error("raw must be a uint8 array");
    if (w.rows <= 0 || w.cols <= 0 || w.cols % llm::kq::kSuper)
      throw py::value_error(codes + " rows must be whole superblocks of 256 values");
    const std::size_t want = static_cast<std::size_t>(w.rows) * (w.cols / llm::kq::kSuper) *
                             (q4 ? llm::kq::kGgufQ4Bytes : llm::kq::kGgufQ6Bytes);
    if (static_cast<std::size_t>(raw.size()) != want)
      throw py::value_error(codes + ": " + std::to_string(raw.size()) + " bytes, expected " + std::to_string(want));
    const std::uint8_t* p = raw.data();
    const int rows = w.rows, cols = w.cols;
    {
      py::gil_scoped_release nogil;
      w = Matrix::from_gguf(q4 ? Codes::Q4K : Codes::Q6K, p, rows, cols);
    }
    w.bias = opt_vec<float>(d, "bias");
    return w;
  }
  if (codes == "u4") w.codes = Codes::U4;
  else if (codes == "i8") w.codes = Codes::I8;
  else if (codes == "i8h") w.codes = Codes::I8H;
  else if (codes == "f32") w.codes = Codes::F32;
  else throw py::value_error("codes must be 'u4', 'i8', 'i8h', 'f32', 'q4k' or 'q6k', not '" + codes + "'");
  if (w.codes == Codes::F32) {
    w.f = vec<float>(d["f"], "f");
  } else {
    w.q = vec<std::uint8_t>(d["q"], "q");
    w.d = vec<float>(d["d"], "d");
    w.m = opt_vec<float>(d, "m");
  }
  w.bias = opt_vec<float>(d, "bias");
  return w;
}

Simd simd_of(const std::string& name) {
  if (name == "auto") return llm::best_simd();
  if (name == "avx512") return Simd::Avx512;
  if (name == "avx2") return Simd::Avx2;
  if (name == "scalar") return Simd::Scalar;
  throw py::value_error("simd must be 'auto', 'avx512', 'avx2' or 'scalar', not '" + name + "'");
}

}  // namespace

void register_llama_decode(py::module_& m) {
  m.def("llama_simd", [] { return std::string(llm::simd_name(llm::best_simd())); },
        "The best kernels the native decoder has on this CPU: 'avx512', 'avx2' or 'scalar'.");

  m.def(
      "llama_matmul",
      [](const py::dict& w, py::array_t<float, py::array::c_style | py::array::forcecast> x, const std::string& simd) {
        Matrix W = matrix(w);
        W.check("matrix", W.rows, W.cols);
        const Simd s = simd_of(simd);
        if (s > llm::best_simd()) throw py::value_error("this CPU has no " + simd + " kernels");
        if (x.ndim() != 2 || x.shape(1) != W.cols) throw py::value_error("x must be (n, cols)");
        const int n = static_cast<int>(x.shape(0));
        py::array_t<float> y({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(W.rows)});
        const float* xp = x.data();
        float* yp = y.mutable_data();
        {
          py::gil_scoped_release nogil;
          llm::matmul(s, W, xp, n, W.cols, yp, W.rows, 0, W.rows);
        }
        return y;
      },
      py::arg("matrix"), py::arg("x"), py::arg("simd") = "auto",
      "x @ W.T for a matrix given as the decoder takes it (a test entry point: the matrix is copied in on every call).");

  py::class_<llm::Decoder>(m, "LlamaDecoder")
      .def(py::init([](const py::dict& shape, const py::list& layers, const py::dict& embed, py::object head,
                       py::object out_norm, int n_ctx, int threads, const std::string& simd) {
             llm::Shape s;
             s.n_layers = shape["n_layers"].cast<int>();
             s.hidden = shape["hidden"].cast<int>();
             s.n_heads = shape["n_heads"].cast<int>();
             s.n_kv_heads = shape["n_kv_heads"].cast<int>();
             s.head_dim = shape["head_dim"].cast<int>();
             s.ffn = shape["ffn"].cast<int>();
             s.vocab = shape["vocab"].cast<int>();
             s.eps = shape["eps"].cast<float>();
             s.rope_theta = shape["rope_theta"].cast<float>();
             s.rope_scale = shape["rope_scale"].cast<float>();
             std::vector<llm::Layer> ls;
             ls.reserve(layers.size());
             for (const auto& item : layers) {
               const auto d = item.cast<py::dict>();
               llm::Layer L;
               L.attn_norm = vec<float>(d["attn_norm"], "attn_norm");
               L.ffn_norm = vec<float>(d["ffn_norm"], "ffn_norm");
               L.q = matrix(d["attn_q"].cast<py::dict>());
               L.k = matrix(d["attn_k"].cast<py::dict>());
               L.v = matrix(d["attn_v"].cast<py::dict>());
               L.o = matrix(d["attn_output"].cast<py::dict>());
               L.gate = matrix(d["ffn_gate"].cast<py::dict>());
               L.up = matrix(d["ffn_up"].cast<py::dict>());
               L.down = matrix(d["ffn_down"].cast<py::dict>());
               ls.push_back(std::move(L));
             }
             Matrix h;
             if (!head.is_none()) h = matrix(head.cast<py::dict>());
             return new llm::Decoder(s, std::move(ls), matrix(embed), std::move(h), vec<float>(out_norm, "out_norm"),
                                     n_ctx, threads, simd_of(simd));
           }),
           py::arg("shape"), py::arg("layers"), py::arg("embed"), py::arg("head"), py::arg("out_norm"),
           py::arg("n_ctx"), py::arg("threads"), py::arg("simd") = "auto")
      .def(
          "forward",
          [](llm::Decoder& self, py::array_t<std::int32_t, py::array::c_style | py::array::forcecast> ids) {
            if (ids.ndim() != 1) throw py::value_error("ids must be one-dimensional");
            py::array_t<float> logits(static_cast<py::ssize_t>(self.shape().vocab));
            const std::int32_t* p = ids.data();
            const int n = static_cast<int>(ids.size());
            float* out = logits.mutable_data();
            {
              py::gil_scoped_release nogil;
              self.forward(p, n, out);
            }
            return logits;
          },
          py::arg("ids"), "Append the tokens and return the logits after the last one.")
      .def(
          "forward_rows",
          [](llm::Decoder& self, py::array_t<std::int32_t, py::array::c_style | py::array::forcecast> ids, int n_out) {
            if (ids.ndim() != 1) throw py::value_error("ids must be one-dimensional");
            const int n = static_cast<int>(ids.size());
            if (n_out < 1 || n_out > n) throw py::value_error("n_out must lie in [1, len(ids)]");
            py::array_t<float> logits({static_cast<py::ssize_t>(n_out), static_cast<py::ssize_t>(self.shape().vocab)});
            const std::int32_t* p = ids.data();
            float* out = logits.mutable_data();
            {
              py::gil_scoped_release nogil;
              self.forward(p, n, out, n_out);
            }
            return logits;
          },
          py::arg("ids"), py::arg("n_out"),
          "Append the tokens and return the logits after each of the last n_out of them, (n_out, vocab).")
      .def("reset", &llm::Decoder::reset, "Forget the sequence.")
      .def("truncate", &llm::Decoder::truncate, py::arg("n"),
           "Keep only the sequence's first n tokens (their cache stays valid).")
      .def_property_readonly("n_past", &llm::Decoder::n_past)
      .def_property_readonly("n_ctx", &llm::Decoder::n_ctx)
      .def_property_readonly("threads", &llm::Decoder::threads)
      .def_property_readonly("simd", [](const llm::Decoder& d) { return std::string(llm::simd_name(d.simd())); });
}

}  // namespace momoka::bindings
