/* unity_idmap_v3.c - the id map's batched operations (find, find_or_insert, erase, reserve)
 * built for x86-64-v3: csrc/idmap/idmap.c.h compiled a second time under a target pragma, its
 * entry points named ct_idmap_v3_*. The map's public functions (built by unity_idmap.c) call
 * them on CPUs that have x86-64-v3 (see csrc/idmap/isa.h). The same source, so the same
 * results: only the instructions differ (VEX encoding, BMI, SSE4.1's one-instruction 64-bit
 * compares), and on this kind of code that is what bounds the speed. */
#include "csrc/idmap/isa.h"

#ifdef CT_IDMAP_DISPATCH
#pragma GCC target("arch=x86-64-v3")
#define CT_IDMAP_V3 1
#include "csrc/idmap/idmap.c.h"
#else
typedef int ct_idmap_v3_unused; /* nothing to build: ISO C wants a declaration */
#endif
