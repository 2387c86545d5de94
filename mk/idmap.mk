# mk/idmap.mk - C unit tests and benchmark of the id map (cgotorch/csrc/idmap/, compiled through
# cgotorch/unity_idmap.c and unity_idmap_v3.c).
# Included from the top-level Makefile; paths are relative to the repo root; outputs in build/.
#   make idmap-test    C tests under ASan + UBSan, three builds: default; small segments
#                      (1024 slots: many splits and directory doublings) with SSE4.1 line
#                      scans; portable scalar scans with tiny prefetch distance and chunks
#   make idmap-bench   C++ benchmark against absl::flat_hash_map and std::unordered_map
CC ?= gcc
CXX ?= g++
# make's built-in default for CC is cc; use gcc then, without changing CC for other rules
IDMAP_CC := $(if $(filter default,$(origin CC)),gcc,$(CC))
IDMAP_CXX := $(if $(filter default,$(origin CXX)),g++,$(CXX))
IDMAP_DIR := cgotorch
IDMAP_BUILD := build/idmap
IDMAP_C := $(IDMAP_DIR)/unity_idmap.c $(IDMAP_DIR)/unity_idmap_v3.c
IDMAP_SRC := $(IDMAP_C) $(wildcard $(IDMAP_DIR)/csrc/idmap/*.h)
IDMAP_TEST_SRC := $(IDMAP_DIR)/ctest/idmap_test.c
IDMAP_SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
IDMAP_TEST_CFLAGS := -std=c11 -O1 -g $(IDMAP_SAN) -Wall -Wextra -Werror
IDMAP_TEST_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The benchmark builds the id map as cgo builds it (cgotorch/flags.go: -O3 for the CPU baseline;
# its x86-64-v3 build is chosen at run time, see csrc/idmap/isa.h) and the program, with the maps of
# absl and of the standard library inlined into it, for the host CPU: the best each can do here.
IDMAP_BENCH_OPT ?= -O3
IDMAP_BENCH_HOST_OPT ?= -O3 -march=native
IDMAP_ABSL_LIBS = $(shell pkg-config --libs absl_flat_hash_map absl_hash)

.PHONY: idmap-test idmap-bench

$(IDMAP_BUILD)/idmap_test: $(IDMAP_SRC) $(IDMAP_TEST_SRC)
	@mkdir -p $(IDMAP_BUILD)
	$(IDMAP_CC) $(IDMAP_TEST_CFLAGS) -o $@ $(IDMAP_TEST_SRC) $(IDMAP_C)

$(IDMAP_BUILD)/idmap_test_smallseg: $(IDMAP_SRC) $(IDMAP_TEST_SRC)
	@mkdir -p $(IDMAP_BUILD)
	$(IDMAP_CC) $(IDMAP_TEST_CFLAGS) -msse4.1 -DCT_IDMAP_SEG_MAX_LOG=10 -o $@ $(IDMAP_TEST_SRC) $(IDMAP_C)

$(IDMAP_BUILD)/idmap_test_scalar: $(IDMAP_SRC) $(IDMAP_TEST_SRC)
	@mkdir -p $(IDMAP_BUILD)
	$(IDMAP_CC) $(IDMAP_TEST_CFLAGS) -DCT_IDMAP_NO_SIMD -DCT_IDMAP_PF=2 -DCT_IDMAP_CHUNK=7 \
		-DCT_IDMAP_SEG_MAX_LOG=12 -o $@ $(IDMAP_TEST_SRC) $(IDMAP_C)

idmap-test: $(IDMAP_BUILD)/idmap_test $(IDMAP_BUILD)/idmap_test_smallseg $(IDMAP_BUILD)/idmap_test_scalar
	$(IDMAP_TEST_ENV) $(IDMAP_BUILD)/idmap_test
	$(IDMAP_TEST_ENV) $(IDMAP_BUILD)/idmap_test_smallseg
	$(IDMAP_TEST_ENV) $(IDMAP_BUILD)/idmap_test_scalar

$(IDMAP_BUILD)/%.bench.o: $(IDMAP_DIR)/%.c $(IDMAP_SRC)
	@mkdir -p $(IDMAP_BUILD)
	$(IDMAP_CC) -std=gnu11 $(IDMAP_BENCH_OPT) -DNDEBUG -Wall -Wextra -c -o $@ $<

IDMAP_BENCH_OBJS := $(IDMAP_BUILD)/unity_idmap.bench.o $(IDMAP_BUILD)/unity_idmap_v3.bench.o
$(IDMAP_BUILD)/idmap_bench: $(IDMAP_BENCH_OBJS) $(IDMAP_DIR)/ctest/idmap_bench.cc $(IDMAP_DIR)/csrc/idmap/idmap.h
	$(IDMAP_CXX) $(CXXSTD) $(IDMAP_BENCH_HOST_OPT) -DNDEBUG -Wall -o $@ $(IDMAP_DIR)/ctest/idmap_bench.cc \
		$(IDMAP_BENCH_OBJS) $(IDMAP_ABSL_LIBS)

idmap-bench: $(IDMAP_BUILD)/idmap_bench
	$(IDMAP_BUILD)/idmap_bench

# `make sanitize` (and so `make test`) runs the id map's C tests too.
sanitize: idmap-test
