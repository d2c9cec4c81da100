// Binding of outline recovery (cpp/include/momoka/outlines.hpp): place chunk
// outlines (head ... tail) back onto the text they were written from. The GIL is
// released around the work; the typed API is python/momoka/kernels.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "momoka/outlines.hpp"
#include "ustr.hpp"

namespace py = pybind11;

namespace momoka::bindings {

void register_outlines(py::module_& m) {
  m.def(
      "recover_outlines",
      [](py::handle text, const py::sequence& heads, const py::sequence& tails, const std::vector<bool>& has_mask,
         double max_error, std::size_t window) {
        StrRef t = str_ref(text, "text");
        auto hr = str_refs(heads, "heads");
        auto tr = str_refs(tails, "tails");
        if (hr.size() != tr.size() || hr.size() != has_mask.size())
          throw py::value_error("heads, tails and has_mask must have the same length");
        std::vector<RecoveredChunk> res;
        {
          py::gil_scoped_release nogil;
          auto tu = to_u32(t);
          std::vector<OutlineSpec> specs(hr.size());
          for (std::size_t i = 0; i < hr.size(); ++i) {
            specs[i].head = to_u32(hr[i]);
            specs[i].tail = to_u32(tr[i]);
            specs[i].has_mask = has_mask[i];
          }
          OutlineRecoverer rec(tu.data(), tu.size(), max_error, window);
          res = rec.run(specs);
        }
        py::array_t<std::int64_t> out({static_cast<py::ssize_t>(res.size()), py::ssize_t{7}});
        auto w = out.mutable_unchecked<2>();
        for (std::size_t i = 0; i < res.size(); ++i) {
          const auto& r = res[i];
          const py::ssize_t x = static_cast<py::ssize_t>(i);
          w(x, 0) = r.start;
          w(x, 1) = r.end;
          w(x, 2) = r.match_start;
          w(x, 3) = r.match_end;
          w(x, 4) = r.head_distance;
          w(x, 5) = r.tail_distance;
          w(x, 6) = r.placed ? 1 : 0;
        }
        return out;
      },
      py::arg("text"), py::arg("heads"), py::arg("tails"), py::arg("has_mask"), py::arg("max_error"),
      py::arg("window"));
}

}  // namespace momoka::bindings
