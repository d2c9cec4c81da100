// momoka MCTS engine: many independent Monte Carlo tree searches (one per
// root item) over n_items items, with native bookkeeping and an ask/tell
// interface for rewards that live outside C++ (LLM or model calls).
//
// Spec: Momoka-RAG (UCT eq. 3, step reward eq. 4, path reward eq. 7, mean
// rollout return eq. 5, random expansion, best path by visit count), ETS
// (UCT eq. 1, top-M expansion, running-mean backup eq. 3) and JERR (search
// over a graph, rollout return summed over depth, top-k root children).
//
// Everything here works on ints and doubles; no Python objects.
//
// Length: one engine (tree, UCT, expansion modes, rollouts, ask/tell, native runs) in one
// header, as every concept of the core has its own header; hence about 800 lines.
//
// Determinism: each root owns a SplitMix64 generator seeded from (seed, root
// item); a root's tree is a pure function of its configuration, its seed and
// the reward values. Rewards are only consumed when a whole "wave" of
// `parallel` trajectories is resolved, so the result does not depend on the
// number of threads, on the ask batch size, or on the order of answers.
#pragma once

#include "momoka/kernel_parallel.hpp"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace momoka::mcts {

// ---------------------------------------------------------------------------
// Random numbers: SplitMix64 (Steele, Lea, Flood 2014). Documented so that a
// plain reference implementation can replay the exact stream:
//   state += 0x9E3779B97F4A7C15; z = state;
//   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
//   z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
//   return z ^ (z >> 31)                       (all mod 2^64)
// below(n) = next() % n.  Root r (item index) of a search with seed S starts
// from state = S xor ((r + 1) * 0xD1B54A32D192ED03 mod 2^64).
// ---------------------------------------------------------------------------
struct SplitMix64 {
  uint64_t state = 0;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }
};

inline uint64_t root_state(uint64_t seed, int32_t root_item) {
  return seed ^ ((static_cast<uint64_t>(root_item) + 1ULL) * 0xD1B54A32D192ED03ULL);
}

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Scored: top-M by a score computed per node through ask/tell (prior requests
// keyed by (path prefix, cand) with kPriorBit set), e.g. ETS's P(y | q, path + d).
enum class Expansion { Random = 0, TopM = 1, Neighbors = 2, Scored = 3 };
enum class Backup { Sum = 0, Mean = 1 };           // cumulative R (Momoka) / running mean V (ETS)
enum class Return { Mean = 0, Sum = 1, Last = 2 };  // rollout return over step rewards
enum class RewardKey { Pair = 0, Path = 1 };        // I(root, cand) (eq. 4) / I(path, cand) (eq. 7)

struct Config {
  int32_t n_items = 0;
  int32_t iterations = 100;  // rollouts per root
  int32_t rollout_len = 5;   // steps per rollout, the expanded node included
  bool score_path = true;    // score the tree path below the root too (else: leaf + rollout only)
  int32_t max_depth = -1;    // tree depth limit (root = 0); -1: none
  int32_t path_cap = 5;      // longest best path returned (root excluded)
  double c = 1.4142135623730951;
  Backup backup = Backup::Sum;
  Return ret = Return::Mean;
  Expansion expansion = Expansion::Random;
  int32_t top_m = 3;
  RewardKey key = RewardKey::Pair;
  bool structural = false;  // add alpha/(|dp|+gamma) + beta/(|ds|+delta)
  double alpha = 3.0, beta = 2.0, gamma = 1.0, delta = 1.0;
  bool normalize = true;  // divide step reward by r_max = 1 + alpha/gamma + beta/delta
  double pw_k = 0.0, pw_a = 0.5;  // progressive widening when pw_k > 0
  int32_t parallel = 1;           // trajectories per wave (virtual loss when > 1)
  uint64_t seed = 0;
  double time_limit = -1.0;  // seconds; < 0: none
};

// Rewards known natively: I(root_item, cand).
struct NativeReward {
  enum Kind { Dense = 0, Vector = 1, Sparse = 2 } kind = Dense;
  int32_t n = 0;
  // Borrowed arrays (the caller keeps them alive during the run):
  const double* data = nullptr;      // dense n*n row-major, vector n, or CSR values
  const int64_t* indptr = nullptr;   // CSR, n + 1 entries
  const int32_t* indices = nullptr;  // CSR (sorted per row, unique)
  // A reward over borrowed arrays, checked before any search reads them: `n_data` values (n * n
  // for Dense, n for Vector, the stored entries for Sparse); Sparse also needs n + 1 row offsets
  // `indptr` into `indices` (one column per value), each row's columns in [0, n), strictly
  // increasing. A size of -1 marks an array the caller could not provide. Throws Error saying
  // what is wrong ("I: ..."); nothing is copied.
  static NativeReward checked(int kind, int32_t n, const double* data, int64_t n_data, const int64_t* indptr,
                              int64_t n_indptr, const int32_t* indices, int64_t n_indices) {
    if (kind < Dense || kind > Sparse) throw Error("I: unknown reward kind " + std::to_string(kind));
    if (n < 1) throw Error("n_items must be at least 1");
    NativeReward r;
    r.kind = static_cast<Kind>(kind);
    r.n = n;
    r.data = data;
    if (kind == Dense || kind == Vector) {
      const int64_t need = kind == Dense ? static_cast<int64_t>(n) * n : n;
      if (data == nullptr || n_data != need) throw Error("I: wrong number of entries");
      return r;
    }
    if (n_data < 0 || n_indptr != static_cast<int64_t>(n) + 1 || n_indices != n_data)
      throw Error("I: bad CSR arrays");
    for (int32_t i = 0; i < n; ++i) {
      if (indptr[i] < 0 || indptr[i + 1] < indptr[i] || indptr[i + 1] > n_indices) throw Error("I: bad CSR indptr");
      for (int64_t j = indptr[i]; j < indptr[i + 1]; ++j)
        if (indices[j] < 0 || indices[j] >= n || (j > indptr[i] && indices[j] <= indices[j - 1]))
          throw Error("I: CSR columns must be in range, sorted and unique per row");
    }
    r.indptr = indptr;
    r.indices = indices;
    return r;
  }

  // The rewards of one root's search: for Dense, the root's row copied into `buf` in one
  // sequential sweep (the rollouts read it at random, and those reads from the shared matrix
  // missed the cache: about a third of the run on 500 x 500), served as a Vector. Only when the
  // search reads about as many entries as the row has (`reads`: rollouts x steps).
  NativeReward for_root(int32_t root, int64_t reads, std::vector<double>& buf) const {
    if (kind != Dense || static_cast<int64_t>(n) > 4 * reads) return *this;
    const double* row = data + static_cast<size_t>(root) * n;
    buf.assign(row, row + n);
    NativeReward r;
    r.kind = Vector;
    r.n = n;
    r.data = buf.data();
    return r;
  }
  double operator()(int32_t root, int32_t cand) const {
    switch (kind) {
      case Dense: return data[static_cast<size_t>(root) * n + cand];
      case Vector: return data[cand];
      default: {
        const int32_t* b = indices + indptr[root];
        const int32_t* e = indices + indptr[root + 1];
        const int32_t* it = std::lower_bound(b, e, cand);
        return (it != e && *it == cand) ? data[it - indices] : 0.0;
      }
    }
  }
};

// Scratch marks owned by a worker thread: the items on the current path
// (epoch-stamped set `mark`), and the items of the children of one node
// (`cmark`, cached: consecutive trajectories of a search mostly expand the
// same node, so its children are marked once and then kept up to date
// instead of walking the sibling list on every expansion).
struct Scratch {
  std::vector<uint32_t> mark, cmark;
  uint32_t stamp = 0, cstamp = 0;
  const void* csearch = nullptr;  // whose node's children cmark holds (valid while the count matches)
  int32_t cnode = -1, ccount = -1;
  std::vector<double> row;  // NativeReward::for_root's copy of the current root's dense row
  static void next_stamp(std::vector<uint32_t>& m, uint32_t& st, int32_t n) {
    if (static_cast<int32_t>(m.size()) != n) { m.assign(n, 0); st = 0; }
    if (++st == 0) { std::fill(m.begin(), m.end(), 0); st = 1; }
  }
  void reset(int32_t n) { next_stamp(mark, stamp, n); }
  void set(int32_t i) { mark[i] = stamp; }
  bool has(int32_t i) const { return mark[i] == stamp; }
  bool child(int32_t i) const { return cmark[i] == cstamp; }
  bool taken(int32_t i) const { return has(i) || child(i); }  // on the path or a child of the cached node
};

// Struct-of-arrays tree of one search. Node 0 is the root.
struct Tree {
  std::vector<int32_t> item, parent, first_child, last_child, next_sibling, n_children, depth, ncand, pid;
  std::vector<uint32_t> visits, vl;
  std::vector<double> value;  // Backup::Sum: cumulative R; Backup::Mean: running mean V
  int32_t add(int32_t it, int32_t par, int32_t dep, int32_t nc, int32_t path_id) {
    int32_t id = static_cast<int32_t>(item.size());
    item.push_back(it); parent.push_back(par); first_child.push_back(-1); last_child.push_back(-1); next_sibling.push_back(-1);
    n_children.push_back(0); depth.push_back(dep); ncand.push_back(nc); pid.push_back(path_id);
    visits.push_back(0); vl.push_back(0); value.push_back(0.0);
    if (par >= 0) {
      // append at the end of the sibling list (creation order)
      if (first_child[par] < 0) first_child[par] = id;
      else next_sibling[last_child[par]] = id;
      last_child[par] = id;
      n_children[par]++;
    }
    return id;
  }
  size_t size() const { return item.size(); }
  void reserve(size_t k) {
    for (auto* v : {&item, &parent, &first_child, &last_child, &next_sibling, &n_children, &depth, &ncand, &pid}) v->reserve(k);
    visits.reserve(k); vl.reserve(k); value.reserve(k);
  }
};

enum MemoState : uint8_t { Queued = 1, Requested = 2, Known = 3 };
struct MemoEntry { double value = 0.0; uint8_t state = 0; };

struct Step { uint64_t key; int32_t cand; };
struct Trajectory { int32_t leaf; std::vector<Step> steps; };
// Appends field by field: a braced Step built on the stack and copied as one 16-byte load
// stalled store forwarding on every rollout step.
inline void push_step(std::vector<Step>& v, uint64_t key, int32_t cand) {
  v.emplace_back();
  v.back().key = key;
  v.back().cand = cand;
}

// The trajectories of the current wave; buffers are reused between waves.
struct Wave {
  std::vector<Trajectory> buf;
  size_t n = 0;
  Trajectory* begin() { return buf.data(); }
  Trajectory* end() { return buf.data() + n; }
  bool empty() const { return n == 0; }
  void clear() { n = 0; }
  Trajectory& next() {
    if (n == buf.size()) { buf.emplace_back(); buf.back().steps.reserve(16); }  // one allocation, not 1-2-4-8
    return buf[n++];
  }
};

enum class Status { Running = 0, Blocked = 1, Done = 2 };

struct Search {
  int32_t root = 0;
  SplitMix64 rng;
  Tree t;
  // interned path prefixes (path mode): local id -> (parent id, item)
  std::vector<int32_t> pt_parent, pt_item;
  std::unordered_map<uint64_t, int32_t> pt_index;
  std::unordered_map<uint64_t, MemoEntry> memo;
  Wave wave;
  std::vector<uint64_t> needed;  // keys of the current wave waiting to be queued
  int32_t waiting = 0;           // distinct unknown keys the wave waits for
  int32_t iters_done = 0;
  int32_t prior_wait = 0;        // expansion-score keys queued by the wave being built
  bool building = false;         // the wave stopped for expansion scores; building resumes once they are known
  std::vector<std::vector<int32_t>> kept;  // Expansion::Scored: per node, its top-M items in score order
  Status status = Status::Running;
  int64_t requests = 0;          // distinct keys ever queued
};

inline uint64_t pair_key(int32_t ctx, int32_t cand) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(ctx)) << 32) | static_cast<uint32_t>(cand);
}

// Memo keys of expansion scores (Expansion::Scored) carry this bit; path ids are < 2^31.
constexpr uint64_t kPriorBit = 1ULL << 63;

class Engine {
 public:
  Engine(const Config& cfg, std::vector<int32_t> roots, std::vector<int32_t> para, std::vector<int32_t> sent,
         std::vector<double> prior, std::vector<int64_t> g_indptr, std::vector<int32_t> g_indices)
      : cfg_(cfg), para_(std::move(para)), sent_(std::move(sent)), g_indptr_(std::move(g_indptr)),
        g_indices_(std::move(g_indices)) {
    const int32_t n = cfg_.n_items;
    if (n < 1) throw Error("n_items must be at least 1");
    if (cfg_.iterations < 0) throw Error("iterations must be >= 0");
    if (cfg_.rollout_len < 1) throw Error("rollout_len must be >= 1");
    if (cfg_.parallel < 1) throw Error("parallel must be >= 1");
    if (cfg_.path_cap < 0) throw Error("path_cap must be >= 0");
    if (cfg_.structural && (static_cast<int32_t>(para_.size()) != n || static_cast<int32_t>(sent_.size()) != n))
      throw Error("paragraph and sentence arrays must have n_items entries");
    if (cfg_.expansion == Expansion::TopM) {
      if (static_cast<int32_t>(prior.size()) != n) throw Error("prior must have n_items entries");
      if (cfg_.top_m < 1) throw Error("top_m must be >= 1");
      order_.resize(n);
      for (int32_t i = 0; i < n; ++i) order_[i] = i;
      std::stable_sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) { return prior[a] > prior[b]; });
    }
    if (cfg_.expansion == Expansion::Scored) {
      if (cfg_.key != RewardKey::Path) throw Error("scored expansion needs path rewards (scores depend on the path)");
      if (cfg_.top_m < 1) throw Error("top_m must be >= 1");
    }
    if (cfg_.expansion == Expansion::Neighbors) {
      if (static_cast<int32_t>(g_indptr_.size()) != n + 1) throw Error("graph indptr must have n_items + 1 entries");
      // sort and deduplicate each row, drop self loops
      std::vector<int64_t> ip(n + 1, 0);
      std::vector<int32_t> ix;
      for (int32_t r = 0; r < n; ++r) {
        int64_t b = g_indptr_[r], e = g_indptr_[r + 1];
        if (b < 0 || e < b || e > static_cast<int64_t>(g_indices_.size())) throw Error("graph indptr is not a valid CSR index");
        std::vector<int32_t> row(g_indices_.begin() + b, g_indices_.begin() + e);
        for (int32_t v : row) if (v < 0 || v >= n) throw Error("graph neighbour index out of range");
        std::sort(row.begin(), row.end());
        row.erase(std::unique(row.begin(), row.end()), row.end());
        for (int32_t v : row) if (v != r) ix.push_back(v);
        ip[r + 1] = static_cast<int64_t>(ix.size());
      }
      g_indptr_ = std::move(ip); g_indices_ = std::move(ix);
    }
    if (cfg_.structural) {
      para_tab_ = structural_table(para_, cfg_.alpha, cfg_.gamma);
      sent_tab_ = structural_table(sent_, cfg_.beta, cfg_.delta);
    }
    r_max_ = 1.0;
    if (cfg_.structural && cfg_.normalize) r_max_ = 1.0 + cfg_.alpha / cfg_.gamma + cfg_.beta / cfg_.delta;
    searches_.resize(roots.size());
    for (size_t i = 0; i < roots.size(); ++i) {
      if (roots[i] < 0 || roots[i] >= n) throw Error("root " + std::to_string(roots[i]) + " out of range [0, " + std::to_string(n) + ")");
      Search& s = searches_[i];
      s.root = roots[i];
      s.rng.state = root_state(cfg_.seed, roots[i]);
      s.pt_parent.push_back(-1); s.pt_item.push_back(roots[i]);
    }
    Scratch sc;
    for (auto& s : searches_) {
      sc.reset(n); sc.set(s.root);
      s.t.reserve(static_cast<size_t>(std::min(cfg_.iterations, 4096)) + 1);
      s.t.add(s.root, -1, 0, count_candidates(s.root, 1, sc), 0);
      if (s.t.ncand[0] == 0 || cfg_.iterations == 0 || cfg_.max_depth == 0) s.status = Status::Done;
    }
  }

  const Config& config() const { return cfg_; }
  size_t n_roots() const { return searches_.size(); }
  const Search& search(size_t i) const { return searches_.at(i); }

  // ---------------------------------------------------------------- native
  void run_native(const NativeReward& I, int threads) {
    if (cfg_.key != RewardKey::Pair) throw Error("native rewards support pair mode only");
    if (cfg_.expansion == Expansion::Scored) throw Error("scored expansion needs ask/tell (scores come from outside)");
    if (asked_) throw Error("engine already runs in ask/tell mode");
    if (I.n != cfg_.n_items) throw Error("I: reward over " + std::to_string(I.n) + " items for an engine of " +
                                         std::to_string(cfg_.n_items));
    start_clock();
    parallel_for(searches_.size(), threads, [&](size_t i, Scratch& sc) {
      Search& s = searches_[i];
      const NativeReward Ir = I.for_root(s.root, static_cast<int64_t>(cfg_.iterations) * cfg_.rollout_len, sc.row);
      while (s.status != Status::Done) {
        if (expired()) { abandon_wave(s); s.status = Status::Done; break; }
        build_wave(s, sc);
        if (s.wave.empty()) { s.status = Status::Done; break; }
        finish_wave(s, [&](const Step& st) { return Ir(s.root, st.cand); });
        if (s.iters_done >= cfg_.iterations) s.status = Status::Done;
      }
    });
  }

  // --------------------------------------------------------------- ask/tell
  struct Batch {
    std::vector<int64_t> ids, path_id;
    std::vector<int32_t> root_index, root_item, cand;
    std::vector<uint8_t> kind;  // 0: reward of (path, cand); 1: expansion score of (path, cand)
  };

  Batch ask(int64_t max_requests, int threads) {
    if (max_requests < 1) throw Error("max_requests must be >= 1");
    asked_ = true;
    start_clock();
    advance(threads);
    Batch b;
    while (!queue_.empty() && static_cast<int64_t>(b.ids.size()) < max_requests) {
      auto [ri, key] = queue_.front();
      queue_.pop_front();
      Search& s = searches_[ri];
      s.memo[key].state = Requested;
      int64_t id = next_id_++;
      outstanding_.emplace(id, std::make_pair(ri, key));
      b.ids.push_back(id);
      b.root_index.push_back(ri);
      b.root_item.push_back(s.root);
      b.cand.push_back(static_cast<int32_t>(key & 0xFFFFFFFFu));
      b.path_id.push_back(cfg_.key == RewardKey::Path
                              ? ((static_cast<int64_t>(ri) << 32) | static_cast<int64_t>((key & ~kPriorBit) >> 32))
                              : -1);
      b.kind.push_back(static_cast<uint8_t>(key >> 63));
    }
    return b;
  }

  // Validates everything first: on error, nothing changes.
  void tell(const int64_t* ids, const double* vals, size_t n) {
    if (outstanding_.empty()) throw Error("tell() without outstanding requests: call ask() first");
    std::unordered_map<int64_t, int> seen;
    for (size_t i = 0; i < n; ++i) {
      if (!outstanding_.count(ids[i]))
        throw Error("request id " + std::to_string(ids[i]) + " is not outstanding (never asked, or already told)");
      if (seen[ids[i]]++) throw Error("request id " + std::to_string(ids[i]) + " told twice in one call");
      if (!std::isfinite(vals[i]))
        throw Error("reward for request " + std::to_string(ids[i]) + " is not finite (" + std::to_string(vals[i]) + ")");
    }
    for (size_t i = 0; i < n; ++i) {
      auto it = outstanding_.find(ids[i]);
      auto [ri, key] = it->second;
      outstanding_.erase(it);
      Search& s = searches_[ri];
      MemoEntry& e = s.memo[key];
      e.value = vals[i];
      e.state = Known;
      if (s.status == Status::Blocked && --s.waiting == 0) s.status = Status::Running;
    }
  }

  // Put outstanding requests back at the front of the queue (a judge failed).
  void release(const int64_t* ids, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (!outstanding_.count(ids[i])) throw Error("request id " + std::to_string(ids[i]) + " is not outstanding");
    for (size_t i = n; i-- > 0;) {
      auto it = outstanding_.find(ids[i]);
      auto [ri, key] = it->second;
      outstanding_.erase(it);
      searches_[ri].memo[key].state = Queued;
      queue_.emplace_front(ri, key);
    }
  }

  bool done() const {
    for (const auto& s : searches_) if (s.status != Status::Done) return false;
    return true;
  }
  size_t n_outstanding() const { return outstanding_.size(); }
  size_t n_queued() const { return queue_.size(); }

  std::vector<int32_t> path_items(int64_t path_id) const {
    int64_t ri = path_id >> 32;
    int32_t local = static_cast<int32_t>(path_id & 0xFFFFFFFF);
    if (ri < 0 || ri >= static_cast<int64_t>(searches_.size())) throw Error("path id out of range");
    const Search& s = searches_[ri];
    if (local < 0 || local >= static_cast<int32_t>(s.pt_item.size())) throw Error("path id out of range");
    std::vector<int32_t> out;
    for (int32_t p = local; p >= 0; p = s.pt_parent[p]) out.push_back(s.pt_item[p]);
    std::reverse(out.begin(), out.end());
    return out;
  }

  // ---------------------------------------------------------------- results
  double mean_of(const Tree& t, int32_t v) const {
    if (t.visits[v] == 0) return 0.0;
    return cfg_.backup == Backup::Sum ? t.value[v] / t.visits[v] : t.value[v];
  }

  // Most visited child per level; ties by mean reward, then lowest item.
  std::vector<int32_t> best_path(size_t i) const {
    const Search& s = searches_.at(i);
    const Tree& t = s.t;
    std::vector<int32_t> out;
    int32_t v = 0;
    while (static_cast<int32_t>(out.size()) < cfg_.path_cap) {
      int32_t best = -1;
      for (int32_t c = t.first_child[v]; c >= 0; c = t.next_sibling[c]) {
        if (t.visits[c] == 0) continue;
        if (best < 0 || t.visits[c] > t.visits[best] ||
            (t.visits[c] == t.visits[best] &&
             (mean_of(t, c) > mean_of(t, best) || (mean_of(t, c) == mean_of(t, best) && t.item[c] < t.item[best]))))
          best = c;
      }
      if (best < 0) break;
      out.push_back(t.item[best]);
      v = best;
    }
    return out;
  }

  // Root children by mean value (desc), then visits (desc), then item (asc).
  std::vector<int32_t> top_children(size_t i, int32_t k) const {
    const Tree& t = searches_.at(i).t;
    std::vector<int32_t> ch;
    for (int32_t c = t.first_child[0]; c >= 0; c = t.next_sibling[c]) if (t.visits[c] > 0) ch.push_back(c);
    std::sort(ch.begin(), ch.end(), [&](int32_t a, int32_t b) {
      double ma = mean_of(t, a), mb = mean_of(t, b);
      if (ma != mb) return ma > mb;
      if (t.visits[a] != t.visits[b]) return t.visits[a] > t.visits[b];
      return t.item[a] < t.item[b];
    });
    if (static_cast<int32_t>(ch.size()) > k) ch.resize(k);
    for (auto& c : ch) c = t.item[c];
    return ch;
  }

  double step_reward(int32_t root, int32_t cand, double I) const {
    double r = I;
    if (cfg_.structural) {
      r += structural_term(para_tab_, para_, root, cand, cfg_.alpha, cfg_.gamma);
      r += structural_term(sent_tab_, sent_, root, cand, cfg_.beta, cfg_.delta);
    }
    return r / r_max_;
  }
  double r_max() const { return r_max_; }

 private:
  // w / (|pos[root] - pos[cand]| + g), from the table of every distance (tab[d] = w / (d + g),
  // the same double) when the positions span a small range, else computed.
  static double structural_term(const std::vector<double>& tab, const std::vector<int32_t>& pos, int32_t root,
                                int32_t cand, double w, double g) {
    const int64_t d = std::abs(static_cast<int64_t>(pos[root]) - pos[cand]);
    if (static_cast<size_t>(d) < tab.size()) return tab[static_cast<size_t>(d)];
    return w / (static_cast<double>(d) + g);
  }
  static std::vector<double> structural_table(const std::vector<int32_t>& pos, double w, double g) {
    if (pos.empty()) return {};
    auto [lo, hi] = std::minmax_element(pos.begin(), pos.end());
    const int64_t span = std::min<int64_t>(static_cast<int64_t>(*hi) - *lo + 1, int64_t{1} << 16);
    std::vector<double> tab(static_cast<size_t>(span));
    for (int64_t d = 0; d < span; ++d) tab[static_cast<size_t>(d)] = w / (static_cast<double>(d) + g);
    return tab;
  }

  // ------------------------------------------------------------ candidates
  // Candidates of a node whose path (root..node, `plen` items) is marked in sc.
  int32_t count_candidates(int32_t item, int32_t plen, const Scratch& sc) const {
    const int32_t n = cfg_.n_items;
    switch (cfg_.expansion) {
      case Expansion::Random: return n - plen;
      case Expansion::TopM:
      case Expansion::Scored: return std::min(cfg_.top_m, n - plen);
      default: {
        int32_t c = 0;
        for (int64_t j = g_indptr_[item]; j < g_indptr_[item + 1]; ++j) c += !sc.has(g_indices_[j]);
        return c;
      }
    }
  }

  // Uniform pick among [0, n) minus the marked set (size `excluded`):
  // rejection sampling while at least half the items are free, otherwise the
  // k-th free item in ascending order with k = below(free).
  template <class Taken>
  int32_t pick_free(SplitMix64& rng, Taken&& taken, int32_t excluded) const {
    const int32_t n = cfg_.n_items;
    const int32_t avail = n - excluded;
    if (avail <= 0) return -1;
    if (2 * static_cast<int64_t>(avail) >= n) {
      for (;;) {
        int32_t u = static_cast<int32_t>(rng.below(static_cast<uint64_t>(n)));
        if (!taken(u)) return u;
      }
    }
    int32_t k = static_cast<int32_t>(rng.below(static_cast<uint64_t>(avail)));
    for (int32_t u = 0; u < n; ++u)
      if (!taken(u) && k-- == 0) return u;
    return -1;
  }

  // k-th unmarked neighbour of `item`, k = below(count); -1 if none.
  template <class Taken>
  int32_t pick_neighbor(SplitMix64& rng, Taken&& taken, int32_t item) const {
    int32_t cnt = 0;
    for (int64_t j = g_indptr_[item]; j < g_indptr_[item + 1]; ++j) cnt += !taken(g_indices_[j]);
    if (cnt == 0) return -1;
    int32_t k = static_cast<int32_t>(rng.below(static_cast<uint64_t>(cnt)));
    for (int64_t j = g_indptr_[item]; j < g_indptr_[item + 1]; ++j)
      if (!taken(g_indices_[j]) && k-- == 0) return g_indices_[j];
    return -1;
  }

  // Uniform among the first top_m unmarked items of the prior order.
  int32_t pick_topm(SplitMix64& rng, const Scratch& sc) const {
    int32_t cnt = 0;
    for (size_t j = 0; j < order_.size() && cnt < cfg_.top_m; ++j) cnt += !sc.has(order_[j]);
    if (cnt == 0) return -1;
    int32_t k = static_cast<int32_t>(rng.below(static_cast<uint64_t>(cnt)));
    for (size_t j = 0; j < order_.size(); ++j)
      if (!sc.has(order_[j]) && k-- == 0) return order_[j];
    return -1;
  }

  int32_t intern(Search& s, int32_t parent_pid, int32_t item) const {
    uint64_t k = pair_key(parent_pid, item);
    auto it = s.pt_index.find(k);
    if (it != s.pt_index.end()) return it->second;
    int32_t id = static_cast<int32_t>(s.pt_item.size());
    s.pt_parent.push_back(parent_pid);
    s.pt_item.push_back(item);
    s.pt_index.emplace(k, id);
    return id;
  }

  bool expandable(const Tree& t, int32_t v) const {
    if (cfg_.max_depth >= 0 && t.depth[v] >= cfg_.max_depth) return false;
    if (t.n_children[v] >= t.ncand[v]) return false;
    if (cfg_.pw_k > 0.0) {
      double lim = std::ceil(cfg_.pw_k * std::pow(static_cast<double>(std::max<uint32_t>(t.visits[v], 1)), cfg_.pw_a));
      if (t.n_children[v] >= std::max(1.0, lim)) return false;
    }
    return true;
  }

  // Make sc.cmark the item set of v's children (kept from the previous call when it was the same node).
  void mark_children(const Search& s, int32_t v, Scratch& sc) const {
    const Tree& t = s.t;
    if (sc.csearch == &s && sc.cnode == v && sc.ccount == t.n_children[v]) return;
    Scratch::next_stamp(sc.cmark, sc.cstamp, cfg_.n_items);
    for (int32_t c = t.first_child[v]; c >= 0; c = t.next_sibling[c]) sc.cmark[t.item[c]] = sc.cstamp;
    sc.csearch = &s; sc.cnode = v; sc.ccount = t.n_children[v];
  }

  void mark_path(const Tree& t, int32_t v, Scratch& sc, int32_t& plen) const {
    sc.reset(cfg_.n_items);
    plen = 0;
    for (int32_t u = v; u >= 0; u = t.parent[u]) { sc.set(t.item[u]); ++plen; }
  }

  // Expansion::Scored: the kept top-M of node v (its path marked in sc), or nullptr after queueing
  // the expansion scores still unknown. Ties in score go to the lower item.
  const std::vector<int32_t>* scored_children(Search& s, int32_t v, const Scratch& sc) const {
    if (s.kept.size() <= static_cast<size_t>(v)) s.kept.resize(s.t.size());
    if (!s.kept[v].empty()) return &s.kept[v];
    std::vector<std::pair<double, int32_t>> sc_items;
    bool missing = false;
    for (int32_t u = 0; u < cfg_.n_items; ++u) {
      if (sc.has(u)) continue;
      const uint64_t key = pair_key(s.t.pid[v], u) | kPriorBit;
      MemoEntry& e = s.memo[key];
      if (e.state == Known) { sc_items.emplace_back(e.value, u); continue; }
      missing = true;
      if (e.state == 0) { e.state = Queued; s.needed.push_back(key); s.prior_wait++; s.requests++; }
    }
    if (missing) return nullptr;
    std::sort(sc_items.begin(), sc_items.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    const size_t m = std::min(sc_items.size(), static_cast<size_t>(cfg_.top_m));
    for (size_t j = 0; j < m; ++j) s.kept[v].push_back(sc_items[j].second);
    return &s.kept[v];
  }

  static constexpr int kTrajNone = 0, kTrajOk = 1, kTrajNeedScores = 2;

  // One selection + expansion + rollout. Returns kTrajNone if the root can do nothing,
  // kTrajNeedScores (no side effects) when the node to expand waits for its expansion scores.
  int trajectory(Search& s, Scratch& sc, Trajectory& tr) const {
    Tree& t = s.t;
    int32_t v = 0;
    for (;;) {
      if (expandable(t, v)) break;
      if (t.first_child[v] < 0) break;  // terminal leaf
      // UCT over children; unvisited (incl. virtual) first; ties -> lowest item
      const double np = static_cast<double>(t.visits[v] + t.vl[v]);
      const double lnp = std::log(np);
      int32_t best = -1;
      double best_u = 0.0;
      bool best_unvisited = false;
      for (int32_t c = t.first_child[v]; c >= 0; c = t.next_sibling[c]) {
        uint32_t ne = t.visits[c] + t.vl[c];
        if (ne == 0) {
          if (!best_unvisited || t.item[c] < t.item[best]) { best = c; best_unvisited = true; }
          continue;
        }
        if (best_unvisited) continue;
        double mean;
        if (t.vl[c] == 0) mean = mean_of(t, c);
        else mean = (cfg_.backup == Backup::Sum ? t.value[c] : t.value[c] * t.visits[c]) / static_cast<double>(ne);
        double u = mean + cfg_.c * std::sqrt(lnp / static_cast<double>(ne));
        if (best < 0 || u > best_u || (u == best_u && t.item[c] < t.item[best])) { best = c; best_u = u; }
      }
      v = best;
    }
    int32_t plen;
    mark_path(t, v, sc, plen);
    int32_t leaf = v;
    if (expandable(t, v)) {
      int32_t it = -1;
      int32_t nch = t.n_children[v];
      if (cfg_.expansion == Expansion::TopM) {
        // candidates of v: the first top_m items of the prior order off the path; expand in that order
        int32_t k = nch;
        for (size_t j = 0; j < order_.size(); ++j)
          if (!sc.has(order_[j]) && k-- == 0) { it = order_[j]; break; }
      } else if (cfg_.expansion == Expansion::Scored) {
        const std::vector<int32_t>* kept = scored_children(s, v, sc);
        if (kept == nullptr) return kTrajNeedScores;
        it = (*kept)[nch];
      } else {
        mark_children(s, v, sc);
        auto taken = [&sc](int32_t u) { return sc.taken(u); };
        if (cfg_.expansion == Expansion::Random) it = pick_free(s.rng, taken, plen + nch);
        else it = pick_neighbor(s.rng, taken, t.item[v]);
      }
      if (it < 0) throw Error("internal: expansion found no candidate");
      sc.set(it);
      ++plen;
      int32_t path_id = cfg_.key == RewardKey::Path ? intern(s, t.pid[v], it) : 0;
      int32_t nc = count_candidates(it, plen, sc);
      leaf = t.add(it, v, t.depth[v] + 1, nc, path_id);
      if (sc.csearch == &s && sc.cnode == v) { sc.cmark[it] = sc.cstamp; sc.ccount++; }
    } else if (v == 0) {
      return kTrajNone;  // root cannot expand and has no children
    }
    // rollout: the leaf, then up to rollout_len - 1 further items by the same policy
    tr.leaf = leaf;
    tr.steps.clear();
    auto key_of = [&](int32_t parent_pid, int32_t item) {
      return cfg_.key == RewardKey::Path ? pair_key(parent_pid, item) : static_cast<uint64_t>(static_cast<uint32_t>(item));
    };
    if (cfg_.score_path) {  // the tree nodes strictly between the root and the leaf, root side first
      size_t first = tr.steps.size();
      for (int32_t u = t.parent[leaf]; u > 0; u = t.parent[u]) push_step(tr.steps, key_of(s.pt_parent[t.pid[u]], t.item[u]), t.item[u]);
      std::reverse(tr.steps.begin() + first, tr.steps.end());
    }
    int32_t parent_pid = cfg_.key == RewardKey::Path ? s.pt_parent[t.pid[leaf]] : 0;
    int32_t cur = t.item[leaf];
    int32_t cur_pid = t.pid[leaf];
    auto on_path = [&sc](int32_t u) { return sc.has(u); };
    for (;;) {
      push_step(tr.steps, key_of(parent_pid, cur), cur);
      if (static_cast<int32_t>(tr.steps.size()) >= cfg_.rollout_len) break;
      int32_t nx;
      switch (cfg_.expansion) {
        case Expansion::Random:
        case Expansion::Scored: nx = pick_free(s.rng, on_path, plen); break;
        case Expansion::TopM: nx = pick_topm(s.rng, sc); break;
        default: nx = pick_neighbor(s.rng, on_path, cur); break;
      }
      if (nx < 0) break;
      sc.set(nx);
      ++plen;
      if (cfg_.key == RewardKey::Path) { parent_pid = cur_pid; cur_pid = intern(s, cur_pid, nx); }
      cur = nx;
    }
    return kTrajOk;
  }

  // Build (or, after a stop for expansion scores, go on building) the wave of `parallel` trajectories.
  void build_wave(Search& s, Scratch& sc) const {
    if (!s.building) s.wave.clear();
    s.building = false;
    const int32_t want = std::min(cfg_.parallel, cfg_.iterations - s.iters_done);
    while (static_cast<int32_t>(s.wave.n) < want) {
      Trajectory& tr = s.wave.next();
      const int r = trajectory(s, sc, tr);
      if (r != kTrajOk) {
        s.wave.n--;
        s.building = r == kTrajNeedScores;
        break;
      }
      for (int32_t u = tr.leaf; u >= 0; u = s.t.parent[u]) s.t.vl[u]++;
    }
  }

  void abandon_wave(Search& s) const {
    for (auto& tr : s.wave)
      for (int32_t u = tr.leaf; u >= 0; u = s.t.parent[u]) s.t.vl[u]--;
    s.wave.clear();
    s.building = false;
  }

  template <class F>
  void finish_wave(Search& s, F&& I) const {
    Tree& t = s.t;
    for (auto& tr : s.wave) {
      double acc = 0.0, last = 0.0;
      for (const Step& st : tr.steps) {
        last = step_reward(s.root, st.cand, I(st));
        acc += last;
      }
      double R = cfg_.ret == Return::Mean ? acc / static_cast<double>(tr.steps.size())
                 : cfg_.ret == Return::Sum ? acc : last;
      for (int32_t u = tr.leaf; u >= 0; u = t.parent[u]) {
        t.vl[u]--;
        t.visits[u]++;
        if (cfg_.backup == Backup::Sum) t.value[u] += R;
        else t.value[u] += (R - t.value[u]) / static_cast<double>(t.visits[u]);
      }
      s.iters_done++;
    }
    s.wave.clear();
  }

  // Advance one search in ask/tell mode until it blocks or finishes.
  void advance_one(Search& s, Scratch& sc) {
    for (;;) {
      if (s.status == Status::Done || s.status == Status::Blocked) return;
      if (!s.wave.empty() && !s.building) {  // resolved wave
        finish_wave(s, [&](const Step& st) { return s.memo.find(st.key)->second.value; });
        if (s.iters_done >= cfg_.iterations) { s.status = Status::Done; return; }
      }
      if (expired()) { s.status = Status::Done; return; }
      build_wave(s, sc);
      if (s.building) {  // stopped for expansion scores: wait for them, then go on building the wave
        if (s.prior_wait == 0) throw Error("internal: a wave waits for expansion scores that were never queued");
        s.waiting = s.prior_wait;
        s.prior_wait = 0;
        s.status = Status::Blocked;
        return;
      }
      if (s.wave.empty()) { s.status = Status::Done; return; }
      s.waiting = 0;
      for (auto& tr : s.wave)
        for (const Step& st : tr.steps) {
          MemoEntry& e = s.memo[st.key];
          if (e.state == 0) {
            e.state = Queued;
            s.needed.push_back(st.key);
            s.waiting++;
            s.requests++;
          }
        }
      if (s.waiting > 0) { s.status = Status::Blocked; return; }
    }
  }

  void advance(int threads) {
    if (expired()) {
      for (auto& s : searches_)
        if (s.status != Status::Done) { abandon_wave(s); s.status = Status::Done; }
      queue_.clear();
      return;
    }
    std::vector<size_t> todo;
    for (size_t i = 0; i < searches_.size(); ++i)
      if (searches_[i].status == Status::Running) todo.push_back(i);
    parallel_for(todo.size(), threads, [&](size_t j, Scratch& sc) { advance_one(searches_[todo[j]], sc); });
    for (size_t i = 0; i < searches_.size(); ++i) {
      Search& s = searches_[i];
      for (uint64_t k : s.needed) queue_.emplace_back(static_cast<int32_t>(i), k);
      s.needed.clear();
    }
  }

  // ------------------------------------------------------------- utilities
  void start_clock() {
    if (!clock_started_) { t0_ = std::chrono::steady_clock::now(); clock_started_ = true; }
  }
  bool expired() const {
    if (cfg_.time_limit < 0) return false;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count() > cfg_.time_limit;
  }

  template <class F>
  void parallel_for(size_t n, int threads, F&& fn) {
    momoka::parallel_each<Scratch>(n, threads, std::forward<F>(fn));
  }

  Config cfg_;
  std::vector<int32_t> para_, sent_, order_;
  std::vector<double> para_tab_, sent_tab_;  // structural_table() of the paragraph and sentence positions
  std::vector<int64_t> g_indptr_;
  std::vector<int32_t> g_indices_;
  double r_max_ = 1.0;
  std::vector<Search> searches_;
  std::deque<std::pair<int32_t, uint64_t>> queue_;
  std::unordered_map<int64_t, std::pair<int32_t, uint64_t>> outstanding_;
  int64_t next_id_ = 0;
  bool asked_ = false;
  bool clock_started_ = false;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace momoka::mcts
