#!/usr/bin/env bash
# make bench: runs gorec's benchmarks and their baselines side by side in one run and prints one
# `BENCH <name> <value> <unit>` line per figure, then the ratios. BENCH_THREADS (default 1) sets
# the libtorch thread count of both gorec and PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
threads=${BENCH_THREADS:-1}
export GOREC_BENCH_THREADS=$threads OMP_NUM_THREADS=$threads
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# Go benchmarks: "BenchmarkName-2  N  v1 unit1  v2 unit2 ..." -> BENCH lines.
pkgs=$(go list ./... | grep -v /examples/)
go test -run '^$' -bench . -benchtime "${BENCH_TIME:-1s}" $pkgs \
  | awk '/^Benchmark/ { name = $1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name);
                        for (i = 3; i < NF; i += 2) { u = $(i+1); if (u == "ns/op" || u ~ /\//) print "BENCH", name, $i, u } }' \
  | tee -a "$out"
# The same work in python3-torch.
/usr/bin/python3 scripts/bench_torch.py --threads "$threads" | tee -a "$out"
/usr/bin/python3 scripts/bench_torch_svdpp.py --threads "$threads" | tee -a "$out"
# C-level benchmarks (Makefile fragments define them).
for target in $(make -qp 2>/dev/null | awk -F: '/^[a-z-]*-bench:/ {print $1}' | sort -u); do
  make --no-print-directory -s "$target" | grep '^BENCH' | tee -a "$out" || true
done

# Ratios (baseline time / gorec time, or gorec rate / baseline rate: above 1 means gorec is
# faster), and the overhead of Go over C for a table lookup of 4,096 rows (BenchmarkTableLookupGo
# times both in one process, alternating: the best 32-batch mean of each; target: under 1.2).
awk '$1 == "BENCH" { v[$2] = $3; vu[$2 " " $4] = $3 }
     END {
       if (("MM512" in v) && ("torch_mm512" in v)) printf "BENCH mm512_torch_over_gorec %.2f x\n", v["torch_mm512"] / v["MM512"]
       if (("CTRStep samples/s" in vu) && ("torch_CTRStep samples/s" in vu)) printf "BENCH ctr_step_gorec_over_torch %.2f x\n", vu["CTRStep samples/s"] / vu["torch_CTRStep samples/s"]
       if (("ShardedTable ns/op" in vu) && ("ShardedTable raw-ns/op" in vu)) printf "BENCH sharded_table_over_raw %.2f x\n", vu["ShardedTable ns/op"] / vu["ShardedTable raw-ns/op"]
       if (("CTRTrainRanks/2 samples/s" in vu) && ("CTRTrainRanks/1-local samples/s" in vu)) printf "BENCH ctr_2_ranks_over_1_local %.2f x\n", vu["CTRTrainRanks/2 samples/s"] / vu["CTRTrainRanks/1-local samples/s"]
       # SVD++ (an EmbeddingBag of about 106k ids a batch, one bag per rating) over plain MF, and one EmbeddingBag per table
       # over one EmbeddingBagCollection, per training step (targets: under 3; above 1).
       # The same SVD++ with one bag per distinct user of the batch (the same function), and its
       # floor: the MF step plus only the C-side work of the implicit term (distinct ids, pooling
       # forward and backward, SparseAdam of the distinct ids), each over the MF step; and the
       # hardware floor: the MF step plus the kernels of internal/kernelfloor for that work, on
       # contiguous rows prepared beforehand (pooling forward and backward, SparseAdam).
       if (("MovieLensSVDpp ns/op" in vu) && ("MovieLensMF ns/op" in vu)) printf "BENCH movielens_svdpp_over_mf %.2f x\n", vu["MovieLensSVDpp ns/op"] / vu["MovieLensMF ns/op"]
       if (("MovieLensSVDppUsers ns/op" in vu) && ("MovieLensMF ns/op" in vu)) printf "BENCH movielens_svdpp_users_over_mf %.2f x\n", vu["MovieLensSVDppUsers ns/op"] / vu["MovieLensMF ns/op"]
       if (("MovieLensSVDppFloor ns/op" in vu) && ("MovieLensMF ns/op" in vu)) printf "BENCH movielens_svdpp_floor_over_mf %.2f x\n", vu["MovieLensSVDppFloor ns/op"] / vu["MovieLensMF ns/op"]
       if (("MovieLensSVDppHardwareFloor ns/op" in vu) && ("MovieLensMF ns/op" in vu)) printf "BENCH movielens_svdpp_hardware_floor_over_mf %.2f x\n", vu["MovieLensSVDppHardwareFloor ns/op"] / vu["MovieLensMF ns/op"]
       if (("BagsSeparate ns/op" in vu) && ("BagsCollection ns/op" in vu)) printf "BENCH bags_separate_over_collection %.2f x\n", vu["BagsSeparate ns/op"] / vu["BagsCollection ns/op"]
       # Lookups of ids that differ only in their high bits over ids that differ in their low ones
       # (BenchmarkIDBits; about 1 when the hash of the deduplication spreads both).
       if (("IDBits/lookup-high ns/op" in vu) && ("IDBits/lookup-low ns/op" in vu)) printf "BENCH lookup_high_bit_ids_over_low %.2f x\n", vu["IDBits/lookup-high ns/op"] / vu["IDBits/lookup-low ns/op"]
       if (("IDBits/bag-high ns/op" in vu) && ("IDBits/bag-low ns/op" in vu)) printf "BENCH bag_high_bit_ids_over_low %.2f x\n", vu["IDBits/bag-high ns/op"] / vu["IDBits/bag-low ns/op"]
       if (("CTRTrainRanks/2-fused samples/s" in vu) && ("CTRTrainRanks/2 samples/s" in vu)) printf "BENCH ctr_2_fused_over_plain %.2f x\n", vu["CTRTrainRanks/2-fused samples/s"] / vu["CTRTrainRanks/2 samples/s"]
       if (("ShardedEvict ns/op" in vu) && ("ShardedEvict local-ns/op" in vu)) printf "BENCH sharded_evict_over_local %.2f x\n", vu["ShardedEvict ns/op"] / vu["ShardedEvict local-ns/op"]
       if (("CTRTrainRanks/2-collection samples/s" in vu) && ("CTRTrainRanks/2 samples/s" in vu)) printf "BENCH ctr_2_collection_over_plain %.2f x\n", vu["CTRTrainRanks/2-collection samples/s"] / vu["CTRTrainRanks/2 samples/s"]
       if (("CTRTrainRanks/2-pipelined samples/s" in vu) && ("CTRTrainRanks/2 samples/s" in vu)) printf "BENCH ctr_2_pipelined_over_plain %.2f x\n", vu["CTRTrainRanks/2-pipelined samples/s"] / vu["CTRTrainRanks/2 samples/s"]
       if (("CTRTrainRanks/2-pipelined-fork samples/s" in vu) && ("CTRTrainRanks/2 samples/s" in vu)) printf "BENCH ctr_2_pipelined_fork_over_plain %.2f x\n", vu["CTRTrainRanks/2-pipelined-fork samples/s"] / vu["CTRTrainRanks/2 samples/s"]
       # The step of the tiny model (BenchmarkTinyStep; target: under 100 µs): the time of PyTorch over
       # that of gorec, and gorec over the floor (the same C ABI calls from C, no Go: make tiny-bench).
       if (("TinyStep µs/step" in vu) && ("torch_TinyStep µs/step" in vu)) printf "BENCH tiny_step_torch_over_gorec %.2f x\n", vu["torch_TinyStep µs/step"] / vu["TinyStep µs/step"]
       if (("TinyStep µs/step" in vu) && ("tiny_step_c µs/step" in vu)) printf "BENCH tiny_step_gorec_over_c_floor %.2f x\n", vu["TinyStep µs/step"] / vu["tiny_step_c µs/step"]
       h = "CTRStepHogwild/"
       if ((h "workers-2 samples/s" in vu) && (h "sync-threads-1 samples/s" in vu)) {
         printf "BENCH ctr_hogwild_2_over_sync_1 %.2f x\n", vu[h "workers-2 samples/s"] / vu[h "sync-threads-1 samples/s"]
         if (h "workers-2-own samples/s" in vu) printf "BENCH ctr_hogwild_2_own_over_sync_1 %.2f x\n", vu[h "workers-2-own samples/s"] / vu[h "sync-threads-1 samples/s"]
         printf "BENCH ctr_hogwild_1_over_sync_1 %.2f x\n", vu[h "workers-1 samples/s"] / vu[h "sync-threads-1 samples/s"]
         printf "BENCH ctr_sync_2_over_sync_1 %.2f x\n", vu[h "sync-threads-2 samples/s"] / vu[h "sync-threads-1 samples/s"]
         printf "BENCH ctr_independent_2_over_sync_1 %.2f x\n", vu[h "independent-2 samples/s"] / vu[h "sync-threads-1 samples/s"]
       }
       c = "TableLookupGo c-ns/batch"
       if (c in vu) {
         if ("TableLookupGo embedding-ns/batch" in vu) printf "BENCH table_lookup_go_over_c %.2f x\n", vu["TableLookupGo embedding-ns/batch"] / vu[c]
         if ("TableLookupGo ctable-ns/batch" in vu) printf "BENCH table_lookup_ctable_over_c %.2f x\n", vu["TableLookupGo ctable-ns/batch"] / vu[c]
       }
     }' "$out"
