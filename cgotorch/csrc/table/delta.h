// delta.h: the state of deltas (delta.cc.h), owned by class Table as deltas_: the ids deleted
// since the last mark and the table's place in its delta chain (ct_table_delta_info). The rows
// changed since the mark are in the per-row metadata (RowMeta, meta.h). Guarded by the table's
// lock (changes: held exclusively).
#ifndef CGOTORCH_TABLE_DELTA_H
#define CGOTORCH_TABLE_DELTA_H

#include <cstdint>
#include <vector>

namespace ct {
namespace table {

struct DeltaLog {
  std::vector<int64_t> deleted;  // ids deleted since the last mark (logged from the first on)
  uint64_t lineage = 0;          // the chain's lineage (0: none yet)
  int64_t seq = 0;               // the last mark in it
};

}  // namespace table
}  // namespace ct

#endif
