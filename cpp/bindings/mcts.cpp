#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace momoka::bindings {
void register_mcts(py::module_& m) { (void)m; }
}  // namespace momoka::bindings
