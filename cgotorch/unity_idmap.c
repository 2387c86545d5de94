/* unity_idmap.c: the translation unit of the id map (csrc/idmap/; see unity_tensor.cc for why
 * the sources are compiled through unity units). unity_idmap_v3.c compiles the same source a
 * second time for x86-64-v3. */
#include "csrc/idmap/idmap.c.h"
