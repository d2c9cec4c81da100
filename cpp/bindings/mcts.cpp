// Bindings of the MCTS engine (cpp/include/momoka/mcts.hpp). Thin: numpy in,
// numpy out, the GIL released around the search itself. The Python API with
// validation and documentation is momoka.search.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "momoka/mcts.hpp"

namespace py = pybind11;
using namespace momoka::mcts;

namespace {

template <class T>
std::vector<T> to_vec(const py::object& o) {
  if (o.is_none()) return {};
  auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(o);
  if (!a) throw Error("expected a numeric array");
  std::vector<T> v(static_cast<size_t>(a.size()));
  std::copy(a.data(), a.data() + a.size(), v.begin());
  return v;
}

template <class T>
py::array_t<T> to_np(const std::vector<T>& v) {
  py::array_t<T> a(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

}  // namespace

namespace momoka::bindings {

void register_mcts(py::module_& m) {
  py::register_exception<Error>(m, "MctsError", PyExc_ValueError);

  py::class_<Config>(m, "MctsConfig", "Plain configuration of the native MCTS engine (see momoka.search.MCTS).")
      .def(py::init<>())
      .def_readwrite("n_items", &Config::n_items)
      .def_readwrite("iterations", &Config::iterations)
      .def_readwrite("rollout_len", &Config::rollout_len)
      .def_readwrite("score_path", &Config::score_path)
      .def_readwrite("max_depth", &Config::max_depth)
      .def_readwrite("path_cap", &Config::path_cap)
      .def_readwrite("c", &Config::c)
      .def_property("backup", [](const Config& c) { return static_cast<int>(c.backup); },
                    [](Config& c, int v) { c.backup = static_cast<Backup>(v); })
      .def_property("ret", [](const Config& c) { return static_cast<int>(c.ret); },
                    [](Config& c, int v) { c.ret = static_cast<Return>(v); })
      .def_property("expansion", [](const Config& c) { return static_cast<int>(c.expansion); },
                    [](Config& c, int v) { c.expansion = static_cast<Expansion>(v); })
      .def_property("key", [](const Config& c) { return static_cast<int>(c.key); },
                    [](Config& c, int v) { c.key = static_cast<RewardKey>(v); })
      .def_readwrite("top_m", &Config::top_m)
      .def_readwrite("structural", &Config::structural)
      .def_readwrite("alpha", &Config::alpha)
      .def_readwrite("beta", &Config::beta)
      .def_readwrite("gamma", &Config::gamma)
      .def_readwrite("delta", &Config::delta)
      .def_readwrite("normalize", &Config::normalize)
      .def_readwrite("pw_k", &Config::pw_k)
      .def_readwrite("pw_a", &Config::pw_a)
      .def_readwrite("parallel", &Config::parallel)
      .def_readwrite("seed", &Config::seed)
      .def_readwrite("time_limit", &Config::time_limit);

  py::class_<Engine>(m, "MctsEngine", "Native MCTS engine: one search per root (see momoka.search.MCTS).")
      .def(py::init([](const Config& cfg, py::object roots, py::object para, py::object sent, py::object prior,
                       py::object indptr, py::object indices) {
             return new Engine(cfg, to_vec<int32_t>(roots), to_vec<int32_t>(para), to_vec<int32_t>(sent),
                               to_vec<double>(prior), to_vec<int64_t>(indptr), to_vec<int32_t>(indices));
           }),
           py::arg("config"), py::arg("roots"), py::arg("para") = py::none(), py::arg("sent") = py::none(),
           py::arg("prior") = py::none(), py::arg("indptr") = py::none(), py::arg("indices") = py::none())
      .def("run_native",
           [](Engine& e, int kind, py::object data, py::object indptr, py::object indices, int threads) {
             // borrow the arrays (converted only when their dtype or layout differs); they stay
             // referenced by this frame while the GIL is released. The engine checks them.
             auto d = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(data);
             if (!d) throw Error("I: expected a numeric array");
             py::array_t<int64_t, py::array::c_style | py::array::forcecast> ip;
             py::array_t<int32_t, py::array::c_style | py::array::forcecast> ix;
             if (kind == NativeReward::Sparse) {
               ip = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(indptr);
               ix = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(indices);
             }
             const NativeReward r = NativeReward::checked(
                 kind, e.config().n_items, d.data(), d.size(), ip ? ip.data() : nullptr, ip ? ip.size() : -1,
                 ix ? ix.data() : nullptr, ix ? ix.size() : -1);
             py::gil_scoped_release nogil;
             e.run_native(r, threads);
           },
           py::arg("kind"), py::arg("data"), py::arg("indptr") = py::none(), py::arg("indices") = py::none(),
           py::arg("threads") = 0)
      .def("ask",
           [](Engine& e, int64_t max_requests, int threads) {
             Engine::Batch b;
             {
               py::gil_scoped_release nogil;
               b = e.ask(max_requests, threads);
             }
             return py::make_tuple(to_np(b.ids), to_np(b.root_index), to_np(b.root_item), to_np(b.path_id),
                                   to_np(b.cand), to_np(b.kind));
           },
           py::arg("max_requests"), py::arg("threads") = 0)
      .def("tell",
           [](Engine& e, py::object ids, py::object vals) {
             auto i = to_vec<int64_t>(ids);
             auto v = to_vec<double>(vals);
             if (i.size() != v.size())
               throw Error("tell: " + std::to_string(v.size()) + " values for " + std::to_string(i.size()) + " ids");
             e.tell(i.data(), v.data(), i.size());
           })
      .def("release",
           [](Engine& e, py::object ids) {
             auto i = to_vec<int64_t>(ids);
             e.release(i.data(), i.size());
           })
      .def_property_readonly("done", &Engine::done)
      .def_property_readonly("n_outstanding", &Engine::n_outstanding)
      .def_property_readonly("n_queued", &Engine::n_queued)
      .def_property_readonly("n_roots", &Engine::n_roots)
      .def_property_readonly("r_max", &Engine::r_max)
      .def("path_items", [](const Engine& e, int64_t pid) { return to_np(e.path_items(pid)); })
      .def("best_path", [](const Engine& e, size_t i) {
             if (i >= e.n_roots()) throw Error("root index out of range");
             return to_np(e.best_path(i));
           })
      .def("top_children", [](const Engine& e, size_t i, int32_t k) {
             if (i >= e.n_roots()) throw Error("root index out of range");
             return to_np(e.top_children(i, k));
           })
      .def("step_reward", &Engine::step_reward)
      .def("tree",
           [](const Engine& e, size_t i) {
             if (i >= e.n_roots()) throw Error("root index out of range");
             const Tree& t = e.search(i).t;
             std::vector<double> mean(t.size());
             for (size_t v = 0; v < t.size(); ++v) mean[v] = e.mean_of(t, static_cast<int32_t>(v));
             py::dict d;
             d["item"] = to_np(t.item);
             d["parent"] = to_np(t.parent);
             d["depth"] = to_np(t.depth);
             d["visits"] = to_np(t.visits);
             d["value"] = to_np(t.value);
             d["mean"] = to_np(mean);
             return d;
           })
      .def("stats", [](const Engine& e) {
        std::vector<int64_t> iters(e.n_roots()), reqs(e.n_roots()), nodes(e.n_roots());
        for (size_t i = 0; i < e.n_roots(); ++i) {
          iters[i] = e.search(i).iters_done;
          reqs[i] = e.search(i).requests;
          nodes[i] = static_cast<int64_t>(e.search(i).t.size());
        }
        py::dict d;
        d["iterations"] = to_np(iters);
        d["requests"] = to_np(reqs);
        d["nodes"] = to_np(nodes);
        return d;
      });
}

}  // namespace momoka::bindings
