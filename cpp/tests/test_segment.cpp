// Sentence and paragraph segmentation (segment.hpp) on short texts whose
// spans are counted by hand: offsets are code-unit indices, half-open.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "check.hpp"
#include "momoka/segment.hpp"

namespace {

using Spans = std::vector<std::pair<std::int64_t, std::int64_t>>;

Spans spans(const momoka::text::SpanList& s) {
  Spans out;
  for (std::size_t i = 0; i < s.starts.size(); ++i) out.emplace_back(s.starts[i], s.ends[i]);
  return out;
}

template <class CharT>
Spans sentences(const std::basic_string<CharT>& t,
                momoka::text::NewlineMode mode = momoka::text::NewlineMode::kAuto) {
  return spans(momoka::text::Segmenter(mode).split(t.data(), t.size()));
}

template <class CharT>
Spans paragraphs(const std::basic_string<CharT>& t) {
  return spans(momoka::text::split_paragraphs(t.data(), t.size()));
}

std::string show(const Spans& s) {
  std::string o;
  for (auto& p : s) o += "[" + std::to_string(p.first) + "," + std::to_string(p.second) + ")";
  return o;
}

// The text: positions counted from 0.
//   "Dr. Smith arrived."  0..18   ("Dr." is an abbreviation: no break after it)
//   "He sat down!"        19..31
//   "Was it late?"        32..44
//   "\n\n"                44..46  (a blank line: a new paragraph)
//   "The end came, etc. and then J. R. R. Tolkien wrote."  46..97
//     (a lowercase word after "etc." continues; capital initials do not end)
const std::string kText =
    "Dr. Smith arrived. He sat down! Was it late?\n\nThe end came, etc. and then J. R. R. Tolkien wrote.";

}  // namespace

MOMOKA_TEST(sentences_of_two_paragraphs) {
  const Spans want = {{0, 18}, {19, 31}, {32, 44}, {46, 97}};
  const Spans got = sentences(kText);
  CHECK(got == want);
  if (got != want) std::fprintf(stderr, "  got %s\n", show(got).c_str());
}

MOMOKA_TEST(paragraphs_split_at_blank_lines) {
  const Spans want = {{0, 44}, {46, 97}};
  CHECK(paragraphs(kText) == want);
  // Surrounding whitespace is trimmed; "\r\n" counts as one break, so "\r\n" alone
  // does not split but "\r\n\r\n" does: "  a\r\nb\r\n\r\nc  " -> [2,6) "a\r\nb", [10,11) "c".
  const Spans want2 = {{2, 6}, {10, 11}};
  CHECK(paragraphs(std::string("  a\r\nb\r\n\r\nc  ")) == want2);
  // U+2029 (paragraph separator) always splits: "ab\u2029cd" -> [0,2), [3,5).
  const std::u32string ps = {U'a', U'b', 0x2029, U'c', U'd'};
  const Spans want3 = {{0, 2}, {3, 5}};
  CHECK(paragraphs(ps) == want3);
  CHECK(paragraphs(std::string(" \n\t ")).empty());
}

MOMOKA_TEST(line_breaks_by_mode) {
  // "Introduction" 0..12, '\n', "We study trees." 13..28, '\n',
  // "They grow slowly\nand stay." 29..55 (the lowercase line continues it).
  const std::string t = "Introduction\nWe study trees.\nThey grow slowly\nand stay.";
  const Spans want_auto = {{0, 12}, {13, 28}, {29, 55}};
  CHECK(sentences(t) == want_auto);
  // kIgnore: a single break is whitespace, so the heading runs into the first sentence.
  const Spans want_ignore = {{0, 28}, {29, 55}};
  CHECK(sentences(t, momoka::text::NewlineMode::kIgnore) == want_ignore);
  // kBreak: every line break ends a sentence: "They grow slowly" 29..45, "and stay." 46..55.
  const Spans want_break = {{0, 12}, {13, 28}, {29, 45}, {46, 55}};
  CHECK(sentences(t, momoka::text::NewlineMode::kBreak) == want_break);
}

MOMOKA_TEST(cjk_terminators_need_no_space) {
  // 你好。再见！ : U+3002 and U+FF01 end sentences with no space after them: [0,3), [3,6).
  const std::u16string t = {0x4F60, 0x597D, 0x3002, 0x518D, 0x89C1, 0xFF01};
  const Spans want = {{0, 3}, {3, 6}};
  CHECK(sentences(t) == want);
}

MOMOKA_TEST(closing_quote_stays_with_sentence) {
  // He said "Stop." Then left.  -> [0,15) ends after the closing quote, [16,26).
  const std::string t = "He said \"Stop.\" Then left.";
  const Spans want = {{0, 15}, {16, 26}};
  CHECK(sentences(t) == want);
  // Section numbers: "See No. 5 now. Ok." -> "No." before a digit does not end: [0,14), [15,18).
  const Spans want2 = {{0, 14}, {15, 18}};
  CHECK(sentences(std::string("See No. 5 now. Ok.")) == want2);
}
