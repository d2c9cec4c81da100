// The BM25 file: an index together with the tokeniser settings its texts
// were tokenised with, so that one blob restores everything a query needs.
//
// Layout (little-endian), the whole file format of a saved BM25 index:
//
//   index bytes        Index::write (bm25_io.hpp), format version 2
//   "MMKTOK" v "\0"     8 bytes, start of the tokeniser trailer; byte v is
//                      the tokeniser rule version (tokenize.hpp) for rules
//                      after the first, 0 for rule 1 (so files of rule 1,
//                      and every file written before rules had versions,
//                      read as rule 1, byte for byte as before)
//   u8 lowercase, u8 stem
//   u32 n              stopwords, sorted bytewise
//   n x (u32 len, len bytes)
//   u64 offset         byte offset of "MMKTOK" (= the index bytes' length)
//
// `TextIndex::write(put)` hands the bytes to `put(ptr, n)` in order (a string
// or a file), so saving needs no second copy. Reading checks every length
// against the buffer and throws std::runtime_error for anything that is not
// such a file; TextIndex::append throws std::invalid_argument when settings
// differ.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "momoka/bm25.hpp"
#include "momoka/tokenize.hpp"

namespace momoka::bm25 {

// A BM25 index with the tokeniser settings of its texts: the unit a BM25
// file stores. The index is held by pointer so that its address (and lock)
// never moves when the TextIndex does.
struct TextIndex {
  tok::Options opt;
  std::unique_ptr<Index> ix;

  TextIndex() : ix(std::make_unique<Index>()) {}
  TextIndex(const Params& p, tok::Options o) : opt(std::move(o)), ix(std::make_unique<Index>(p)) {}

  // The stopwords in the order the file stores them (sorted).
  std::vector<std::string> sorted_stopwords() const {
    std::vector<std::string> sw(opt.stopwords.begin(), opt.stopwords.end());
    std::sort(sw.begin(), sw.end());
    return sw;
  }

  // Appends `other`'s documents (Index::append); the tokeniser settings must
  // be equal, else std::invalid_argument.
  std::pair<std::size_t, std::size_t> append(const TextIndex& other) {
    if (opt.version != other.opt.version || opt.lowercase != other.opt.lowercase || opt.stem != other.opt.stem ||
        opt.stopwords != other.opt.stopwords)
      throw std::invalid_argument(
          "cannot append a BM25 index with different tokeniser settings (tokenizer version, lowercase, stem, "
          "stopwords)");
    return ix->append(*other.ix);
  }

  template <class Put>
  void write(Put&& put) const {
    std::uint64_t off = 0;
    ix->write([&](const void* p, std::size_t n) {
      put(p, n);
      off += n;
    });
    char magic[8] = {'M', 'M', 'K', 'T', 'O', 'K', 0, 0};
    magic[6] = opt.version == tok::kRuleUnigram ? 0 : static_cast<char>(opt.version);
    put(magic, 8);
    const char flags[2] = {static_cast<char>(opt.lowercase), static_cast<char>(opt.stem)};
    put(flags, 2);
    const std::vector<std::string> sw = sorted_stopwords();
    auto put32 = [&](std::uint32_t v) { put(&v, 4); };
    put32(static_cast<std::uint32_t>(sw.size()));
    for (const auto& w : sw) {
      put32(static_cast<std::uint32_t>(w.size()));
      put(w.data(), w.size());
    }
    put(&off, 8);
  }

  std::string serialize() const {
    std::string out;
    write([&](const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); });
    return out;
  }

  static TextIndex deserialize(const char* data, std::size_t n) {
    if (n < 16) throw std::runtime_error("not a momoka BM25 index (too short)");
    std::uint64_t off;
    std::memcpy(&off, data + n - 8, 8);
    if (off + 14 > n - 8 || std::memcmp(data + off, "MMKTOK", 6) != 0 || data[off + 7] != 0)
      throw std::runtime_error("not a momoka BM25 index (missing tokeniser trailer)");
    TextIndex s;
    const int version = static_cast<unsigned char>(data[off + 6]);
    if (version > tok::kRuleLatest || version == tok::kRuleUnigram)
      throw std::runtime_error("BM25 index of tokeniser rule version " + std::to_string(version) +
                               ", which this version of momoka does not know (a newer momoka wrote it)");
    s.opt.version = version == 0 ? tok::kRuleUnigram : version;
    std::size_t p = off + 8;
    s.opt.lowercase = data[p++] != 0;
    s.opt.stem = data[p++] != 0;
    const std::size_t end = n - 8;
    auto get32 = [&]() {
      if (p + 4 > end) throw std::runtime_error("BM25 index is truncated or corrupted");
      std::uint32_t v;
      std::memcpy(&v, data + p, 4);
      p += 4;
      return v;
    };
    const std::uint32_t nsw = get32();
    for (std::uint32_t i = 0; i < nsw; ++i) {
      const std::uint32_t len = get32();
      if (p + len > end) throw std::runtime_error("BM25 index is truncated or corrupted");
      s.opt.stopwords.emplace(data + p, len);
      p += len;
    }
    if (p != end) throw std::runtime_error("BM25 index is corrupted (tokeniser trailer)");
    s.ix = std::make_unique<Index>(Index::deserialize(data, static_cast<std::size_t>(off)));
    return s;
  }

  // Writes the file at `path` (std::runtime_error when it cannot).
  void save(const std::string& path) const {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error("cannot open " + path + " for writing");
    write([&](const void* p, std::size_t n) { f.write(static_cast<const char*>(p), static_cast<std::streamsize>(n)); });
    f.flush();
    if (!f) throw std::runtime_error("write to " + path + " failed");
  }

  static TextIndex load(const std::string& path) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::string b(static_cast<std::size_t>(f.tellg()), '\0');
    f.seekg(0);
    f.read(b.data(), static_cast<std::streamsize>(b.size()));
    if (!f) throw std::runtime_error("cannot read " + path);
    return deserialize(b.data(), b.size());
  }
};

}  // namespace momoka::bm25
