// The MCTS engine (mcts.hpp) on a three-item problem whose UCT selections
// and backups are worked out by hand, the step reward of Momoka eq. 4, a
// graph search with a forced path, ask/tell memoisation, and the checks of
// CSR input (rewards and graphs).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "check.hpp"
#include "momoka/mcts.hpp"

namespace {

using namespace momoka::mcts;

// Items 0, 1, 2; the search starts at root 0; rewards I(0, cand) = {-, 0.2, 0.9}.
const std::vector<double> kI = {0.0, 0.2, 0.9};

// One level below the root (max_depth 1), one step per rollout: every
// trajectory scores exactly the child it selects or expands.
Config one_level(int32_t iterations) {
  Config c;
  c.n_items = 3;
  c.iterations = iterations;
  c.rollout_len = 1;
  c.max_depth = 1;
  c.seed = 7;
  return c;
}

Engine engine(const Config& c) { return Engine(c, {0}, {}, {}, {}, {}, {}); }

// The root's child node holding `item` (-1 if none).
int32_t child(const Tree& t, int32_t item) {
  for (int32_t c = t.first_child[0]; c >= 0; c = t.next_sibling[c])
    if (t.item[c] == item) return c;
  return -1;
}

NativeReward vector_reward() { return NativeReward::checked(NativeReward::Vector, 3, kI.data(), 3, nullptr, -1, nullptr, -1); }

}  // namespace

// Iterations 1 and 2 expand the root's two candidates (items 1 and 2, in
// either order): each child has 1 visit and its reward as value. Then UCT,
// u = mean + c sqrt(ln N / n), c = sqrt 2:
//   it. 3, N = 2: u(1) = 0.2 + 1.41421 sqrt(0.69315)     = 1.37741;  u(2) = 0.9 + 1.17741 = 2.07741 -> item 2
//   it. 4, N = 3: u(1) = 0.2 + 1.41421 sqrt(1.09861)     = 1.68230;
//                 u(2) = 0.9 + 1.41421 sqrt(1.09861 / 2) = 1.94814 -> item 2
//   it. 5, N = 4: u(1) = 0.2 + 1.41421 sqrt(1.38629)     = 1.86511;
//                 u(2) = 0.9 + 1.41421 sqrt(1.38629 / 3) = 1.86136 -> item 1 (exploration wins)
MOMOKA_TEST(uct_selection_and_sum_backup_by_hand) {
  Engine e4 = engine(one_level(4));
  e4.run_native(vector_reward(), 1);
  CHECK(e4.done());
  const Tree& t = e4.search(0).t;
  CHECK_EQ(t.size(), 3u);  // root and two children
  const int32_t c1 = child(t, 1), c2 = child(t, 2);
  CHECK(c1 > 0 && c2 > 0);
  CHECK_EQ(t.visits[c1], 1u);
  CHECK_EQ(t.visits[c2], 3u);
  CHECK_NEAR(t.value[c1], 0.2, 1e-12);  // Backup::Sum: cumulative return
  CHECK_NEAR(t.value[c2], 2.7, 1e-12);  // 3 x 0.9
  CHECK_EQ(t.visits[0], 4u);
  CHECK_NEAR(t.value[0], 2.9, 1e-12);
  CHECK_NEAR(e4.mean_of(t, 0), 0.725, 1e-12);  // 2.9 / 4
  CHECK(e4.best_path(0) == std::vector<int32_t>{2});
  CHECK(e4.top_children(0, 5) == (std::vector<int32_t>{2, 1}));

  Engine e5 = engine(one_level(5));
  e5.run_native(vector_reward(), 1);
  const Tree& u = e5.search(0).t;
  CHECK_EQ(u.visits[child(u, 1)], 2u);
  CHECK_EQ(u.visits[child(u, 2)], 3u);
  CHECK(e5.best_path(0) == std::vector<int32_t>{2});  // most visits
}

MOMOKA_TEST(mean_backup_keeps_running_means) {
  Config c = one_level(4);
  c.backup = Backup::Mean;
  Engine e = engine(c);
  e.run_native(vector_reward(), 1);
  const Tree& t = e.search(0).t;
  CHECK_NEAR(t.value[child(t, 2)], 0.9, 1e-12);  // mean of 0.9, 0.9, 0.9
  CHECK_NEAR(t.value[0], 0.725, 1e-12);          // mean of 0.2, 0.9, 0.9, 0.9
  CHECK_NEAR(e.mean_of(t, 0), 0.725, 1e-12);
}

MOMOKA_TEST(sparse_reward_gives_the_same_search) {
  // Row 0 of a 3 x 3 CSR matrix holding I(0, 1) = 0.2, I(0, 2) = 0.9.
  const std::vector<double> data = {0.2, 0.9};
  const std::vector<int64_t> indptr = {0, 2, 2, 2};
  const std::vector<int32_t> indices = {1, 2};
  Engine e = engine(one_level(5));
  e.run_native(NativeReward::checked(NativeReward::Sparse, 3, data.data(), 2, indptr.data(), 4, indices.data(), 2), 1);
  const Tree& t = e.search(0).t;
  CHECK_EQ(t.visits[child(t, 1)], 2u);
  CHECK_EQ(t.visits[child(t, 2)], 3u);
  CHECK_NEAR(t.value[0], 0.2 * 2 + 0.9 * 3, 1e-12);
}

MOMOKA_TEST(ask_tell_asks_each_reward_once) {
  Engine e = engine(one_level(4));
  std::multiset<int32_t> asked;
  for (int round = 0; round < 10 && !e.done(); ++round) {
    Engine::Batch b = e.ask(100, 1);
    std::vector<double> vals;
    for (int32_t cand : b.cand) {
      asked.insert(cand);
      vals.push_back(kI[cand]);
    }
    if (!b.ids.empty()) e.tell(b.ids.data(), vals.data(), b.ids.size());
  }
  CHECK(e.done());
  // Two distinct rewards, each asked once; iterations 3 and 4 reuse the memo.
  CHECK(asked == (std::multiset<int32_t>{1, 2}));
  const Tree& t = e.search(0).t;
  CHECK_EQ(t.visits[child(t, 2)], 3u);
  CHECK_NEAR(t.value[0], 2.9, 1e-12);
  // Nothing is outstanding once the search is done: a late answer is refused.
  const int64_t id0 = 0;
  const double one = 1.0;
  CHECK_THROWS(e.tell(&id0, &one, 1), Error, "without outstanding requests");
}

MOMOKA_TEST(step_reward_eq4_by_hand) {
  // r = (I + alpha / (|p_root - p_cand| + gamma) + beta / (|s_root - s_cand| + delta)) / r_max,
  // r_max = 1 + alpha / gamma + beta / delta = 1 + 3 + 2 = 6 (normalize on).
  Config c = one_level(1);
  c.structural = true;
  Engine e(c, {0}, /*para=*/{0, 0, 1}, /*sent=*/{0, 1, 2}, {}, {}, {});
  CHECK_NEAR(e.r_max(), 6.0, 1e-15);
  // root 0, cand 2: |dp| = 1, |ds| = 2: (0.5 + 3/2 + 2/3) / 6 = 0.444...
  CHECK_NEAR(e.step_reward(0, 2, 0.5), (0.5 + 1.5 + 2.0 / 3.0) / 6.0, 1e-15);
  // root 0, cand 1: |dp| = 0, |ds| = 1: (0 + 3/1 + 2/2) / 6 = 4/6
  CHECK_NEAR(e.step_reward(0, 1, 0.0), 4.0 / 6.0, 1e-15);
}

MOMOKA_TEST(graph_search_follows_the_only_path) {
  // Graph 0 -> 1 -> 2 (CSR indptr {0, 1, 2, 2}, indices {1, 2}). From root 0 the
  // only child is 1; its rollout continues to 2 (1's only neighbour), then stops
  // (2 has none): steps {1, 2}, mean return (0.2 + 0.9) / 2 = 0.55.
  Config c;
  c.n_items = 3;
  c.iterations = 1;
  c.rollout_len = 3;
  c.expansion = Expansion::Neighbors;
  Engine e(c, {0}, {}, {}, {}, {0, 1, 2, 2}, {1, 2});
  e.run_native(vector_reward(), 1);
  const Tree& t = e.search(0).t;
  CHECK_EQ(t.size(), 2u);
  CHECK_EQ(t.item[1], 1);
  CHECK_EQ(t.visits[1], 1u);
  CHECK_NEAR(t.value[1], 0.55, 1e-12);
}

MOMOKA_TEST(graph_csr_is_validated) {
  Config c;
  c.n_items = 3;
  c.expansion = Expansion::Neighbors;
  CHECK_THROWS(Engine(c, {0}, {}, {}, {}, {0, 1, 2}, {1, 2}), Error, "graph indptr must have n_items + 1 entries");
  CHECK_THROWS(Engine(c, {0}, {}, {}, {}, {0, 2, 1, 2}, {1, 2}), Error, "graph indptr is not a valid CSR index");
  CHECK_THROWS(Engine(c, {0}, {}, {}, {}, {0, 1, 2, 2}, {1, 3}), Error, "graph neighbour index out of range");
  CHECK_THROWS(Engine(c, {5}, {}, {}, {}, {0, 1, 2, 2}, {1, 2}), Error, "root 5 out of range");
}

MOMOKA_TEST(reward_csr_is_validated) {
  const double d2[] = {0.5, 0.7};
  const int64_t ip[] = {0, 1, 1, 2};
  const int32_t ix[] = {2, 0};
  // Valid: I(0, 2) = 0.5, I(2, 0) = 0.7, every other entry 0.
  const NativeReward r = NativeReward::checked(NativeReward::Sparse, 3, d2, 2, ip, 4, ix, 2);
  CHECK_NEAR(r(0, 2), 0.5, 0.0);
  CHECK_NEAR(r(2, 0), 0.7, 0.0);
  CHECK_NEAR(r(0, 1), 0.0, 0.0);
  CHECK_NEAR(r(1, 2), 0.0, 0.0);

  using NR = NativeReward;
  CHECK_THROWS(NR::checked(NR::Dense, 3, d2, 2, nullptr, -1, nullptr, -1), Error, "I: wrong number of entries");
  CHECK_THROWS(NR::checked(NR::Vector, 3, d2, 2, nullptr, -1, nullptr, -1), Error, "I: wrong number of entries");
  CHECK_THROWS(NR::checked(7, 3, d2, 2, nullptr, -1, nullptr, -1), Error, "I: unknown reward kind 7");
  CHECK_THROWS(NR::checked(NR::Sparse, 3, d2, 2, ip, 3, ix, 2), Error, "I: bad CSR arrays");   // indptr n, not n + 1
  CHECK_THROWS(NR::checked(NR::Sparse, 3, d2, 2, ip, -1, ix, 2), Error, "I: bad CSR arrays");  // indptr missing
  CHECK_THROWS(NR::checked(NR::Sparse, 3, d2, 2, ip, 4, ix, 1), Error, "I: bad CSR arrays");   // one column for two values
  const int64_t ip_down[] = {0, 2, 1, 2};  // row 1 would end before it starts
  const int32_t ix_row0[] = {0, 2};
  CHECK_THROWS(NR::checked(NR::Sparse, 3, d2, 2, ip_down, 4, ix_row0, 2), Error, "I: bad CSR indptr");
  const int64_t ip_past[] = {0, 1, 1, 3};
  CHECK_THROWS(NR::checked(NR::Sparse, 3, d2, 2, ip_past, 4, ix, 2), Error, "I: bad CSR indptr");
  const int64_t ip_row[] = {0, 2, 2, 2};
  const int32_t unsorted[] = {2, 1}, repeated[] = {1, 1}, outside[] = {1, 3}, negative[] = {-1, 1};
  for (const int32_t* bad : {unsorted, repeated, outside, negative})
    CHECK_THROWS(NR::checked(NR::Sparse, 3, d2, 2, ip_row, 4, bad, 2), Error,
                 "I: CSR columns must be in range, sorted and unique per row");
  // A reward over another number of items than the engine's.
  Engine e = engine(one_level(1));
  const double d4[] = {0, 0, 0, 0};
  CHECK_THROWS(e.run_native(NR::checked(NR::Vector, 4, d4, 4, nullptr, -1, nullptr, -1), 1), Error, "I: reward over 4");
}
