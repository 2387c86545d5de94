# Table lifecycle: the checkpoint loader's fuzz targets (embedding/checkpoint_fuzz_test.go) and the
# safetensors header reader's (internal/safetensors), run
# for a bounded time by `make test`; a longer run on demand: `make fuzz-checkpoint FUZZTIME=10m`.
# The seed corpus is embedding/testdata/fuzz (plain `go test` runs the seeds).
.PHONY: fuzz-checkpoint
FUZZTIME ?= 20s

fuzz-checkpoint: deps
	$(GO) test ./embedding -run '^$$' -fuzz '^FuzzLoadTable$$' -fuzztime $(FUZZTIME)
	$(GO) test ./embedding -run '^$$' -fuzz '^FuzzManifest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/safetensors -run '^$$' -fuzz '^FuzzReadHeader$$' -fuzztime $(FUZZTIME)

test: fuzz-checkpoint
