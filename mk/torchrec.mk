# mk/torchrec.mk - the TorchRec reference of issue 34, outside CI (`make test` and `make bench`
# never run it): it downloads about 2.6 GB.
#   make torchrec-venv   build/torchrec-venv: torch 2.14.1 from PyPI with the CUDA runtime wheels
#                        its libraries link against (the wheel's Requires-Dist; no GPU is needed
#                        to load them), fbgemm-gpu-cpu 1.9.0 and torchrec 1.9.2
#   make torchrec-ref    times nn/bench_test.go's BenchmarkCTRStep model with TorchRec's
#                        FusedEmbeddingBagCollection (scripts/bench_torchrec_ctr.py) at
#                        TORCHREC_THREADS (default "1 2"), one `BENCH torchrec_CTRStep` line each
# torchrec asks for the CUDA package fbgemm-gpu; it is installed with --no-deps and its own
# pure-Python requirements are named here instead, so that only fbgemm-gpu-cpu is present.
# The torchrec 1.9.2 wheel is built for Python 3.11 (py311-none-any): TORCHREC_PYTHON must be 3.11.
# On a loaded machine, libgomp's default spin-wait can make TorchRec's 2-thread steps collapse
# (docs/performance.md): `make torchrec-ref OMP_WAIT_POLICY=PASSIVE` times it without the spinning.
.PHONY: torchrec-venv torchrec-ref
TORCHREC_PYTHON ?= python3.11
TORCHREC_VENV := $(BUILD)/torchrec-venv
TORCHREC_THREADS ?= 1 2
TORCHREC_PKGS := torch==2.14.1 fbgemm-gpu-cpu==1.9.0 tensordict torchmetrics==1.0.3 tqdm pyre-extensions

$(TORCHREC_VENV)/.installed:
	$(TORCHREC_PYTHON) -m venv $(TORCHREC_VENV)
	$(TORCHREC_VENV)/bin/pip install -q $(TORCHREC_PKGS)
	$(TORCHREC_VENV)/bin/pip install -q --no-deps torchrec==1.9.2
	$(TORCHREC_VENV)/bin/python -c 'import torch, fbgemm_gpu, torchrec; print("torch", torch.__version__, "torchrec", torchrec.__version__)'
	touch $@

torchrec-venv: $(TORCHREC_VENV)/.installed

torchrec-ref: torchrec-venv
	for t in $(TORCHREC_THREADS); do \
	  OMP_NUM_THREADS=$$t PYTHONDONTWRITEBYTECODE=1 $(TORCHREC_VENV)/bin/python scripts/bench_torchrec_ctr.py --threads $$t; done
