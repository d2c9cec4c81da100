// The core's two parallel loops (used by every area that spreads work over
// threads):
//  - parallel_for: split [0, n) into contiguous ranges over up to `threads`
//    std::threads (threads <= 1 runs inline), for uniform work;
//  - parallel_each: hand items out one at a time to up to `threads` workers,
//    each with its own State (scratch buffers), for uneven work (one MCTS per
//    root, one BM25 query, one text to tokenise).
// Exceptions from workers are rethrown in the caller.
#pragma once

#include <algorithm>
#include <atomic>
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

// Calls fn(i, state) for every i in [0, n). threads <= 0 means the hardware
// concurrency; the calling thread is one of the workers. After the first
// exception no new item is started, and that exception is rethrown.
template <class State, class F>
void parallel_each(std::size_t n, long threads, F&& fn) {
  if (n == 0) return;
  const std::size_t nt = std::min(resolve_threads(threads), n);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr err;
  auto work = [&]() {
    State state{};
    try {
      for (std::size_t i; !failed.load() && (i = next.fetch_add(1)) < n;) fn(i, state);
    } catch (...) {
      if (!failed.exchange(true)) err = std::current_exception();
    }
  };
  if (nt <= 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t + 1 < nt; ++t) pool.emplace_back(work);
    work();
    for (auto& th : pool) th.join();
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace momoka
