// sort.cc.h: sorting a table's ids (exports, metadata, eviction's and deltas' outputs, rows
// by index, pending gradients): a least-significant-digit radix sort on the int64 key, a byte a
// pass, that skips the passes in which every key has the same byte (ids below 2^32, or
// indices, take four or fewer of the eight). 4M (id, index) pairs on this VM: 112-119 ms for
// random 64-bit ids, 80 below 2^32, against 290-317 ms for std::sort of the pairs and 500-580
// for the indirect sort the export used before (11-bit digits: 148-208 ms). Stable; one
// scratch copy of the input. Compiled as part of unity_table.cc, before the files that sort.

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "../idmap/idmap.h"

namespace ct {
namespace table {

// Below this many elements std::stable_sort is faster (this VM, random ids: 2,048 in 26 us
// against the radix sort's 37; 8,192 in 340 us against 97); the sanitizer build lowers it so
// that the C tests' small tables take the radix path too.
#ifndef CT_RADIX_MIN
#define CT_RADIX_MIN 4096
#endif

// Sorts v ascending by key(x) (an int64, signed order), keeping the order of equal keys.
template <class T, class Key>
void sort_by_key(std::vector<T> &v, Key key) {
  const size_t n = v.size();
  if (n < CT_RADIX_MIN) {
    std::stable_sort(v.begin(), v.end(), [&](const T &a, const T &b) { return key(a) < key(b); });
    return;
  }
  constexpr int kBits = 8, kPasses = 8;
  constexpr size_t kBuckets = size_t{1} << kBits;
  // digit d of the key with its sign bit flipped, so that unsigned digit order is signed order
  auto digit = [&](const T &x, int d) {
    const uint64_t u = static_cast<uint64_t>(key(x)) ^ (uint64_t{1} << 63);
    return static_cast<size_t>((u >> (kBits * d)) & (kBuckets - 1));
  };
  std::vector<std::array<size_t, kBuckets>> count(kPasses);
  for (auto &c : count) c.fill(0);
  for (const T &x : v) {
    for (int d = 0; d < kPasses; d++) count[static_cast<size_t>(d)][digit(x, d)]++;
  }
  std::vector<T> tmp(n);
  std::vector<T> *from = &v, *to = &tmp;
  for (int d = 0; d < kPasses; d++) {
    auto &c = count[static_cast<size_t>(d)];
    if (c[digit((*from)[0], d)] == n) continue;  // one digit for every key: the order stands
    size_t sum = 0;
    for (size_t &b : c) {  // counts -> where each bucket starts
      const size_t k = b;
      b = sum;
      sum += k;
    }
    for (const T &x : *from) (*to)[c[digit(x, d)]++] = x;
    std::swap(from, to);
  }
  if (from != &v) v.swap(tmp);
}

// Pairs by their first member.
inline void sort_by_first(std::vector<std::pair<int64_t, int64_t>> &v) {
  sort_by_key(v, [](const std::pair<int64_t, int64_t> &x) { return x.first; });
}

// Calls f(row index, id) for every id of a map: with by_index in row-index order (sequential
// reads of the blocks), else in no particular order. Indices are unique and below the high water
// mark, so while at most half of those are free the map places each id at its index (9 bytes per
// index: the id and a live flag) and the walk replaces a sort (10M ids: one pass, not 23); a
// sparser map sorts its (index, id) pairs, or, without by_index, gives them in its own order.
template <class F>
void each_row_in(const ct_idmap *map, bool by_index, F f) {
  const size_t m = ct_idmap_size(map);
  const size_t hw = static_cast<size_t>(ct_idmap_high_water(map));
  if (hw / 2 > m) {
    std::vector<int64_t> ids(m), idx(m);
    ct_idmap_export(map, ids.data(), idx.data(), m);
    if (!by_index) {
      for (size_t i = 0; i < m; i++) f(idx[i], ids[i]);
      return;
    }
    std::vector<std::pair<int64_t, int64_t>> p(m);
    for (size_t i = 0; i < m; i++) p[i] = {idx[i], ids[i]};
    std::vector<int64_t>().swap(ids);
    std::vector<int64_t>().swap(idx);
    sort_by_first(p);
    for (const auto &x : p) f(x.first, x.second);
    return;
  }
  std::vector<int64_t> id_at(hw);
  std::vector<uint8_t> live(hw, 0);
  ct_idmap_export_by_index(map, id_at.data(), live.data(), hw);
  for (size_t r = 0; r < hw; r++) {
    if (live[r]) f(static_cast<int64_t>(r), id_at[r]);
  }
}

// Every (row index, id) of a map in row-index order.
template <class F>
void each_row_by_index(const ct_idmap *map, F f) {
  each_row_in(map, true, f);
}

// Every (row index, id) of a map, in no particular order (no sort).
template <class F>
void each_row(const ct_idmap *map, F f) {
  each_row_in(map, false, f);
}

}  // namespace table
}  // namespace ct
