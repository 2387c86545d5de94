# ---- CUDA test binaries: `make cuda-test-bins` -------------------------------------------------
# CI has no GPU; the tests of the CUDA paths skip without one (TestCUDATable,
# TestConcurrentOperations/cuda, TestCUDARoundTrip, TestNCCL*, ...). To run them on a GPU machine
# that has PyTorch but no Go, build the test binaries here against the libtorch (with CUDA) of
# the same PyTorch version as that machine's (TORCH_CUDA_VERSION: the C++ ABI must match), copy
# build/cuda/ there with the source tree (tests read their testdata/), and run
# scripts/device_check.sh, or by hand, e.g.:
#   export LD_LIBRARY_PATH=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')/lib:$PWD/build/cuda
#   cd embedding && ../build/cuda/embedding.test -test.v -test.run 'CUDA|Concurrent'
# The CUDA libraries the wheel's libtorch_cuda needs are that machine's: linking here allows
# them to be missing. cgotorch is built with -fopenmp (flags.go): this machine's libgomp.so.1
# goes into build/cuda/ too, for a machine without GCC's runtime.
#
# The binaries are built with the gorec_nccl tag (cgotorch/flags_nccl.go): dist's NCCL backend.
# c10d's ProcessGroupNCCL.hpp needs the CUDA runtime's and NCCL's headers, which come from the
# NVIDIA wheels of the versions in torch's METADATA (TORCH_CUDA_HEADERS, headers only), and
# declares cuBLAS, cuSPARSE and cuSOLVER handles and statuses that nothing here calls: their
# opaque types are declared in a few stub headers (build/torch-*/cuda-headers/stub) rather than
# downloading those libraries. The header wheels stay in their own folder: test-libtorch2 takes
# the libraries of every NVIDIA wheel beside torch's.
.PHONY: cuda-test-bins
TORCH_CUDA_VERSION ?= 2.11.0
TORCH_CUDA_PY ?= 3.12
TORCH_CUDA_HEADERS ?= nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85 \
  nvidia-nccl-cu13==2.28.9
# The packages whose test binaries are built (build/cuda/<path with _ for />.test).
CUDA_TEST_PKGS ?= cgotorch internal/ctable embedding nn dist
TORCH_CUDA_DIR := $(BUILD)/torch-$(TORCH_CUDA_VERSION)
TORCH_CUDA_ROOT := $(abspath $(TORCH_CUDA_DIR))
TORCH_CUDA_LT := $(TORCH_CUDA_ROOT)/torch
TORCH_CUDA_HDR := $(TORCH_CUDA_DIR)/cuda-headers
TORCH_CUDA_PIP := $(PIP) download -q --no-deps --only-binary=:all: --python-version $(TORCH_CUDA_PY) \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_18_x86_64 \
  --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64
TORCH_CUDA_INC := -I$(TORCH_CUDA_LT)/include -I$(TORCH_CUDA_LT)/include/torch/csrc/api/include \
  $(foreach d,nvidia/cu13/include nvidia/nccl/include stub,-I$(abspath $(TORCH_CUDA_HDR))/$(d))
# The stubs: one line per header, "file: declarations".
define CUDA_STUBS
cublas_v2.h: typedef struct cublasContext *cublasHandle_t; typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;
cublasLt.h: typedef struct cublasLtContext *cublasLtHandle_t;
cusparse.h: typedef struct cusparseContext *cusparseHandle_t; typedef enum { CUSPARSE_STATUS_SUCCESS = 0 } cusparseStatus_t;
cusolverDn.h: typedef struct cusolverDnContext *cusolverDnHandle_t;
cusolver_common.h: typedef enum { CUSOLVER_STATUS_SUCCESS = 0 } cusolverStatus_t;
endef
export CUDA_STUBS

cuda-test-bins: deps
	@mkdir -p $(TORCH_CUDA_DIR)
	@if [ ! -f $(TORCH_CUDA_LT)/lib/libtorch_cuda.so ]; then \
	  ls $(TORCH_CUDA_DIR)/torch-$(TORCH_CUDA_VERSION)-*.whl >/dev/null 2>&1 || \
	    $(TORCH_CUDA_PIP) -d $(TORCH_CUDA_DIR) torch==$(TORCH_CUDA_VERSION); \
	  cd $(TORCH_CUDA_DIR) && unzip -q -o 'torch-*.whl' 'torch/include/*' 'torch/lib/*'; fi
	@if [ ! -f $(TORCH_CUDA_HDR)/.done ]; then \
	  $(TORCH_CUDA_PIP) -d $(TORCH_CUDA_HDR) $(TORCH_CUDA_HEADERS) && cd $(TORCH_CUDA_HDR) && \
	  for w in nvidia_*.whl; do unzip -q -o $$w 'nvidia/*/include/*'; done && touch .done; fi
	@mkdir -p $(TORCH_CUDA_HDR)/stub && echo "$$CUDA_STUBS" | while IFS=: read -r f decl; do \
	  printf '#pragma once\n%s\n' "$$decl" > $(TORCH_CUDA_HDR)/stub/$$f; done
	mkdir -p $(BUILD)/cuda
	export CGO_CXXFLAGS="$(TORCH_CUDA_INC) -D_GLIBCXX_USE_CXX11_ABI=1" \
	  CGO_LDFLAGS="-L$(TORCH_CUDA_LT)/lib -Wl,--no-as-needed -ltorch_cuda -lc10_cuda -Wl,--as-needed -Wl,--allow-shlib-undefined"; \
	for p in $(CUDA_TEST_PKGS); do \
	  $(GO) test -c -tags gorec_nccl -ldflags='-s -w' -o $(BUILD)/cuda/$$(echo $$p | tr / _).test ./$$p || exit 1; done; \
	$(GO) test -race -c -tags gorec_nccl -ldflags='-s -w' -o $(BUILD)/cuda/embedding_race.test ./embedding
	cp -L "$$($(CXX) -print-file-name=libgomp.so.1)" $(BUILD)/cuda/
