# mk/python.mk - the PyTorch side: libgorec_torch.so, cgotorch's C/C++ (the unity translation
# units and the id map, built with -fPIC into build/py/, no Go runtime) plus the op registrations
# of python/csrc/ (TORCH_LIBRARY(gorec, m): torch.ops.gorec.*), and the Python package
# python/gorec, which loads it.
#   make python        build/py/libgorec_torch.so
#   make python-test   pytest python/tests (Debian's python3-pytest, /usr/bin/python3)
# Another libtorch: `make python LIBTORCH=...` as for the Go build (the Makefile's TORCH_INC).
.PHONY: python python-test
# PY_BUILD: another directory for another libtorch (make python LIBTORCH=... PY_BUILD=build/py2).
PY_BUILD ?= $(BUILD)/py
PY_LIB := $(PY_BUILD)/libgorec_torch.so
PY_CSRCS := $(wildcard python/csrc/*.cc)
PY_OBJS := $(CT_CC_SRCS:cgotorch/%.cc=$(PY_BUILD)/%.o) $(CT_C_SRCS:cgotorch/%.c=$(PY_BUILD)/%.o) \
  $(PY_CSRCS:python/csrc/%.cc=$(PY_BUILD)/ops_%.o)
PY_CXXFLAGS := $(CXXSTD) -O2 -fPIC $(OMP) $(TORCH_INC) -Wall -Wno-unused-parameter
APT_PACKAGES += python3-pytest

$(PY_BUILD):
	mkdir -p $@
$(PY_BUILD)/%.o: cgotorch/%.cc $(CT_HEADERS) | $(PY_BUILD)
	$(CXX) $(PY_CXXFLAGS) -c $< -o $@
$(PY_BUILD)/%.o: cgotorch/%.c $(CT_HEADERS) | $(PY_BUILD)
	$(CC) -O3 -std=gnu11 -fPIC -Wall -c $< -o $@
$(PY_BUILD)/ops_%.o: python/csrc/%.cc $(wildcard python/csrc/*.h) $(CT_HEADERS) | $(PY_BUILD)
	$(CXX) $(PY_CXXFLAGS) -Icgotorch -c $< -o $@
$(PY_LIB): $(PY_OBJS)
	$(CXX) -shared $(OMP) $^ -o $@ $(TORCH_LIB) -ltorch_cpu -ltorch -lc10 -lm

python: deps
	@$(MAKE) --no-print-directory -j$(NPROC) $(PY_LIB)

python-test: python
	GOREC_TORCH_LIB=$(abspath $(PY_LIB)) PYTHONPATH=python $(PY) -m pytest -q python/tests

test: python-test

# make python-bench: a lookup, backward and SparseAdam step at batch 4,096 on 1M ids of D = 64
# through torch.ops.gorec, next to nn.Embedding(sparse=True) + torch.optim.SparseAdam in the same
# process (python/bench.py; scripts/bench.sh runs every *-bench target).
.PHONY: python-bench
python-bench: python
	GOREC_TORCH_LIB=$(abspath $(PY_LIB)) $(PY) python/bench.py
