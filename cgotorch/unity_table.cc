// unity_table.cc: one translation unit for the embedding tables (csrc/table/; see
// unity_tensor.cc for why the sources are compiled through unity units). csrc/table/table.cc.h
// lists what each file holds.
#include "csrc/table/table.cc.h"
#include "csrc/table/sort.cc.h"
#include "csrc/table/storage.cc.h"
#include "csrc/table/gather.cc.h"
#include "csrc/table/ops.cc.h"
#include "csrc/table/gradients.cc.h"
#include "csrc/table/prefetch.cc.h"
#include "csrc/table/capi.cc.h"
#include "csrc/table/lifecycle.cc.h"  // after table.cc.h: needs the definition of class Table
#include "csrc/table/check.cc.h"
#include "csrc/table/lr.cc.h"
#include "csrc/table/autograd.cc.h"
#include "csrc/table/batch.cc.h"
#include "csrc/table/math.cc.h"
