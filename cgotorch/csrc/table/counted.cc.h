// counted.cc.h: lookups that count each key a given number of times (ct_table_lookup_counted):
// a caller that looks up the distinct ids of a batch (a sharded table's owner, sent each rank's
// distinct ids) counts each as often as the batch holds it, in the rows' access frequency and
// the admission counts, as a lookup of the whole batch would. Compiled as part of
// unity_table.cc, after capi.cc.h (keyed).

namespace ct {
namespace table {

// The counts of keys k (an int64 [k.n] tensor, each >= 1), as a host tensor that holds them
// for the call.
at::Tensor check_counts(ct_tensor counts, const Keys &k) {
  Keys c = check_keys(counts, "counts");
  if (c.n != k.n) {
    throw arg_error("counts has " + std::to_string(c.n) + " values for " + std::to_string(k.n) + " keys");
  }
  const int64_t *p = c.ptr();
  for (int64_t i = 0; i < c.n; i++) {
    if (p[i] < 1) throw arg_error("counts must be >= 1, got " + std::to_string(p[i]) + " at " + std::to_string(i));
  }
  return c.host;
}

}  // namespace table
}  // namespace ct

extern "C" {

ct_error ct_table_lookup_counted(ct_tensor *rows, ct_table h, ct_tensor keys, ct_tensor counts) {
  return guard([&] {
    need_out(rows);
    keyed(tbl(h), keys, [&](Table &t, const Keys &k) {
      const at::Tensor c = ct::table::check_counts(counts, k);
      Keys kc = k;
      kc.counts = c.data_ptr<int64_t>();
      *rows = ct::wrap(t.lookup(kc));
    });
  });
}

}  // extern "C"
