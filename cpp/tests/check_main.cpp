// Runs every MOMOKA_TEST case of the executable; exits 1 when any failed.
#include <cstdio>
#include <exception>

#include "check.hpp"

int main() {
  int failed_cases = 0;
  for (const auto& c : momoka::check::registry()) {
    momoka::check::failures() = 0;
    try {
      c.fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: unexpected exception: %s\n", c.name, e.what());
      ++momoka::check::failures();
    } catch (...) {
      std::fprintf(stderr, "%s: unexpected non-standard exception\n", c.name);
      ++momoka::check::failures();
    }
    const bool ok = momoka::check::failures() == 0;
    std::printf("[%s] %s\n", ok ? " OK " : "FAIL", c.name);
    failed_cases += !ok;
  }
  std::printf("%zu cases, %d failed\n", momoka::check::registry().size(), failed_cases);
  return failed_cases == 0 ? 0 : 1;
}
