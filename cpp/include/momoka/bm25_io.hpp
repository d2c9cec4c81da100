// Serialisation of momoka::bm25::Index (included at the end of bm25.hpp).
//
// Format version 2 (little-endian): "MMKBM25\0", u32 version, f64 k1, b,
// epsilon, u32 idf, u64 slots, slots x u32 length, slots x u8 alive,
// u64 terms, terms x (varint byte length, bytes, varint postings, varint
// list bytes, list bytes as in bm25_postings.hpp). Deleted documents' postings are
// dropped before writing. Version 1 (raw u32 doc, u32 tf pairs, written by
// earlier releases) is still read. A saved BM25 file is these bytes followed
// by the tokeniser trailer (bm25_file.hpp).
#pragma once

#include <cstring>
#include <stdexcept>
#include <string>

namespace momoka::bm25 {

namespace io {

struct Reader {
  const char* data;
  std::size_t n;
  std::size_t pos;
  template <class T>
  T get() {
    if (pos + sizeof(T) > n) throw std::runtime_error("BM25 index is truncated or corrupted");
    T v;
    std::memcpy(&v, data + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::uint32_t varint() {
    const auto* p = reinterpret_cast<const std::uint8_t*>(data + pos);
    std::uint32_t v;
    if (!get_varint_checked(p, reinterpret_cast<const std::uint8_t*>(data + n), v))
      throw std::runtime_error("BM25 index is truncated or corrupted");
    pos = static_cast<std::size_t>(reinterpret_cast<const char*>(p) - data);
    return v;
  }
  std::string bytes(std::size_t len) {
    if (len > n - pos) throw std::runtime_error("BM25 index is truncated or corrupted");
    std::string s(data + pos, len);
    pos += len;
    return s;
  }
};

inline void corrupted(const char* what) { throw std::runtime_error(std::string("BM25 index is corrupted (") + what + ")"); }

}  // namespace io

// Writing needs only the postings of live documents, not the derived tables
// (idf, norms, skips): a save right after a build does not allocate them.
template <class Put>
void Index::write(Put&& put) const {
  with_compacted([&]() {
    std::size_t n_live_terms = 0;
    for (const List& li : lists_) n_live_terms += li.n != 0;
    auto put_v = [&](auto v) { put(&v, sizeof(v)); };
    put("MMKBM25\0", 8);
    put_v(kFormatVersion);
    put_v(params_.k1);
    put_v(params_.b);
    put_v(params_.epsilon);
    put_v(static_cast<std::uint32_t>(params_.idf));
    put_v(static_cast<std::uint64_t>(doc_len_.size()));
    put(doc_len_.data(), doc_len_.size() * sizeof(std::uint32_t));
    put(alive_.data(), alive_.size());
    put_v(static_cast<std::uint64_t>(n_live_terms));
    for (std::size_t t = 0; t < vocab_.size(); ++t) {
      const List& li = lists_[t];
      if (!li.n) continue;
      std::string head;
      const std::string_view term = vocab_.term(static_cast<std::uint32_t>(t));
      put_varint(head, static_cast<std::uint32_t>(term.size()));
      head.append(term);
      put_varint(head, li.n);
      put_varint(head, static_cast<std::uint32_t>(li.bytes.size()));
      put(head.data(), head.size());
      put(li.bytes.data(), li.bytes.size());
    }
  });
}

inline Index Index::deserialize(const char* data, std::size_t n) {
  io::Reader r{data, n, 0};
  if (n < 8 || std::memcmp(data, "MMKBM25\0", 8) != 0) throw std::runtime_error("not a momoka BM25 index");
  r.pos = 8;
  const auto version = r.get<std::uint32_t>();
  if (version > kFormatVersion)
    throw std::runtime_error("BM25 index format version " + std::to_string(version) +
                             " is newer than this momoka supports (" + std::to_string(kFormatVersion) + ")");
  if (version == 0) throw std::runtime_error("BM25 index: bad format version 0");
  Params p;
  p.k1 = r.get<double>();
  p.b = r.get<double>();
  p.epsilon = r.get<double>();
  const auto idf = r.get<std::uint32_t>();
  if (idf > 1) throw std::runtime_error("BM25 index: unknown idf variant");
  p.idf = static_cast<Idf>(idf);
  Index ix(p);
  const auto slots = r.get<std::uint64_t>();
  if (slots > n) io::corrupted("slot count");
  ix.doc_len_.resize(slots);
  ix.alive_.resize(slots);
  for (std::size_t d = 0; d < slots; ++d) {
    if (version == 1) {
      ix.doc_len_[d] = r.get<std::uint32_t>();
      ix.alive_[d] = r.get<std::uint8_t>();
    } else {
      ix.doc_len_[d] = r.get<std::uint32_t>();
    }
  }
  if (version >= 2)
    for (std::size_t d = 0; d < slots; ++d) ix.alive_[d] = r.get<std::uint8_t>();
  for (std::size_t d = 0; d < slots; ++d) {
    if (ix.alive_[d] > 1) io::corrupted("alive flag");
    if (ix.alive_[d]) {
      ix.total_len_ += ix.doc_len_[d];
      ++ix.n_live_;
    }
  }
  const auto nterms = r.get<std::uint64_t>();
  if (nterms > n) io::corrupted("term count");
  auto check_doc = [&](std::uint32_t d) {
    if (!ix.alive_[d]) io::corrupted("posting of a deleted document");
  };
  for (std::size_t t = 0; t < nterms; ++t) {
    const auto len = version == 1 ? r.get<std::uint32_t>() : r.varint();
    const std::uint32_t id = ix.term_id(r.bytes(len));
    List& li = ix.lists_[id];
    if (li.n) throw std::runtime_error("BM25 index: duplicate term");
    const auto np = version == 1 ? r.get<std::uint32_t>() : r.varint();
    if (np == 0 || np > n) io::corrupted("posting count");
    if (version == 1) {
      for (std::uint32_t i = 0; i < np; ++i) {
        const auto doc = r.get<std::uint32_t>();
        const auto tf = r.get<std::uint32_t>();
        if (doc >= slots || (li.n && doc <= li.last) || tf == 0) io::corrupted("bad posting");
        check_doc(doc);
        li.append(doc, tf);
      }
    } else {
      const auto nb = r.varint();
      li.bytes = r.bytes(nb);
      if (!validate_list(li.bytes, np, slots, [&](std::uint32_t d) {
            check_doc(d);
            li.last = d;
          }))
        io::corrupted("bad posting list");
      li.n = np;
    }
  }
  if (r.pos != n) throw std::runtime_error("BM25 index has trailing bytes (corrupted)");
  ix.dirty_ = true;
  return ix;
}

}  // namespace momoka::bm25
