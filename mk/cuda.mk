# ---- CUDA test binaries: `make cuda-test-bins` -------------------------------------------------
# CI has no GPU; the tests of the CUDA paths skip without one (TestCUDATable,
# TestConcurrentOperations/cuda, TestCUDARoundTrip, ...). To run them on a GPU machine that has
# PyTorch but no Go, build the test binaries here against the libtorch (with CUDA) of the same
# PyTorch version as that machine's (TORCH_CUDA_VERSION: the C++ ABI must match), copy
# build/cuda/ there with the source tree (tests read their testdata/), and run, e.g.:
#   export LD_LIBRARY_PATH=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')/lib:$PWD/build/cuda
#   cd embedding && ../build/cuda/embedding.test -test.v -test.run 'CUDA|Concurrent'
# The CUDA libraries the wheel's libtorch_cuda needs are that machine's: linking here allows
# them to be missing. cgotorch is built with -fopenmp (flags.go): this machine's libgomp.so.1
# goes into build/cuda/ too, for a machine without GCC's runtime.
.PHONY: cuda-test-bins
TORCH_CUDA_VERSION ?= 2.15.0
TORCH_CUDA_PY ?= 3.12
TORCH_CUDA_DIR := $(BUILD)/torch-$(TORCH_CUDA_VERSION)
TORCH_CUDA_LT := $(abspath $(TORCH_CUDA_DIR))/torch

cuda-test-bins: deps
	@if [ ! -f $(TORCH_CUDA_LT)/lib/libtorch_cuda.so ]; then \
	  mkdir -p $(TORCH_CUDA_DIR) && $(PIP) download -q --no-deps --only-binary=:all: \
	    --python-version $(TORCH_CUDA_PY) --implementation cp --platform manylinux_2_28_x86_64 \
	    -d $(TORCH_CUDA_DIR) torch==$(TORCH_CUDA_VERSION) && \
	  cd $(TORCH_CUDA_DIR) && unzip -q -o 'torch-*.whl' 'torch/include/*' 'torch/lib/*'; fi
	mkdir -p $(BUILD)/cuda
	export CGO_CXXFLAGS="-I$(TORCH_CUDA_LT)/include -I$(TORCH_CUDA_LT)/include/torch/csrc/api/include -D_GLIBCXX_USE_CXX11_ABI=1" \
	  CGO_LDFLAGS="-L$(TORCH_CUDA_LT)/lib -Wl,--no-as-needed -ltorch_cuda -lc10_cuda -Wl,--as-needed -Wl,--allow-shlib-undefined"; \
	for p in cgotorch internal/ctable embedding nn; do \
	  $(GO) test -c -ldflags='-s -w' -o $(BUILD)/cuda/$$(basename $$p).test ./$$p || exit 1; done; \
	$(GO) test -race -c -ldflags='-s -w' -o $(BUILD)/cuda/embedding_race.test ./embedding
	cp -L "$$($(CXX) -print-file-name=libgomp.so.1)" $(BUILD)/cuda/
