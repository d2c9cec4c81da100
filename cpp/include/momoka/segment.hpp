// Sentence and paragraph segmentation over code units.
//
// Every function is templated on the code unit type (uint8_t, uint16_t,
// uint32_t: the PEP 393 storage of a Python str), so offsets are Python str
// offsets with no transcoding. Spans are half-open [start, end) and never
// include surrounding whitespace. "Whitespace" is exactly Python's
// str.isspace(), so a span's text equals its own .strip().
//
// Paragraphs: maximal runs of text separated by a blank line (a whitespace
// run holding two or more line breaks; \r\n counts once) or by U+2029.
//
// Sentences: inside each paragraph, a sentence ends after a terminator run
// (. ! ? … ‼ ⁇ ⁈ ⁉, Arabic ؟ ۔, Devanagari । ॥, or CJK 。！？｡) plus any
// closing quotes/brackets, when
// followed by whitespace or the end of the paragraph (CJK terminators need no
// whitespace). It does not end when
//   * the next word starts with a lowercase letter ("etc. and", "Stop!" he),
//   * the terminator is one '.' after a known abbreviation (Dr. Mr. e.g.
//     i.e. U.S. ...), after capital initials (J. R. R. Tolkien, J.R.R.), after
//     a number-prefix abbreviation followed by a digit (No. 5, Fig. 3,
//     Jan. 1), or after a short enumerator starting the sentence ("1. Intro").
// Bracketed references right after a terminator stay with the sentence
// ("1978.[citation needed] On"); so does a spaced ellipsis (". . .").
// A blank line always ends a sentence. A single line break is whitespace
// (NewlineMode::kIgnore), always ends a sentence (kBreak), or (kAuto, the
// default) ends one after a heading-like line: the line holds at most
// kShortLine code units, does not end in a terminator, comma, semicolon,
// hyphen or dash, and the next line does not start lowercase (or the line
// ends with ':' and the next line does not start lowercase). This splits
// "Introduction\nWe study..." and "Items:\n- one\n- two" while hard-wrapped
// prose stays joined.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "momoka/tokenize.hpp"
#include "momoka/unicode_space.hpp"

namespace momoka::text {

using momoka::is_space;  // Python's str.isspace()

inline bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x85 || c == 0x2028;
}

// Full stop, exclamation and question marks, and the fullwidth semicolon of
// Chinese and Japanese text: they end a sentence with no space after them.
inline bool is_cjk_terminator(char32_t c) {
  return c == 0x3002 || c == 0xFF01 || c == 0xFF1F || c == 0xFF61 || c == 0xFF1B;
}

// A character of a script written without spaces (CJK ideographs, kana, ...).
inline bool is_unspaced_script(char32_t c) {
  return c >= 0x0E00 && tok::classify(c) == tok::CpClass::kSingle;
}

inline bool is_terminator(char32_t c) {
  return c == '.' || c == '!' || c == '?' || c == 0x2026 || c == 0x203C ||
         (c >= 0x2047 && c <= 0x2049) || c == 0x061F || c == 0x06D4 || c == 0x0964 ||
         c == 0x0965 || is_cjk_terminator(c);
}

// Closing quotes and brackets that stay with the sentence they close.
inline bool is_closer(char32_t c) {
  switch (c) {
    case '"': case '\'': case ')': case ']': case '}':
    case 0xBB: case 0x2019: case 0x201D: case 0x203A:
    case 0x3009: case 0x300B: case 0x300D: case 0x300F: case 0x3011: case 0x3015:
    case 0xFF09: case 0xFF3D: case 0xFF5D: case 0xFF63:
      return true;
    default:
      return false;
  }
}

// Opening quotes and brackets skipped before looking at the next word.
inline bool is_opener(char32_t c) {
  switch (c) {
    case '"': case '\'': case '(': case '[': case '{':
    case 0xAB: case 0xBF: case 0xA1: case 0x2018: case 0x201C: case 0x2039:
    case 0x3008: case 0x300A: case 0x300C: case 0x300E: case 0x3010: case 0x3014:
    case 0xFF08: case 0xFF3B: case 0xFF5B: case 0xFF62:
      return true;
    default:
      return false;
  }
}

inline bool is_quote_opener(char32_t c) {
  return c == '"' || c == '\'' || c == 0xAB || c == 0x2018 || c == 0x201C || c == 0x201E ||
         c == 0x2039 || c == 0x300C || c == 0x300E || c == 0xFF62;
}

// Lowercase letters of Latin (ASCII, Latin-1, Latin Extended-A), Greek and
// Cyrillic: enough to tell "the next word continues the sentence".
inline bool is_lower(char32_t c) {
  if (c < 128) return c >= 'a' && c <= 'z';
  if (c >= 0xDF && c <= 0xFF) return c != 0xF7;
  if (c >= 0x100 && c <= 0x17F) return (c & 1) == 1;  // approximately
  if (c >= 0x3B1 && c <= 0x3C9) return true;
  if (c >= 0x430 && c <= 0x45F) return true;
  return false;
}

inline bool is_upper(char32_t c) {
  if (c < 128) return c >= 'A' && c <= 'Z';
  if (c >= 0xC0 && c <= 0xDE) return c != 0xD7;
  if (c >= 0x391 && c <= 0x3A9) return true;
  if (c >= 0x400 && c <= 0x42F) return true;
  return false;
}

inline bool is_digit(char32_t c) { return c >= '0' && c <= '9'; }

// Neither whitespace nor a terminator: the segmenter's inner loop skips these.
inline bool is_plain(char32_t c) {
  if (c < 128) {
    // printable ASCII other than space . ! ?
    return c > ' ' && c != '.' && c != '!' && c != '?' && c < 127 && !(c >= 0x1c && c <= 0x1f);
  }
  return !is_space(c) && !is_terminator(c);
}

struct SpanList {
  std::vector<std::int64_t> starts;
  std::vector<std::int64_t> ends;
  void push(std::size_t s, std::size_t e) {
    starts.push_back(static_cast<std::int64_t>(s));
    ends.push_back(static_cast<std::int64_t>(e));
  }
};

// Paragraph spans of t[0, n).
template <class CharT>
SpanList split_paragraphs(const CharT* t, std::size_t n) {
  SpanList out;
  std::size_t i = 0;
  std::size_t start = 0;
  bool open = false;
  while (i < n) {
    const char32_t c = static_cast<char32_t>(t[i]);
    if (!is_space(c)) {
      if (!open) {
        start = i;
        open = true;
      }
      ++i;
      while (i < n && !is_space(static_cast<char32_t>(t[i]))) ++i;
      continue;
    }
    const std::size_t ws = i;
    int breaks = 0;
    bool hard = false;
    while (i < n) {
      const char32_t d = static_cast<char32_t>(t[i]);
      if (!is_space(d)) break;
      if (d == 0x2029) hard = true;
      if (is_line_break(d) && !(d == '\r' && i + 1 < n && t[i + 1] == '\n')) ++breaks;
      ++i;
    }
    if (open && (breaks >= 2 || hard)) {
      out.push(start, ws);
      open = false;
    }
  }
  if (open) {
    // the last run of whitespace (if any) was skipped above
    std::size_t e = n;
    while (e > start && is_space(static_cast<char32_t>(t[e - 1]))) --e;
    out.push(start, e);
  }
  return out;
}

enum class NewlineMode : int { kIgnore = 0, kBreak = 1, kAuto = 2 };

class Segmenter {
 public:
  static constexpr std::size_t kShortLine = 50;

  // Abbreviations are stored lowercase (ASCII letters lowered) without the
  // final period: "dr", "e.g", "u.s".
  explicit Segmenter(NewlineMode newlines = NewlineMode::kAuto) : newlines_(newlines) {
    static const char* const kAlways[] = {
        // titles and honorifics
        "mr", "mrs", "ms", "messrs", "mme", "mlle", "dr", "prof", "rev", "fr", "hon",
        "gen", "col", "lt", "capt", "cpt", "sgt", "cpl", "maj", "adm", "cmdr", "gov",
        "pres", "sen", "rep", "supt", "insp", "st", "mt", "ste", "jr", "sr", "esq",
        // inline Latin and connective abbreviations
        "e.g", "i.e", "cf", "vs", "viz", "approx", "al", "resp", "incl", "esp",
        "ibid",
        // country and organisation abbreviations usually followed by a noun
        "u.s", "u.k", "u.n", "e.u", "u.s.a"};
    static const char* const kBeforeNumber[] = {
        "no", "nos", "nr", "fig", "figs", "eq", "eqs", "vol", "vols", "pp", "p", "ch",
        "chap", "sec", "sect", "art", "arts", "para", "ref", "refs", "tab", "op",
        "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov",
        "dec", "ex", "pt", "pts", "c", "ca", "cca"};
    for (const char* a : kAlways) add_abbreviation(a);
    for (const char* a : kBeforeNumber) before_number_.insert(to_key(a));
  }

  // Adds an abbreviation that never ends a sentence ("Ph.D", "approx.",
  // case-insensitive for ASCII letters; a trailing period is ignored).
  void add_abbreviation(const std::u32string& a) {
    std::u32string k = lower(a);
    while (!k.empty() && k.back() == U'.') k.pop_back();
    if (!k.empty()) always_.insert(k);
  }
  void add_abbreviation(const char* a) { add_abbreviation(to_key(a)); }

  NewlineMode newlines() const { return newlines_; }

  // Sentences of t[0, n): paragraphs first, then sentences inside each.
  template <class CharT>
  SpanList split(const CharT* t, std::size_t n) const {
    SpanList out;
    sentences_in(t, 0, n, out);
    return out;
  }

  // Sentences inside each given span [starts[k], ends[k]) (clamped to
  // [0, n)); blank lines inside a span still end sentences.
  template <class CharT>
  SpanList split_within(const CharT* t, std::size_t n, const std::int64_t* starts,
                        const std::int64_t* ends, std::size_t count) const {
    SpanList out;
    for (std::size_t k = 0; k < count; ++k) {
      std::int64_t b = starts[k] < 0 ? 0 : starts[k];
      std::int64_t e = ends[k] > static_cast<std::int64_t>(n) ? static_cast<std::int64_t>(n) : ends[k];
      if (e > b) sentences_in(t, static_cast<std::size_t>(b), static_cast<std::size_t>(e), out);
    }
    return out;
  }

 private:
  static constexpr std::size_t kMaxReference = 40;

  static std::u32string to_key(const char* a) {
    std::u32string s;
    for (; *a; ++a) s.push_back(static_cast<char32_t>(static_cast<unsigned char>(*a)));
    return lower(s);
  }
  static std::u32string lower(const std::u32string& s) {
    std::u32string r = s;
    for (auto& c : r)
      if (c >= U'A' && c <= U'Z') c = c - U'A' + U'a';
    return r;
  }

  // Decides whether a single '.' at t[dot] (token starting at tok) followed
  // by a word whose first character is `next` ends the sentence.
  template <class CharT>
  bool period_ends(const CharT* t, std::size_t tok, std::size_t dot, std::size_t sent_start,
                   char32_t next) const {
    // strip opening punctuation from the token
    while (tok < dot && is_opener(static_cast<char32_t>(t[tok]))) ++tok;
    const std::size_t len = dot - tok;
    if (len == 0) return true;
    const char32_t first = static_cast<char32_t>(t[tok]);
    // a single capital letter: an initial (J. R. R. Tolkien)
    if (len == 1 && is_upper(first)) return false;
    // dotted capital initials: J.R.R. Tolkien, U.S.A. (a period after each letter)
    if (len >= 3 && len % 2 == 1) {
      bool initials = true;
      for (std::size_t k = 0; k < len && initials; ++k) {
        const char32_t c = static_cast<char32_t>(t[tok + k]);
        initials = (k % 2 == 0) ? is_upper(c) : c == U'.';
      }
      if (initials) return false;
    }
    // a short enumerator starting the sentence: "1. Introduction", "a. The"
    if (tok == sent_start && len <= 3) {
      bool digits = true;
      for (std::size_t k = tok; k < dot; ++k) digits = digits && is_digit(static_cast<char32_t>(t[k]));
      if (digits || (len == 1 && is_lower(first))) return false;
    }
    if (len > 12) return true;
    std::u32string key(len, U'\0');
    for (std::size_t k = 0; k < len; ++k) {
      char32_t c = static_cast<char32_t>(t[tok + k]);
      if (c >= U'A' && c <= U'Z') c = c - U'A' + U'a';
      key[k] = c;
    }
    if (always_.count(key)) return false;
    if (is_digit(next) && before_number_.count(key)) return false;
    return true;
  }

  // Whether a single line break between the line [line, ws) and the text
  // at next (< e when there is more) ends the open sentence.
  template <class CharT>
  bool line_ends(const CharT* t, std::size_t line, std::size_t ws, std::size_t next,
                 std::size_t e) const {
    if (newlines_ == NewlineMode::kBreak) return true;
    if (newlines_ == NewlineMode::kIgnore || next >= e || ws <= line) return false;
    if (is_lower(static_cast<char32_t>(t[next]))) return false;
    const char32_t last = static_cast<char32_t>(t[ws - 1]);
    if (last == ':') return true;
    if (ws - line > kShortLine) return false;
    if (is_terminator(last) || last == ',' || last == ';' || last == '-' || last == 0x2013 ||
        last == 0x2014 || last == 0x3001 || last == 0xFF0C)
      return false;
    return true;
  }

  template <class CharT>
  void sentences_in(const CharT* t, std::size_t b, std::size_t e, SpanList& out) const {
    std::size_t i = b;
    std::size_t start = 0;
    bool open = false;
    std::size_t tok = b;   // start of the current non-whitespace token
    std::size_t line = b;  // first non-whitespace unit of the current line
    while (i < e) {
      const char32_t c = static_cast<char32_t>(t[i]);
      if (is_space(c)) {
        const std::size_t ws = i;
        int breaks = 0;
        bool hard = false;
        while (i < e) {
          const char32_t d = static_cast<char32_t>(t[i]);
          if (!is_space(d)) break;
          if (d == 0x2029) hard = true;
          if (is_line_break(d) && !(d == '\r' && i + 1 < e && t[i + 1] == '\n')) ++breaks;
          ++i;
        }
        if (open && (hard || breaks >= 2 || (breaks == 1 && line_ends(t, line, ws, i, e)))) {
          out.push(start, ws);
          open = false;
        }
        if (breaks) line = i;
        tok = i;
        continue;
      }
      if (!open) {
        start = i;
        open = true;
      }
      if (!is_terminator(c)) {
        // fast path: skip ordinary characters (not whitespace, not terminators)
        ++i;
        while (i < e && is_plain(static_cast<char32_t>(t[i]))) ++i;
        continue;
      }
      // a run of terminators, then closing quotes / brackets
      const std::size_t term = i;
      bool cjk = is_cjk_terminator(c);
      std::size_t j = i + 1;
      while (j < e && is_terminator(static_cast<char32_t>(t[j]))) {
        cjk = cjk || is_cjk_terminator(static_cast<char32_t>(t[j]));
        ++j;
      }
      const bool single_period = c == '.' && j == term + 1;
      while (j < e && is_closer(static_cast<char32_t>(t[j]))) ++j;
      // bracketed references right after the terminator stay with the
      // sentence: "... in 1978.[citation needed] On", "known.[12][13] It"
      while (j < e && t[j] == CharT('[')) {
        std::size_t k = j + 1;
        const std::size_t lim = k + kMaxReference < e ? k + kMaxReference : e;
        while (k < lim && t[k] != CharT(']') && t[k] != CharT('[') &&
               !is_line_break(static_cast<char32_t>(t[k])))
          ++k;
        if (k >= lim || t[k] != CharT(']')) break;
        j = k + 1;
        while (j < e && is_closer(static_cast<char32_t>(t[j]))) ++j;
      }
      // An ellipsis between characters of unspaced scripts ("他说……然后") ends
      // the sentence as the CJK marks do, with no space after it.
      if (!cjk && t[j - 1] != CharT('.') && term > start && j < e &&
          is_unspaced_script(static_cast<char32_t>(t[term - 1])) &&
          is_unspaced_script(static_cast<char32_t>(t[j]))) {
        for (std::size_t q = term; q < j; ++q)
          if (static_cast<char32_t>(t[q]) == 0x2026) cjk = true;
      }
      bool boundary;
      if (cjk || j >= e) {
        boundary = true;
      } else if (!is_space(static_cast<char32_t>(t[j]))) {
        boundary = false;
      } else {
        std::size_t k = j;
        while (k < e && is_space(static_cast<char32_t>(t[k]))) ++k;
        // quotes may open the next sentence ('"Stop." he'), brackets may open
        // a parenthetical sentence ('(see above.)'): skip only quotes
        while (k < e && is_quote_opener(static_cast<char32_t>(t[k]))) ++k;
        const char32_t next = k < e ? static_cast<char32_t>(t[k]) : U' ';
        if (is_lower(next) || (c == '.' && next == '.')) {
          // a lowercase word continues the sentence; so does a spaced
          // ellipsis ". . ."
          boundary = false;
        } else if (single_period) {
          boundary = period_ends(t, tok, term, start, next);
        } else {
          boundary = true;
        }
      }
      if (boundary) {
        out.push(start, j);
        open = false;
      }
      i = j;
    }
    if (open) {
      std::size_t end = e;
      while (end > start && is_space(static_cast<char32_t>(t[end - 1]))) --end;
      out.push(start, end);
    }
  }

  NewlineMode newlines_;
  std::unordered_set<std::u32string> always_;
  std::unordered_set<std::u32string> before_number_;
};

}  // namespace momoka::text
