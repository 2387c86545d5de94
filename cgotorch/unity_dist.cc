// unity_dist.cc: one translation unit for the process groups (torch.distributed's c10d over
// Gloo; see unity_tensor.cc for why the C++ sources are compiled through unity units). Its own
// unit: c10d's and Gloo's headers are parsed here only, in parallel with the other units (csrc/dist/).
#include "csrc/dist/group.cc.h"
#include "csrc/dist/collectives.cc.h"
