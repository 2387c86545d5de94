# Table lifecycle: the checkpoint loader's fuzz targets (embedding/checkpoint_fuzz_test.go), the
# safetensors header reader's (internal/safetensors) and the optimizer state loader's (nn), run for a bounded number of inputs by
# `make test` (300,000 each: 10-20 s apiece here); a longer run on demand: `make fuzz-checkpoint
# FUZZTIME=10m`. A count, not a duration, by default: with a duration, Go's fuzz coordinator can
# fail a target with a bare "context deadline exceeded" at the deadline, having found nothing
# (golang/go#75804, a race fixed in Go 1.27; CI met it with go1.26.8 on FuzzManifest).
# The seed corpus is embedding/testdata/fuzz (plain `go test` runs the seeds).
.PHONY: fuzz-checkpoint
FUZZTIME ?= 300000x
# FuzzManifestFlip loads a whole checkpoint per input (about a millisecond): fewer of them.
FUZZFLIPTIME ?= 20000x

fuzz-checkpoint: deps
	$(GO) test ./embedding -run '^$$' -fuzz '^FuzzLoadTable$$' -fuzztime $(FUZZTIME)
	$(GO) test ./embedding -run '^$$' -fuzz '^FuzzManifest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./embedding -run '^$$' -fuzz '^FuzzManifestFlip$$' -fuzztime $(FUZZFLIPTIME)
	$(GO) test ./internal/safetensors -run '^$$' -fuzz '^FuzzReadHeader$$' -fuzztime $(FUZZTIME)
	$(GO) test ./nn -run '^$$' -fuzz '^FuzzOptimizerLoadState$$' -fuzztime $(FUZZTIME)

test: fuzz-checkpoint
