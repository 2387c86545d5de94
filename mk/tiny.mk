# mk/tiny.mk - the floor of nn's BenchmarkTinyStep: the same step of the same tiny model through
# cgotorch's C ABI in a C loop, with no Go (cgotorch/ctest/tiny_bench.c), built against the
# objects of `make table-bench` (build/opt/: compiled as cgo compiles them). `make tiny-bench`
# prints its BENCH lines (scripts/bench.sh collects every *-bench target).
.PHONY: tiny-bench
$(BUILD)/opt/tiny_bench.o: cgotorch/ctest/tiny_bench.c cgotorch/cgotorch.h | $(BUILD)/opt
	$(CC) -O2 -std=gnu11 -Wall -Wextra -Werror -Icgotorch -c $< -o $@
$(BUILD)/opt/tiny_bench: $(BUILD)/opt/tiny_bench.o $(OPT_OBJS)
	$(CXX) $(OMP) $^ -o $@ $(TORCH_LIB) -ltorch_cpu -lc10 -lm

tiny-bench: deps $(BUILD)/opt/tiny_bench
	$(BUILD)/opt/tiny_bench
