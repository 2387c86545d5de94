// unity_table.cc: one translation unit for the embedding tables (see unity_tensor.cc for why
// the C++ sources are compiled through two such units). table.hxx lists what each file holds.
#include "table.hxx"
#include "table_sort.hxx"
#include "table_storage.hxx"
#include "table_gather.hxx"
#include "table_ops.hxx"
#include "table_gradients.hxx"
#include "table_prefetch.hxx"
#include "table_capi.hxx"
#include "table_lifecycle.hxx"  // after table.hxx: needs the definition of class Table
#include "table_check.hxx"
#include "table_lr.hxx"
#include "table_autograd.hxx"
#include "table_bags.hxx"  // after table_autograd.hxx
#include "table_batch.hxx"
#include "table_math.hxx"
#include "table_seed.hxx"
#include "table_read_state.hxx"
