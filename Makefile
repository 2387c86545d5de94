# gorec — build, test and benchmark. `make test` is what CI runs; `make example` runs the MovieLens example.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
PY ?= /usr/bin/python3
PIP ?= python3 -m pip
BUILD := build
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# libopenblas0-openmp: Debian's libtorch calls BLAS through libblas.so.3, which is the reference
# BLAS unless an optimised one is installed (10x slower matmuls); the OpenMP build matches
# libtorch's own OpenMP runtime. libgloo-dev: Gloo's headers, for dist's process groups. strace:
# embedding's crash-replay test records a save's system calls with it.
APT_PACKAGES := libtorch-dev python3-torch libabsl-dev libopenblas0-openmp libgloo-dev strace
# The examples': MovieLens ratings (r-cran-dslabs, read with its Rscript) and the training curve's
# picture; installed without their recommends (R's would pull a compiler toolchain).
APT_EXAMPLE_PACKAGES := r-cran-dslabs gnuplot-nox

# Another libtorch: `make test LIBTORCH=/path/to/libtorch` (a directory with include/ and lib/).
ifdef LIBTORCH
# The C++ ABI of that libtorch: does c10's torchCheckFail take a std::__cxx11::string?
CXX11ABI := $(shell nm -D --defined-only $(LIBTORCH)/lib/libc10.so | grep torchCheckFail | grep -q __cxx11 && echo 1 || echo 0)
export CGO_CXXFLAGS := -O2 -I$(LIBTORCH)/include -I$(LIBTORCH)/include/torch/csrc/api/include -D_GLIBCXX_USE_CXX11_ABI=$(CXX11ABI)
export CGO_LDFLAGS := -L$(LIBTORCH)/lib -Wl,-rpath,$(LIBTORCH)/lib
TORCH_INC := -I$(LIBTORCH)/include -I$(LIBTORCH)/include/torch/csrc/api/include -D_GLIBCXX_USE_CXX11_ABI=$(CXX11ABI)
TORCH_LIB := -L$(LIBTORCH)/lib -Wl,-rpath,$(LIBTORCH)/lib
else
TORCH_INC := -I/usr/include/torch/csrc/api/include
TORCH_LIB :=
endif

.PHONY: all deps build vet test gotest sanitize bench example clean test-libtorch2 gotest-core
all: build

# $(call apt-install,packages,apt-get options) installs those of the packages that are missing.
define apt-install
missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
if [ -n "$$missing" ]; then \
  echo "installing: $$missing"; \
  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(2) $$missing >/dev/null; \
fi
endef

deps:
	@$(call apt-install,$(APT_PACKAGES),)
	@$(call apt-install,$(APT_EXAMPLE_PACKAGES),--no-install-recommends)
	@command -v $(GO) >/dev/null || { echo "Go 1.24 or newer is needed: https://go.dev/dl"; exit 1; }

build: deps
	$(GO) build ./...

vet: deps
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt needed"; exit 1; }

# Everything CI checks: vet, the C-level tests under sanitizers, and the Go tests with -race.
test: deps vet sanitize gotest

gotest:
	$(GO) test -race -count=1 -timeout 20m ./...
	$(GO) test -count=1 -run 'KeepsRSSFlat|StagedReturnsMemory|CompactReturnsMemory' -v ./nn/ ./embedding/ \
	  | grep -E '^(---|ok|FAIL|PASS)|RSS|resident'  # RSS bounds, race detector off

# ---- C ABI test program under AddressSanitizer + UndefinedBehaviorSanitizer -------------------
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -g -O1
# The C++ standard of the C-level builds, the one cgo uses (cgotorch/cxxstd.go): libtorch 2.14 and
# newer need C++20.
CXXSTD ?= -std=c++20
# As cgo builds the C++ (cgotorch/flags.go): ATen's parallel_for is a header template that runs
# in parallel only where the including code is compiled with OpenMP.
OMP := -fopenmp
# The C and C++ are compiled as cgo compiles them: the unity_*.cc and unity_*.c translation
# units, which include the sources of cgotorch/csrc/ (see cgotorch/unity_tensor.cc).
CT_CC_SRCS := $(wildcard cgotorch/*.cc)
CT_HEADERS := $(wildcard cgotorch/*.h cgotorch/csrc/*/*.h)
CT_C_SRCS := $(wildcard cgotorch/*.c)
SAN_OBJS := $(CT_CC_SRCS:cgotorch/%.cc=$(BUILD)/san/%.o) $(CT_C_SRCS:cgotorch/%.c=$(BUILD)/san/%.o)
export ASAN_OPTIONS := detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS := print_stacktrace=1:halt_on_error=1

$(BUILD)/san/%.o: cgotorch/%.cc $(CT_HEADERS) | $(BUILD)/san
	$(CXX) $(CXXSTD) $(SAN) $(OMP) $(TORCH_INC) -Wall -c $< -o $@
$(BUILD)/san/%.o: cgotorch/%.c $(CT_HEADERS) | $(BUILD)/san
	$(CC) -std=c11 $(SAN) -Wall -c $< -o $@
$(BUILD)/san/abi_test.o: cgotorch/ctest/abi_test.c cgotorch/ctest/check.h cgotorch/cgotorch.h | $(BUILD)/san
	$(CC) -std=c99 -pedantic -Wall -Wextra -Werror $(SAN) -Icgotorch -c $< -o $@
$(BUILD)/san/abi_test: $(BUILD)/san/abi_test.o $(SAN_OBJS)
	$(CXX) $(SAN) $(OMP) $^ -o $@ $(TORCH_LIB) -ltorch_cpu -lc10
$(BUILD)/san:
	mkdir -p $@

# The objects are built first, in parallel (the two C++ units take a core each) whatever make's -j.
NPROC := $(shell nproc 2>/dev/null || echo 2)
.PHONY: san-objs
san-objs: | $(BUILD)/san
	@$(MAKE) --no-print-directory -j$(NPROC) $(SAN_OBJS)

sanitize: deps san-objs $(BUILD)/san/abi_test
	$(BUILD)/san/abi_test

-include mk/*.mk

# ---- benchmarks: one `BENCH <name> <value> <unit>` line per figure ----------------------------
bench: deps
	@scripts/bench.sh

# MovieLens matrix factorisation; the data is extracted to data/movielens/ (ignored) on first use.
example: deps
	$(GO) run ./examples/movielens

# ---- the same tests against libtorch 2.x from PyPI's torch wheel (CPU part only) --------------
# PyPI's Linux wheel is the CUDA build: its libtorch_cpu.so also needs libcudart and libcupti
# (for the profiler; no GPU is needed to load them), which come in two small NVIDIA wheels. Their
# libraries are copied next to libtorch's so that the rpath finds them. With the version `make
# cuda-test-bins` builds against (TORCH_CUDA_VERSION, the GPU machine's) they share the download. The CUDA wheels' versions are
# those of the wheel's METADATA (torch 2.15.0: cuda-toolkit 13.2.2, whose cudart and cupti extras
# are 13.2.86). For torch 2.11.0, say TORCH2_VERSION=2.11.0
# TORCH2_CUDA_LIBS="nvidia-cuda-runtime==13.0.96 nvidia-cuda-cupti==13.0.85"; for torch 2.5.1,
# TORCH2_VERSION=2.5.1 TORCH2_PY=3.11
# TORCH2_CUDA_LIBS="nvidia-cuda-runtime-cu12==12.4.127 nvidia-cuda-cupti-cu12==12.4.127".
TORCH2_VERSION ?= 2.15.0
TORCH2_PY ?= 3.12
TORCH2_CUDA_LIBS ?= nvidia-cuda-runtime==13.2.86 nvidia-cuda-cupti==13.2.86
TORCH2_DIR := $(BUILD)/torch-$(TORCH2_VERSION)
test-libtorch2:
	@if [ ! -f $(TORCH2_DIR)/.cpu-libs ]; then \
	  mkdir -p $(TORCH2_DIR) && $(PIP) download -q --no-deps --only-binary=:all: --python-version $(TORCH2_PY) \
	    --platform manylinux1_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_25_x86_64 \
	    --platform manylinux_2_28_x86_64 -d $(TORCH2_DIR) torch==$(TORCH2_VERSION) $(TORCH2_CUDA_LIBS) && \
	  cd $(TORCH2_DIR) && unzip -q -o 'torch-*.whl' 'torch/include/*' 'torch/lib/*' && \
	  for w in nvidia_*.whl; do unzip -q -o -j $$w '*/lib/*.so*' -d torch/lib; done && touch .cpu-libs; fi
	$(MAKE) --no-print-directory LIBTORCH=$(abspath $(TORCH2_DIR))/torch gotest-core

gotest-core:
	$(GO) version && $(GO) test -count=1 -v ./cgotorch/ ./internal/ctable/ ./embedding/ ./nn/ ./dist/ 2>&1 \
	  | tee $(BUILD)/gotest-core.log | grep -E '^(--- FAIL|ok|FAIL|panic)'
	@echo "libtorch: $$(grep -o 'libtorch [0-9.]*' $(BUILD)/gotest-core.log | head -1)"

clean:
	rm -rf $(BUILD)
