// Word tokenisation for lexical retrieval.
//
// A token is a maximal run of word code points (letters, digits and
// combining marks of any script), lowercased, encoded as UTF-8. Scripts
// written without spaces are cut per character: Thai, Lao, Khmer, Myanmar
// and Tibetan characters are one token each; a run of CJK characters
// (ideographs, kana, bopomofo; `is_cjk`) is, by the tokeniser rule version
// (`Options::version`): 1, one token per character; 2, each character and
// the overlapping bigram it starts with the next one ("中文分词" -> "中",
// "中文", "文", "文分", "分", "分词", "词"), as Lucene's CJKBigramFilter
// does with outputUnigrams. Every other token is the same under both rules. Fullwidth ASCII forms are folded to
// ASCII. Optional: English Porter stemming (ASCII words only) and a stopword
// set (matched after lowercasing, before stemming).
//
// Code point classes are decided from block ranges of the Unicode standard,
// not a full property table: every letter and digit of the major scripts is
// a word character, and the punctuation, symbol and space blocks are not.
// Lowercasing covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "momoka/stem.hpp"

namespace momoka::tok {

enum class CpClass : std::uint8_t { kSep = 0, kWord = 1, kSingle = 2 };

inline CpClass classify(char32_t c) {
  if (c < 0x80) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CpClass::kWord;
    return CpClass::kSep;
  }
  if (c < 0xC0) return (c == 0xAA || c == 0xB5 || c == 0xBA) ? CpClass::kWord : CpClass::kSep;
  if (c < 0x100) return (c == 0xD7 || c == 0xF7) ? CpClass::kSep : CpClass::kWord;
  if (c < 0x370) return CpClass::kWord;  // Latin Extended, IPA, modifiers, combining marks
  if (c < 0x2000) {
    switch (c) {
      case 0x37E: case 0x387:                                // Greek question mark, ano teleia
      case 0x55A: case 0x55B: case 0x55C: case 0x55D: case 0x55E: case 0x55F: case 0x589:  // Armenian
      case 0x5BE: case 0x5C0: case 0x5C3: case 0x5C6: case 0x5F3: case 0x5F4:              // Hebrew
      case 0x60C: case 0x60D: case 0x61B: case 0x61E: case 0x61F:                          // Arabic
      case 0x66A: case 0x66B: case 0x66C: case 0x66D: case 0x6D4:
      case 0x964: case 0x965: case 0x970:                    // Devanagari danda
      case 0xE4F: case 0xE5A: case 0xE5B:                    // Thai
      case 0x10FB: case 0x1360: case 0x1361: case 0x1362: case 0x1363: case 0x1364:
      case 0x1365: case 0x1366: case 0x1367: case 0x1368:    // Georgian, Ethiopic
      case 0x166D: case 0x166E: case 0x1680:                 // Canadian syllabics, Ogham space
      case 0x17D4: case 0x17D5: case 0x17D6: case 0x17DA:    // Khmer
      case 0x1800: case 0x1801: case 0x1802: case 0x1803: case 0x1804: case 0x1805:
      case 0x1806: case 0x1807: case 0x1808: case 0x1809: case 0x180A:  // Mongolian
        return CpClass::kSep;
      default:
        // Thai, Lao, Khmer, Myanmar and Tibetan are written without spaces.
        if ((c >= 0xE00 && c < 0xF00) || (c >= 0x1780 && c < 0x1800) || (c >= 0x1000 && c < 0x10A0) ||
            (c >= 0xF00 && c < 0x1000))
          return CpClass::kSingle;
        return CpClass::kWord;
    }
  }
  if (c < 0x2C00) return CpClass::kSep;  // punctuation, symbols, arrows, math, boxes
  if (c < 0x2E00) return CpClass::kWord;  // Glagolitic, Latin Ext-C, Coptic, Georgian, Ethiopic ext.
  if (c < 0x2E80) return CpClass::kSep;  // supplemental punctuation
  if (c < 0x2FE0) return CpClass::kSingle;  // CJK radicals
  if (c < 0x3000) return CpClass::kSep;
  if (c < 0x3040) return (c == 0x3005 || c == 0x3006 || c == 0x3007) ? CpClass::kSingle : CpClass::kSep;
  if (c < 0x3100) return c == 0x30FB ? CpClass::kSep : CpClass::kSingle;  // kana
  if (c < 0x3200) return CpClass::kSingle;  // bopomofo, Hangul compatibility jamo, kanbun
  if (c < 0x3400) return CpClass::kSep;     // enclosed CJK, compatibility
  if (c < 0x4DC0) return CpClass::kSingle;  // CJK extension A
  if (c < 0x4E00) return CpClass::kSep;     // Yijing symbols
  if (c < 0xA000) return CpClass::kSingle;  // CJK unified ideographs
  if (c < 0xAC00) return CpClass::kWord;    // Yi, Lisu, Vai, Cyrillic ext-B, ...
  if (c < 0xD7B0) return CpClass::kWord;    // Hangul syllables (Korean uses spaces)
  if (c < 0xD800) return CpClass::kWord;
  if (c < 0xF900) return CpClass::kSep;     // surrogates, private use
  if (c < 0xFB00) return CpClass::kSingle;  // CJK compatibility ideographs
  if (c < 0xFE00) return CpClass::kWord;    // alphabetic presentation forms
  if (c < 0xFE10) return CpClass::kWord;    // variation selectors stay with their base
  if (c < 0xFE70) return CpClass::kSep;     // vertical / small forms, half marks
  if (c < 0xFF00) return c == 0xFEFF ? CpClass::kSep : CpClass::kWord;
  if (c < 0xFFF0) {
    if ((c >= 0xFF10 && c <= 0xFF19) || (c >= 0xFF21 && c <= 0xFF3A) || (c >= 0xFF41 && c <= 0xFF5A))
      return CpClass::kWord;
    if (c >= 0xFF66 && c <= 0xFF9F) return CpClass::kSingle;  // halfwidth katakana
    if (c >= 0xFFA0 && c <= 0xFFDC) return CpClass::kWord;    // halfwidth Hangul
    return CpClass::kSep;
  }
  if (c < 0x10000) return CpClass::kSep;
  if (c >= 0x1F000 && c < 0x1FB00) return CpClass::kSep;  // emoji and pictographs
  if (c >= 0x20000 && c < 0x40000) return CpClass::kSingle;  // CJK extensions B..H
  if (c >= 0xE0000) return CpClass::kSep;  // tags, variation selectors supplement, private use
  return CpClass::kWord;
}

// A CJK character: the code points cut per character (kSingle) from the CJK
// radicals block on (ideographs of every extension and compatibility block,
// kana and halfwidth katakana, bopomofo, the ideographic iteration and
// closing marks and number zero), not the Southeast Asian scripts below it.
inline bool is_cjk(char32_t c) { return c >= 0x2E80 && classify(c) == CpClass::kSingle; }

// Simple lowercase mapping (one code point to one) and fullwidth folding.
inline char32_t fold(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c < 0x100) return (c >= 0xC0 && c <= 0xDE && c != 0xD7) ? c + 32 : c;
  if (c < 0x180) {
    if (c == 0x130) return 'i';
    if (c == 0x178) return 0xFF;
    if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return (c % 2 == 0) ? c + 1 : c;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
    return c;
  }
  if (c >= 0x370 && c < 0x400) {
    if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
    if (c == 0x386) return 0x3AC;
    if (c >= 0x388 && c <= 0x38A) return c + 37;
    if (c == 0x38C) return 0x3CC;
    if (c == 0x38E || c == 0x38F) return c + 63;
    if (c == 0x3C2) return 0x3C3;  // final sigma matches sigma
    return c;
  }
  if (c >= 0x400 && c < 0x530) {
    if (c <= 0x40F) return c + 80;
    if (c <= 0x42F) return c + 32;
    if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF) || (c >= 0x4D0 && c <= 0x52F))
      return (c % 2 == 0) ? c + 1 : c;
    return c;
  }
  if (c >= 0xFF01 && c <= 0xFF5E) return fold(c - 0xFEE0);  // fullwidth ASCII
  return c;
}

inline void append_utf8(std::string& s, char32_t c) {
  if (c < 0x80) {
    s.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (c >> 6)));
    s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    s.push_back(static_cast<char>(0xE0 | (c >> 12)));
    s.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xF0 | (c >> 18)));
    s.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

// Tokeniser rule versions (see the top of this file); a BM25 file records
// the one its texts were tokenised with.
inline constexpr int kRuleUnigram = 1;  // CJK: one token per character
inline constexpr int kRuleBigram = 2;   // CJK: characters and the overlapping bigrams of each run
inline constexpr int kRuleLatest = kRuleBigram;

struct Options {
  int version = kRuleUnigram;
  bool lowercase = true;
  bool stem = false;
  std::unordered_set<std::string> stopwords;
};

// Tokenises code units p[0..n) (each unit one code point, as in a Python
// str) and appends the tokens to `out`.
template <class CharT>
void tokenize(const CharT* p, std::size_t n, const Options& opt, std::vector<std::string>& out) {
  std::string cur;
  auto flush = [&]() {
    if (cur.empty()) return;
    if (!opt.stopwords.empty() && opt.stopwords.count(cur)) {
      cur.clear();
      return;
    }
    if (opt.stem) stem::Porter::stem(cur);
    out.push_back(std::move(cur));
    cur.clear();
  };
  const bool bigrams = opt.version >= kRuleBigram;
  char32_t prev_cjk = 0;  // the previous code point when it was a CJK character (bigram rule), else 0
  for (std::size_t i = 0; i < n; ++i) {
    const char32_t c = static_cast<char32_t>(p[i]);
    const CpClass k = classify(c);
    if (bigrams && k == CpClass::kSingle && is_cjk(c)) {
      flush();
      std::string t;
      if (prev_cjk != 0) {  // the bigram of the previous character and this one
        append_utf8(t, prev_cjk);
        append_utf8(t, c);
        out.push_back(std::move(t));
        t.clear();
      }
      append_utf8(t, c);
      out.push_back(std::move(t));
      prev_cjk = c;
      continue;
    }
    prev_cjk = 0;
    if (k == CpClass::kSep) {
      flush();
    } else if (k == CpClass::kSingle) {
      flush();
      append_utf8(cur, c);
      out.push_back(std::move(cur));
      cur.clear();
    } else {
      char32_t f = c;
      if (c >= 0xFF01 && c <= 0xFF5E) f = c - 0xFEE0;
      if (opt.lowercase) f = fold(f);
      append_utf8(cur, f);
    }
  }
  flush();
}

}  // namespace momoka::tok
