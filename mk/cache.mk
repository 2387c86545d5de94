# mk/cache.mk - the tensor allocator's buffer cache (cgotorch/csrc/tensor/allocator.cc.h) from
# many threads: cgotorch/ctest/cache_stress.c, tensors made on one thread and freed on another,
# exiting threads, releases. Each run twice: with the cache and with GOREC_TENSOR_CACHE=0.
#   make cache-sanitize   under AddressSanitizer (LeakSanitizer included) and UBSan
#   make cache-tsan       under ThreadSanitizer (mk/tsan.mk's build)
# `make sanitize` (and so `make test`) runs both.
.PHONY: cache-sanitize cache-tsan

$(BUILD)/san/cache_stress.o: cgotorch/ctest/cache_stress.c cgotorch/ctest/check.h cgotorch/cgotorch.h | $(BUILD)/san
	$(CC) -std=c11 -Wall -Wextra -Werror $(SAN) -Icgotorch -c $< -o $@
$(BUILD)/san/cache_stress: $(BUILD)/san/cache_stress.o $(SAN_OBJS)
	$(CXX) $(SAN) $(OMP) $^ -o $@ $(TORCH_LIB) -ltorch_cpu -lc10

cache-sanitize: deps san-objs $(BUILD)/san/cache_stress
	$(BUILD)/san/cache_stress
	GOREC_TENSOR_CACHE=0 $(BUILD)/san/cache_stress

cache-tsan: deps $(BUILD)/tsan/cache_stress
	$(TSAN_RUN) $(BUILD)/tsan/cache_stress
	GOREC_TENSOR_CACHE=0 $(TSAN_RUN) $(BUILD)/tsan/cache_stress

sanitize: cache-sanitize cache-tsan
