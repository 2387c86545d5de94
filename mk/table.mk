# Embedding tables: the C-level table test (cgotorch/ctest/table_test.c) under AddressSanitizer and
# UndefinedBehaviorSanitizer, built like abi_test. `make table-sanitize`; `make sanitize` runs it too.
.PHONY: table-sanitize

# The test hooks (CT_TEST_HOOKS: ct_test_evict_between_phases) exist in this build only; every
# sort of ids takes the radix path (CT_RADIX_MIN=2), whatever the tests' sizes.
$(BUILD)/san/unity_table.o: SAN += -DCT_TEST_HOOKS -DCT_RADIX_MIN=2
$(BUILD)/san/table_test.o: cgotorch/ctest/table_test.c cgotorch/ctest/check.h cgotorch/cgotorch.h | $(BUILD)/san
	$(CC) -std=c99 -pedantic -Wall -Wextra -Werror $(SAN) -Icgotorch -c $< -o $@
$(BUILD)/san/table_test: $(BUILD)/san/table_test.o $(SAN_OBJS)
	$(CXX) $(SAN) $(OMP) $^ -o $@ $(TORCH_LIB) -ltorch_cpu -lc10

$(BUILD)/san/table_stress.o: cgotorch/ctest/table_stress.c cgotorch/ctest/check.h cgotorch/cgotorch.h | $(BUILD)/san
	$(CC) -std=c11 -Wall -Wextra -Werror $(SAN) -Icgotorch -c $< -o $@
$(BUILD)/san/table_stress: $(BUILD)/san/table_stress.o $(SAN_OBJS)
	$(CXX) $(SAN) $(OMP) $^ -o $@ $(TORCH_LIB) -ltorch_cpu -lc10

table-sanitize: deps $(BUILD)/san/table_test $(BUILD)/san/table_stress
	$(BUILD)/san/table_test
	$(BUILD)/san/table_stress

sanitize: table-sanitize

# ---- table benchmark: `make table-bench` ------------------------------------------------------
# cgotorch's sources built as cgo builds them (C++ -O2, C -O3; see cgotorch/flags.go), without
# sanitizers, in build/opt/, linked with the C benchmark program cgotorch/ctest/table_bench.c.
# It prints `BENCH` lines (scripts/bench.sh collects every *-bench target). TABLE_BENCH_ARGS
# passes options to the program (e.g. "-n 262144 -reps 3" for a quick run).
.PHONY: table-bench
OPT_OBJS := $(CT_CC_SRCS:cgotorch/%.cc=$(BUILD)/opt/%.o) $(CT_C_SRCS:cgotorch/%.c=$(BUILD)/opt/%.o)
TABLE_BENCH_ARGS ?=

$(BUILD)/opt:
	mkdir -p $@
$(BUILD)/opt/%.o: cgotorch/%.cc $(CT_HEADERS) | $(BUILD)/opt
	$(CXX) $(CXXSTD) -O2 $(OMP) $(TORCH_INC) -Wall -Wno-unused-parameter -c $< -o $@
$(BUILD)/opt/%.o: cgotorch/%.c $(CT_HEADERS) | $(BUILD)/opt
	$(CC) -O3 -std=gnu11 -Wall -c $< -o $@
$(BUILD)/opt/table_bench.o: cgotorch/ctest/table_bench.c cgotorch/cgotorch.h | $(BUILD)/opt
	$(CC) -O2 -std=gnu11 -Wall -Wextra -Werror -Icgotorch -c $< -o $@
$(BUILD)/opt/table_bench: $(BUILD)/opt/table_bench.o $(OPT_OBJS)
	$(CXX) $(OMP) $^ -o $@ $(TORCH_LIB) -ltorch_cpu -lc10 -lm

table-bench: deps $(BUILD)/opt/table_bench
	$(BUILD)/opt/table_bench $(TABLE_BENCH_ARGS)
