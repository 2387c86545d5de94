// idmap_bench.cc - single-thread benchmark of cgotorch/csrc/idmap/ against
// absl::flat_hash_map<int64_t,int64_t> and std::unordered_map<int64_t,int64_t>.
//
// Work, identical for every table (same ids, same order, results written to an out
// array and checksummed so nothing is optimised away):
//   find_or_insert: for 10M random ids (full 64-bit range, fixed seed) store the id's
//     index, assigning the next index (0, 1, 2, ...) to a new id; presized (reserve(10M)
//     before the timer) and grow (starting empty).
//   find_50hit: 10M lookups, 50% ids present (random order), 50% absent; out = index or -1.
//   the floor: random cache lines of a region the size of our pre-sized map, read and
//     written, prefetched 32 ahead; each table's time is also printed in such lines per op
//     (absl's is the most a table touching one line per op could beat it by here).
// Ours runs in batches of kBatch ids (its batched API); the others one id at a time
// (their API). Each figure is the best of kReps repetitions; a table is built and destroyed
// outside the timer.
#include <absl/container/flat_hash_map.h>
#include <sys/mman.h>

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <unordered_map>
#include <vector>

#include "../csrc/idmap/idmap.h"

namespace {

constexpr size_t kN = 10'000'000;
constexpr size_t kBatch = 4096;
constexpr int kReps = 3;

struct Rng {  // splitmix64
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
};

// Wall-clock time (the figures), and this thread's CPU time (user + system, page faults
// included): the machine is shared, and CPU time is what another process's load changes least.
struct Stamp {
    double wall, cpu;
};
Stamp now() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return {std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count(),
            ts.tv_sec * 1e9 + ts.tv_nsec};
}

// This machine is a VM whose guest hands freed memory back to the hypervisor: the first
// touch of such memory costs far more than an ordinary page fault, and which table meets it
// depends on what ran before. Before every timed run (outside the timer) each table gets the
// same preparation: 1.5 GiB is mapped (huge-page advised, so it also yields 2 MiB blocks),
// touched and unmapped, leaving plenty of backed free memory. Ordinary page faults (the
// kernel zeroing a table's new pages) stay inside every timed run.
void warm_memory() {
    const size_t bytes = size_t(1536) << 20;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < bytes; i += 4096) static_cast<volatile char*>(p)[i] = 1;
    munmap(p, bytes);
}

// The floor under every figure here: how fast this machine serves random cache lines of a
// region the size of our pre-sized map, kN of them, the next 32 prefetched (as our batches do):
// read (a find's one line) and written (an insert's). A table that touches one such line per
// op and does nothing else runs at this speed, so absl's time over it is the most that any
// table touching a line per op can beat absl by on this machine. Best of kReps; the region is
// touched first, so no page fault is timed.
struct LineFloor {
    double read = 1e300, write = 1e300;  // thread CPU ns per line
};
LineFloor random_lines(size_t bytes, const std::vector<int64_t>& ids) {
    LineFloor f;
    const size_t lines = bytes / 64;
    auto* p = static_cast<int64_t*>(mmap(nullptr, lines * 64, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) return f;
#ifdef MADV_HUGEPAGE
    madvise(p, lines * 64, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < lines * 8; i += 8) p[i] = static_cast<int64_t>(i);
    std::vector<uint32_t> at(kN);  // a random line per op, from the ids (not timed)
    for (size_t i = 0; i < kN; i++) at[i] = static_cast<uint32_t>(static_cast<uint64_t>(ids[i]) % lines);
    constexpr size_t ahead = 32;
    int64_t sum = 0;
    for (int rep = 0; rep < kReps; rep++) {
        Stamp t0 = now();
        for (size_t i = 0; i < kN; i++) {
            if (i + ahead < kN) __builtin_prefetch(p + size_t(at[i + ahead]) * 8, 0, 3);
            sum += p[size_t(at[i]) * 8];
        }
        Stamp t1 = now();
        for (size_t i = 0; i < kN; i++) {
            if (i + ahead < kN) __builtin_prefetch(p + size_t(at[i + ahead]) * 8, 1, 3);
            p[size_t(at[i]) * 8 + 1] = static_cast<int64_t>(i);
        }
        Stamp t2 = now();
        f.read = std::min(f.read, (t1.cpu - t0.cpu) / kN);
        f.write = std::min(f.write, (t2.cpu - t1.cpu) / kN);
    }
    static volatile int64_t sink;
    sink = sum;
    munmap(p, lines * 64);
    return f;
}

uint64_t checksum(const std::vector<int64_t>& v) {
    uint64_t h = 0;
    for (int64_t x : v) h = h * 31 + static_cast<uint64_t>(x);
    return h;
}

struct Result {
    double foi = 1e300, find = 1e300;          // wall ns per op, best of reps
    double foi_cpu = 1e300, find_cpu = 1e300;  // thread CPU ns per op, best of reps
    uint64_t foi_sum = 0, find_sum = 0;
    double bytes_per_id = 0;
};

// ---------------------------------------------------------------- ours
void bench_idmap(const std::vector<int64_t>& ids, const std::vector<int64_t>& q, bool presized, Result& r) {
    std::vector<int64_t> out(kN);
    {
        ct_idmap* m = ct_idmap_new(0);
        if (!m || (presized && ct_idmap_reserve(m, kN) != 0)) {
            std::fprintf(stderr, "idmap: out of memory\n");
            std::exit(1);
        }
        warm_memory();
        Stamp t0 = now();
        for (size_t off = 0; off < kN; off += kBatch) {
            size_t b = kN - off < kBatch ? kN - off : kBatch;
            if (ct_idmap_find_or_insert(m, ids.data() + off, b, out.data() + off, nullptr) < 0) std::abort();
        }
        Stamp t1 = now();
        r.foi = std::min(r.foi, (t1.wall - t0.wall) / kN);
        r.foi_cpu = std::min(r.foi_cpu, (t1.cpu - t0.cpu) / kN);
        r.foi_sum = checksum(out);
        r.bytes_per_id = static_cast<double>(ct_idmap_bytes(m)) / static_cast<double>(ct_idmap_size(m));
        t0 = now();
        for (size_t off = 0; off < kN; off += kBatch) {
            size_t b = kN - off < kBatch ? kN - off : kBatch;
            ct_idmap_find(m, q.data() + off, b, out.data() + off);
        }
        t1 = now();
        r.find = std::min(r.find, (t1.wall - t0.wall) / kN);
        r.find_cpu = std::min(r.find_cpu, (t1.cpu - t0.cpu) / kN);
        r.find_sum = checksum(out);
        ct_idmap_free(m);
    }
}

// ---------------------------------------------------------------- std-like maps
template <class Map>
void bench_map(const std::vector<int64_t>& ids, const std::vector<int64_t>& q, bool presized, Result& r) {
    std::vector<int64_t> out(kN);
    {
        auto* m = new Map();
        if (presized) m->reserve(kN);
        int64_t next = 0;
        warm_memory();
        Stamp t0 = now();
        for (size_t i = 0; i < kN; i++) {
            auto res = m->try_emplace(ids[i], next);
            next += res.second;
            out[i] = res.first->second;
        }
        Stamp t1 = now();
        r.foi = std::min(r.foi, (t1.wall - t0.wall) / kN);
        r.foi_cpu = std::min(r.foi_cpu, (t1.cpu - t0.cpu) / kN);
        r.foi_sum = checksum(out);
        t0 = now();
        for (size_t i = 0; i < kN; i++) {
            auto it = m->find(q[i]);
            out[i] = it == m->end() ? -1 : it->second;
        }
        t1 = now();
        r.find = std::min(r.find, (t1.wall - t0.wall) / kN);
        r.find_cpu = std::min(r.find_cpu, (t1.cpu - t0.cpu) / kN);
        r.find_sum = checksum(out);
        delete m;
    }
}

}  // namespace

int main(int argc, char** argv) {
    // `idmap_bench ours`: only our table (for tuning)
    const bool only_ours = argc > 1 && std::strcmp(argv[1], "ours") == 0;
    Rng rng{20240531};
    std::vector<int64_t> ids(kN), q(kN);
    for (auto& x : ids) x = static_cast<int64_t>(rng.next());
    for (size_t i = 0; i < kN; i++)  // 50% present (random positions), 50% fresh random ids
        q[i] = (rng.next() & 1) ? ids[rng.next() % kN] : static_cast<int64_t>(rng.next());

    std::printf("idmap bench: %zu random int64 ids, our batch size %zu, best of %d; our batched operations: %s\n", kN,
                kBatch, kReps, ct_idmap_isa());
    const char* mode[2] = {"grow", "presized"};
    // Repetitions outermost and tables interleaved, so that load from other processes on
    // the machine hits every table alike; each figure is the best of its kReps runs.
    Result res[3][2];
    for (int rep = 0; rep < kReps; rep++)
        for (int p = 1; p >= 0; p--) {
            bench_idmap(ids, q, p, res[0][p]);
            if (only_ours) continue;
            bench_map<absl::flat_hash_map<int64_t, int64_t>>(ids, q, p, res[1][p]);
            bench_map<std::unordered_map<int64_t, int64_t>>(ids, q, p, res[2][p]);
        }
    if (only_ours)
        for (int p = 1; p >= 0; p--)
            std::printf("ours %s: find_or_insert %.2f ns/op (cpu %.2f), find_50hit %.2f ns/op (cpu %.2f), %.1f B/id\n",
                        mode[p], res[0][p].foi, res[0][p].foi_cpu, res[0][p].find, res[0][p].find_cpu,
                        res[0][p].bytes_per_id);
    if (only_ours) return 0;
    bool ok = true;
    for (int p = 0; p < 2; p++)
        for (int t = 1; t < 3; t++)
            ok &= res[t][p].foi_sum == res[0][p].foi_sum && res[t][p].find_sum == res[0][p].find_sum;
    std::printf("idmap bench: results identical across tables: %s\n", ok ? "yes" : "NO");
    const char* name[3] = {"idmap", "absl", "unordered"};
    for (int c = 0; c < 2; c++) {  // wall clock, then thread CPU time
        const char* sfx = c ? "_cpu" : "";
        auto foi = [&](int t, int p) { return c ? res[t][p].foi_cpu : res[t][p].foi; };
        auto fnd = [&](int t, int p) { return c ? res[t][p].find_cpu : res[t][p].find; };
        for (int t = 0; t < 3; t++)
            for (int p = 1; p >= 0; p--)
                std::printf("BENCH %s_find_or_insert_%s_ns%s %.2f ns/op\n", name[t], mode[p], sfx, foi(t, p));
        for (int t = 0; t < 3; t++)
            for (int p = 1; p >= 0; p--)
                std::printf("BENCH %s_find_50hit_%s_ns%s %.2f ns/op\n", name[t], mode[p], sfx, fnd(t, p));
        for (int t = 1; t < 3; t++)
            for (int p = 1; p >= 0; p--) {
                std::printf("BENCH idmap_vs_%s_find_or_insert_%s%s %.2f x\n", name[t], mode[p], sfx,
                            foi(t, p) / foi(0, p));
                std::printf("BENCH idmap_vs_%s_find_50hit_%s%s %.2f x\n", name[t], mode[p], sfx,
                            fnd(t, p) / fnd(0, p));
            }
    }
    // The floor (see random_lines), in thread CPU time as the _cpu figures: our time and
    // absl's in random lines per op, and absl's time in lines: the most that a table touching
    // one line per op and doing nothing else could be faster than absl here.
    const LineFloor f = random_lines(static_cast<size_t>(res[0][1].bytes_per_id * kN), ids);
    std::printf("BENCH random_line_read_ns_cpu %.2f ns/op\n", f.read);
    std::printf("BENCH random_line_write_ns_cpu %.2f ns/op\n", f.write);
    for (int t = 0; t < 2; t++)
        for (int p = 1; p >= 0; p--) {
            std::printf("BENCH %s_find_or_insert_%s_lines %.2f lines/op\n", name[t], mode[p], res[t][p].foi_cpu / f.write);
            std::printf("BENCH %s_find_50hit_%s_lines %.2f lines/op\n", name[t], mode[p], res[t][p].find_cpu / f.read);
        }
    std::printf("BENCH idmap_bytes_per_id %.1f B\n", res[0][0].bytes_per_id);
    std::printf("BENCH idmap_bytes_per_id_presized %.1f B\n", res[0][1].bytes_per_id);
    return ok ? 0 : 1;
}
