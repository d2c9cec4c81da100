// A Porter (1980) English suffix stemmer for lowercase ASCII words.
//
// Written from the published description of the algorithm (M.F. Porter,
// "An algorithm for suffix stripping", Program 14(3), 1980), with the two
// small revisions of the reference version ("bli" -> "ble", "logi" -> "log").
// Words that are not plain lowercase ASCII letters, or shorter than three
// letters, are returned unchanged.
#pragma once

#include <cstddef>
#include <string>

namespace momoka::stem {

class Porter {
 public:
  // Stems `w` in place.
  static void stem(std::string& w) {
    if (w.size() < 3) return;
    for (char c : w)
      if (c < 'a' || c > 'z') return;
    Porter p(w);
    p.step1ab();
    if (p.k_ > 0) {
      p.step1c();
      p.step2();
      p.step3();
      p.step4();
      p.step5();
    }
    w.resize(p.k_ + 1);
  }

 private:
  explicit Porter(std::string& w) : b_(w), k_(static_cast<long>(w.size()) - 1), j_(0) {}

  std::string& b_;
  long k_;  // index of the last letter of the current word
  long j_;  // end of the stem when a suffix matched

  // True when b_[i] is a consonant.
  bool cons(long i) const {
    switch (b_[i]) {
      case 'a': case 'e': case 'i': case 'o': case 'u': return false;
      case 'y': return i == 0 ? true : !cons(i - 1);
      default: return true;
    }
  }
  // m(): the number of vowel-consonant sequences in b_[0..j_].
  int m() const {
    int n = 0;
    long i = 0;
    while (true) {
      if (i > j_) return n;
      if (!cons(i)) break;
      ++i;
    }
    ++i;
    while (true) {
      while (true) {
        if (i > j_) return n;
        if (cons(i)) break;
        ++i;
      }
      ++i;
      ++n;
      while (true) {
        if (i > j_) return n;
        if (!cons(i)) break;
        ++i;
      }
      ++i;
    }
  }
  // True when b_[0..j_] contains a vowel.
  bool vowel_in_stem() const {
    for (long i = 0; i <= j_; ++i)
      if (!cons(i)) return true;
    return false;
  }
  // True when b_[i-1..i] is a double consonant.
  bool doublec(long i) const {
    if (i < 1) return false;
    if (b_[i] != b_[i - 1]) return false;
    return cons(i);
  }
  // True when b_[i-2..i] is consonant-vowel-consonant and the last
  // consonant is not w, x or y.
  bool cvc(long i) const {
    if (i < 2 || !cons(i) || cons(i - 1) || !cons(i - 2)) return false;
    char c = b_[i];
    return !(c == 'w' || c == 'x' || c == 'y');
  }
  // True when the word ends with s; sets j_ to the end of the stem.
  bool ends(const char* s) {
    long len = 0;
    while (s[len]) ++len;
    if (len > k_ + 1) return false;
    if (b_.compare(static_cast<std::size_t>(k_ - len + 1), static_cast<std::size_t>(len), s) != 0) return false;
    j_ = k_ - len;
    return true;
  }
  // Replaces b_[j_+1..k_] with s.
  void setto(const char* s) {
    std::string t(s);
    b_.replace(static_cast<std::size_t>(j_ + 1), static_cast<std::size_t>(k_ - j_), t);
    k_ = j_ + static_cast<long>(t.size());
    if (static_cast<long>(b_.size()) > k_ + 1) b_.resize(static_cast<std::size_t>(k_ + 1));
  }
  void r(const char* s) {
    if (m() > 0) setto(s);
  }

  void step1ab() {
    if (b_[k_] == 's') {
      if (ends("sses")) k_ -= 2;
      else if (ends("ies")) setto("i");
      else if (k_ >= 1 && b_[k_ - 1] != 's') k_ -= 1;
    }
    b_.resize(static_cast<std::size_t>(k_ + 1));
    if (ends("eed")) {
      if (m() > 0) k_ -= 1;
    } else if ((ends("ed") || ends("ing")) && vowel_in_stem()) {
      k_ = j_;
      b_.resize(static_cast<std::size_t>(k_ + 1));
      if (ends("at")) setto("ate");
      else if (ends("bl")) setto("ble");
      else if (ends("iz")) setto("ize");
      else if (doublec(k_)) {
        char c = b_[k_];
        if (!(c == 'l' || c == 's' || c == 'z')) k_ -= 1;
      } else {
        j_ = k_;
        if (m() == 1 && cvc(k_)) {
          j_ = k_;
          setto_append("e");
        }
      }
    }
    b_.resize(static_cast<std::size_t>(k_ + 1));
  }
  void setto_append(const char* s) {
    b_.resize(static_cast<std::size_t>(k_ + 1));
    b_ += s;
    k_ = static_cast<long>(b_.size()) - 1;
  }
  void step1c() {
    if (ends("y") && vowel_in_stem()) b_[k_] = 'i';
  }
  void step2() {
    if (k_ < 1) return;
    switch (b_[k_ - 1]) {
      case 'a':
        if (ends("ational")) { r("ate"); break; }
        if (ends("tional")) { r("tion"); break; }
        break;
      case 'c':
        if (ends("enci")) { r("ence"); break; }
        if (ends("anci")) { r("ance"); break; }
        break;
      case 'e':
        if (ends("izer")) { r("ize"); break; }
        break;
      case 'l':
        if (ends("bli")) { r("ble"); break; }
        if (ends("alli")) { r("al"); break; }
        if (ends("entli")) { r("ent"); break; }
        if (ends("eli")) { r("e"); break; }
        if (ends("ousli")) { r("ous"); break; }
        break;
      case 'o':
        if (ends("ization")) { r("ize"); break; }
        if (ends("ation")) { r("ate"); break; }
        if (ends("ator")) { r("ate"); break; }
        break;
      case 's':
        if (ends("alism")) { r("al"); break; }
        if (ends("iveness")) { r("ive"); break; }
        if (ends("fulness")) { r("ful"); break; }
        if (ends("ousness")) { r("ous"); break; }
        break;
      case 't':
        if (ends("aliti")) { r("al"); break; }
        if (ends("iviti")) { r("ive"); break; }
        if (ends("biliti")) { r("ble"); break; }
        break;
      case 'g':
        if (ends("logi")) { r("log"); break; }
        break;
      default: break;
    }
  }
  void step3() {
    switch (b_[k_]) {
      case 'e':
        if (ends("icate")) { r("ic"); break; }
        if (ends("ative")) { r(""); break; }
        if (ends("alize")) { r("al"); break; }
        break;
      case 'i':
        if (ends("iciti")) { r("ic"); break; }
        break;
      case 'l':
        if (ends("ical")) { r("ic"); break; }
        if (ends("ful")) { r(""); break; }
        break;
      case 's':
        if (ends("ness")) { r(""); break; }
        break;
      default: break;
    }
  }
  void step4() {
    if (k_ < 1) return;
    switch (b_[k_ - 1]) {
      case 'a': if (ends("al")) break; return;
      case 'c': if (ends("ance")) break; if (ends("ence")) break; return;
      case 'e': if (ends("er")) break; return;
      case 'i': if (ends("ic")) break; return;
      case 'l': if (ends("able")) break; if (ends("ible")) break; return;
      case 'n':
        if (ends("ant")) break;
        if (ends("ement")) break;
        if (ends("ment")) break;
        if (ends("ent")) break;
        return;
      case 'o':
        if (ends("ion") && j_ >= 0 && (b_[j_] == 's' || b_[j_] == 't')) break;
        if (ends("ou")) break;
        return;
      case 's': if (ends("ism")) break; return;
      case 't': if (ends("ate")) break; if (ends("iti")) break; return;
      case 'u': if (ends("ous")) break; return;
      case 'v': if (ends("ive")) break; return;
      case 'z': if (ends("ize")) break; return;
      default: return;
    }
    if (m() > 1) {
      k_ = j_;
      b_.resize(static_cast<std::size_t>(k_ + 1));
    }
  }
  void step5() {
    j_ = k_;
    if (b_[k_] == 'e') {
      j_ = k_ - 1;
      int a = m();
      if (a > 1 || (a == 1 && !cvc(k_ - 1))) k_ -= 1;
    }
    b_.resize(static_cast<std::size_t>(k_ + 1));
    if (b_[k_] == 'l' && doublec(k_)) {
      j_ = k_;
      if (m() > 1) k_ -= 1;
    }
    b_.resize(static_cast<std::size_t>(k_ + 1));
  }
};

}  // namespace momoka::stem
