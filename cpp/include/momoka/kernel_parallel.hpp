// parallel_for: split [0, n) into contiguous ranges over up to `threads`
// std::threads (threads <= 1 runs inline). Exceptions from workers are
// rethrown in the caller.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace momoka {

inline std::size_t resolve_threads(long threads) {
  if (threads > 0) return static_cast<std::size_t>(threads);
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : hc;
}

template <class F>
void parallel_for(std::size_t n, std::size_t threads, F&& f) {
  threads = std::max<std::size_t>(1, std::min(threads, n / 16 + 1));
  if (threads <= 1) {
    f(std::size_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(threads);
  const std::size_t step = (n + threads - 1) / threads;
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t lo = t * step, hi = std::min(n, lo + step);
    if (lo >= hi) break;
    pool.emplace_back([&, t, lo, hi] {
      try {
        f(lo, hi);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace momoka
