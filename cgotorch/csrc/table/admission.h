// admission.h: the state of admission (admission.cc.h), owned by class Table as adm_: the
// threshold and the sighting counts of ids that have no row yet. Guarded by the table's lock
// (changes: held exclusively).
#ifndef CGOTORCH_TABLE_ADMISSION_H
#define CGOTORCH_TABLE_ADMISSION_H

#include <cstdint>
#include <unordered_map>
#include <unordered_set>

namespace ct {
namespace table {

struct Admission {
  int64_t after = 0;  // an id gets a row at this training lookup (0 or 1: admission off)
  std::unordered_map<int64_t, int64_t> seen;  // the counts of ids without a row, each >= 1
  // While deltas are tracked (tracked: RowMeta::tracked()), the ids whose count changed since
  // the last mark; all_changed when one could not be recorded (out of memory for the set): the
  // next delta carries every count instead.
  std::unordered_set<int64_t> changed;
  bool all_changed = false;

  // Every change of a count goes through these, so that deltas see it.
  void count_changed(int64_t id, bool tracked) noexcept {
    if (!tracked || all_changed) return;
    try {
      changed.insert(id);
    } catch (...) {
      all_changed = true;
    }
  }
  void forget(bool tracked) noexcept {
    if (tracked && !seen.empty()) all_changed = true;
    seen.clear();
  }
};

}  // namespace table
}  // namespace ct

#endif
