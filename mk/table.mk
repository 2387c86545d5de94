# Embedding tables: the C-level table test (cgotorch/ctest/table_test.c) under AddressSanitizer and
# UndefinedBehaviorSanitizer, built like abi_test. `make table-sanitize`; `make sanitize` runs it too.
.PHONY: table-sanitize

$(BUILD)/san/table.o $(BUILD)/san/table_math.o: cgotorch/table_internal.h cgotorch/idmap.h
$(BUILD)/san/table_test.o: cgotorch/ctest/table_test.c cgotorch/cgotorch.h | $(BUILD)/san
	$(CC) -std=c99 -pedantic -Wall -Wextra -Werror $(SAN) -Icgotorch -c $< -o $@
$(BUILD)/san/table_test: $(BUILD)/san/table_test.o $(SAN_OBJS)
	$(CXX) $(SAN) $^ -o $@ $(TORCH_LIB) -ltorch_cpu -lc10

table-sanitize: deps $(BUILD)/san/table_test
	$(BUILD)/san/table_test

sanitize: table-sanitize
