// Whitespace as Python's str.isspace() sees it (CPython's Py_UNICODE_ISSPACE):
// the code points whose bidirectional type is WS, B or S, or whose category
// is Zs. This is the one definition the native core uses, so offsets that
// the core trims or splits at agree with Python's str.strip() / str.split().
#pragma once

#include <cstdint>

namespace momoka {

// U+0009..U+000D, U+001C..U+001F, U+0020, U+0085, U+00A0, U+1680,
// U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000; nothing above.
constexpr bool is_space(std::uint32_t c) noexcept {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  if (c < 0x1680) return c == 0x85 || c == 0xA0;
  return c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace momoka
