// A minimal test harness for the core's C++ tests (no dependency):
//
//   MOMOKA_TEST(name) { CHECK(x > 0); CHECK_EQ(a, b); CHECK_NEAR(x, 0.5, 1e-12);
//                       CHECK_THROWS(expr, ExceptionType, "part of the message"); }
//
// A failed check prints file:line, the expression and (for CHECK_EQ /
// CHECK_NEAR) both values, marks the test case failed and goes on with the
// next check. check_main.cpp runs every case of the executable and exits
// non-zero when any failed (or threw), which is what CTest reports.
#pragma once

#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace momoka::check {

struct Case {
  const char* name;
  std::function<void()> fn;
};

inline std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}

inline int& failures() {  // failed checks of the running case
  static int n = 0;
  return n;
}

struct Register {
  Register(const char* name, std::function<void()> fn) { registry().push_back(Case{name, std::move(fn)}); }
};

inline void fail(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what.c_str());
  ++failures();
}

template <class T>
std::string show(const T& v);

template <class T>
std::string show(const std::vector<T>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + show(v[i]);
  return s + "]";
}

template <class T>
std::string show(const T& v) {
  std::ostringstream o;
  o.precision(17);
  if constexpr (std::is_same_v<T, unsigned char> || std::is_same_v<T, signed char>) o << static_cast<int>(v);
  else o << v;
  return o.str();
}

}  // namespace momoka::check

#define MOMOKA_CHECK_CAT2(a, b) a##b
#define MOMOKA_CHECK_CAT(a, b) MOMOKA_CHECK_CAT2(a, b)

#define MOMOKA_TEST(name)                                                                                   \
  static void name();                                                                                      \
  static const ::momoka::check::Register MOMOKA_CHECK_CAT(momoka_register_, name)(#name, name);           \
  static void name()

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) ::momoka::check::fail(__FILE__, __LINE__, #cond);           \
  } while (0)

#define CHECK_EQ(a, b)                                                                                       \
  do {                                                                                                       \
    const auto momoka_a_ = (a); /* copies: (b) may be a reference to a temporary */                         \
    const auto momoka_b_ = (b);                                                                              \
    if (!(momoka_a_ == momoka_b_))                                                                           \
      ::momoka::check::fail(__FILE__, __LINE__,                                                              \
                            std::string(#a " == " #b " (") + ::momoka::check::show(momoka_a_) + " vs " +     \
                                ::momoka::check::show(momoka_b_) + ")");                                     \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                                                                \
  do {                                                                                                       \
    const double momoka_a_ = (a), momoka_b_ = (b);                                                           \
    if (!(std::fabs(momoka_a_ - momoka_b_) <= (tol)))                                                        \
      ::momoka::check::fail(__FILE__, __LINE__,                                                              \
                            std::string(#a " ~= " #b " (") + ::momoka::check::show(momoka_a_) + " vs " +     \
                                ::momoka::check::show(momoka_b_) + ")");                                     \
  } while (0)

// `expr` must throw `Exc` (or a subclass) whose what() contains `part`.
#define CHECK_THROWS(expr, Exc, part)                                                                        \
  do {                                                                                                       \
    bool momoka_thrown_ = false;                                                                             \
    try {                                                                                                    \
      (void)(expr);                                                                                          \
    } catch (const Exc& e) {                                                                                 \
      momoka_thrown_ = true;                                                                                 \
      if (std::string(e.what()).find(part) == std::string::npos)                                            \
        ::momoka::check::fail(__FILE__, __LINE__,                                                            \
                              std::string(#expr " threw \"") + e.what() + "\", expected it to say \"" +     \
                                  (part) + "\"");                                                            \
    } catch (...) {                                                                                          \
      momoka_thrown_ = true;                                                                                 \
      ::momoka::check::fail(__FILE__, __LINE__, #expr " threw something other than " #Exc);                  \
    }                                                                                                        \
    if (!momoka_thrown_) ::momoka::check::fail(__FILE__, __LINE__, #expr " did not throw " #Exc);            \
  } while (0)
