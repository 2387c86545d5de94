// seed.cc.h: the seed of a table created with CT_TABLE_SEED_FROM_NAME (cgotorch.h), so that
// tables of one seed (the default one, say) do not start alike: MovieLens user 42 and movie 42
// get different initial rows. The rule is part of the format (Go and Python share it here).
// Compiled as part of unity_table.cc, after math.cc.h (mix64).

namespace ct {
namespace table {

namespace {
// The 64-bit FNV-1a hash of s's bytes.
uint64_t fnv1a64(const std::string &s) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ULL;
  }
  return h;
}
}  // namespace

ct_table_config seeded(const std::string &name, ct_table_config cfg) {
  if ((cfg.flags & CT_TABLE_SEED_FROM_NAME) == 0) return cfg;
  cfg.flags &= ~CT_TABLE_SEED_FROM_NAME;
  if (!name.empty()) cfg.seed = mix64(cfg.seed ^ fnv1a64(name));
  return cfg;
}

}  // namespace table
}  // namespace ct
