# mk/tsan.mk - cgotorch's C++ under ThreadSanitizer: Go's race detector does not see the memory
# of the C side (handle and byte counters, scopes, the tables' locks and bookkeeping), so C
# programs drive the C ABI from many threads against cgotorch's sources built with
# -fsanitize=thread in build/tsan/. libtorch itself is not instrumented: the programs keep it on
# one intra-op thread, and cgotorch/ctest/tsan.supp names the reports from inside libtorch that
# its invisible synchronisation causes. They run without address-space randomisation where the
# system allows it (ThreadSanitizer cannot map its shadow memory under some kernels').
#   make table-tsan    cgotorch/ctest/table_stress.c: every table operation from six threads at
#                      once, then Close under them (also run under ASan by make table-sanitize)
#   make tensor-tsan   cgotorch/ctest/tensor_stress.c: tensors, scopes and backward passes into
#                      one shared weight from six threads
# `make sanitize` (and so `make test`) runs both.
.PHONY: table-tsan tensor-tsan
TSAN := -fsanitize=thread -fno-omit-frame-pointer -g -O1
TSAN_OBJS := $(SAN_OBJS:$(BUILD)/san/%=$(BUILD)/tsan/%)
.PRECIOUS: $(BUILD)/tsan/%_stress.o $(TSAN_OBJS)
TSAN_RUN := TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=cgotorch/ctest/tsan.supp \
  $(shell setarch $$(uname -m) -R true 2>/dev/null && echo setarch $$(uname -m) -R)

$(BUILD)/tsan:
	mkdir -p $@
$(BUILD)/tsan/%.o: cgotorch/%.cc $(CT_HEADERS) | $(BUILD)/tsan
	$(CXX) $(CXXSTD) $(TSAN) $(OMP) $(TORCH_INC) -Wall -c $< -o $@
$(BUILD)/tsan/%.o: cgotorch/%.c $(CT_HEADERS) | $(BUILD)/tsan
	$(CC) -std=c11 $(TSAN) -Wall -c $< -o $@
$(BUILD)/tsan/%_stress.o: cgotorch/ctest/%_stress.c cgotorch/ctest/check.h cgotorch/cgotorch.h | $(BUILD)/tsan
	$(CC) -std=c11 -Wall -Wextra -Werror $(TSAN) -Icgotorch -c $< -o $@
$(BUILD)/tsan/%_stress: $(BUILD)/tsan/%_stress.o $(TSAN_OBJS)
	$(CXX) $(TSAN) $(OMP) $^ -o $@ $(TORCH_LIB) -ltorch_cpu -lc10

table-tsan: deps $(BUILD)/tsan/table_stress
	$(TSAN_RUN) $(BUILD)/tsan/table_stress

tensor-tsan: deps $(BUILD)/tsan/tensor_stress
	$(TSAN_RUN) $(BUILD)/tsan/tensor_stress

sanitize: table-tsan tensor-tsan
