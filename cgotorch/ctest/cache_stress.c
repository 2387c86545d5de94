/* cache_stress.c: the tensor allocator's buffer cache (cgotorch/csrc/tensor/allocator.cc.h) from
 * many threads, as Go uses it: tensors made on one thread and freed on another (Go's cleanup
 * goroutine), threads that exit with a full cache, and a release while other threads hold
 * caches. Built and run under AddressSanitizer (make cache-sanitize: a block reused while still
 * in use, freed twice, or lost with an exiting thread's cache, which LeakSanitizer reports) and
 * ThreadSanitizer (make cache-tsan: the lists handed between threads), each once with the cache
 * and once with GOREC_TENSOR_CACHE=0.
 *
 * Checks besides the sanitizers' reports: every tensor holds the bytes it was made with when it
 * is freed, on whatever thread (so no block was handed out twice); the live bytes count what was
 * asked for, exactly, whatever the size class; the cached bytes stay within the bounds (8 MiB a
 * thread, 64 MiB all threads together, 32 MiB central); an exiting thread's cache is kept (central pool) and a release (or a
 * table's compaction) frees it; a thread frees its own cache at its first allocation after a
 * release; and at the end nothing is live or cached. */
#define _POSIX_C_SOURCE 200809L /* pthread barriers under -std=c11 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgotorch.h"
#include "check.h"

enum { PRODUCERS = 3, CONSUMERS = 3, ITERS = 1500, RING = 64 };
static const int64_t kThreadBytes = 8 << 20, kCentralBytes = 32 << 20, kAllThreadsBytes = 64 << 20;

static atomic_long bad;
static int cache_on;

static void fail(const char *what) {
  fprintf(stderr, "cache stress: %s\n", what);
  atomic_fetch_add(&bad, 1);
}

static uint32_t next(uint32_t *r) { return *r = *r * 1664525u + 1013904223u; }

/* A new uint8 tensor of n bytes, byte i = seed + i * 7, or NULL (counted as a failure). */
static ct_tensor make(int64_t n, uint8_t seed) {
  uint8_t *buf = malloc((size_t)n);
  if (buf == NULL) {
    fail("out of memory");
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) buf[i] = (uint8_t)(seed + i * 7);
  ct_tensor t = NULL;
  ct_error err = ct_tensor_from_data(&t, buf, (size_t)n, CT_UINT8, &n, 1);
  free(buf);
  if (err != NULL) {
    fail(err);
    ct_error_free(err);
    return NULL;
  }
  return t;
}

/* Checks t still holds what make gave it, then frees it. */
static void check_free(ct_tensor t, int64_t n, uint8_t seed) {
  uint8_t *buf = malloc((size_t)n);
  ct_error err = buf == NULL ? NULL : ct_tensor_copy_to(buf, (size_t)n, t, CT_UINT8);
  if (buf == NULL) {
    fail("out of memory");
  } else if (err != NULL) {
    fail(err);
    ct_error_free(err);
  } else {
    for (int64_t i = 0; i < n; i++) {
      if (buf[i] != (uint8_t)(seed + i * 7)) {
        fail("a tensor's bytes changed: its block was handed out twice");
        break;
      }
    }
  }
  free(buf);
  ct_tensor_free(t);
}

/* Sizes across the classes: mostly small (as a training step's), some up to 5 MiB (past the
 * largest class, 4 MiB). */
static int64_t some_size(uint32_t *r) {
  const uint32_t x = next(r) >> 8;
  switch (x % 8) {
    case 0: return 1 + (int64_t)(x >> 3) % 64;
    case 1: case 2: return 1 + (int64_t)(x >> 3) % 4096;
    case 3: case 4: return 1 + (int64_t)(x >> 3) % 70000;
    case 5: return 1 + (int64_t)(x >> 3) % (600 << 10);
    case 6: return 60000 + (int64_t)(x >> 3) % 8000;
    default: return (x >> 3) % 16 == 0 ? (3 << 20) + (int64_t)(x >> 7) % (2 << 20) : 65536;
  }
}

/* The ring of tensors handed from producers to consumers. */
static struct {
  ct_tensor t;
  int64_t n;
  uint8_t seed;
} ring[RING];
static int head, tail, producers_left = PRODUCERS;
static pthread_mutex_t ring_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ring_cv = PTHREAD_COND_INITIALIZER;

static void *produce(void *arg) {
  uint32_t r = (uint32_t)(uintptr_t)arg;
  for (int i = 0; i < ITERS; i++) {
    const int64_t n = some_size(&r);
    const uint8_t seed = (uint8_t)next(&r);
    ct_tensor t = make(n, seed);
    if (t == NULL) continue;
    if (i % 2 == 0) { /* freed here, as a step's temporaries are */
      ct_tensor local = make(some_size(&r) % 4096 + 1, 3);
      if (local != NULL) ct_tensor_free(local);
      check_free(t, n, seed);
      continue;
    }
    pthread_mutex_lock(&ring_mu);
    while (head - tail == RING) pthread_cond_wait(&ring_cv, &ring_mu);
    ring[head % RING].t = t;
    ring[head % RING].n = n;
    ring[head % RING].seed = seed;
    head++;
    pthread_cond_broadcast(&ring_cv);
    pthread_mutex_unlock(&ring_mu);
  }
  pthread_mutex_lock(&ring_mu);
  producers_left--;
  pthread_cond_broadcast(&ring_cv);
  pthread_mutex_unlock(&ring_mu);
  return NULL;
}

/* Frees what the producers made (as Go's cleanup goroutine frees on its own thread), checking
 * the cached bytes stay within their bounds, and sometimes allocates too. */
static void *consume(void *arg) {
  uint32_t r = (uint32_t)(uintptr_t)arg;
  for (;;) {
    pthread_mutex_lock(&ring_mu);
    while (head == tail && producers_left > 0) pthread_cond_wait(&ring_cv, &ring_mu);
    if (head == tail) {
      pthread_mutex_unlock(&ring_mu);
      return NULL;
    }
    ct_tensor t = ring[tail % RING].t;
    const int64_t n = ring[tail % RING].n;
    const uint8_t seed = ring[tail % RING].seed;
    tail++;
    pthread_cond_broadcast(&ring_cv);
    pthread_mutex_unlock(&ring_mu);
    check_free(t, n, seed);
    if (next(&r) % 4 == 0) {
      ct_tensor mine = make(some_size(&r), 5);
      if (mine != NULL) ct_tensor_free(mine);
    }
    if (ct_tensor_cache_bytes() > (PRODUCERS + CONSUMERS + 1) * kThreadBytes + kCentralBytes) fail("cache past its bounds");
  }
}

/* The release test's thread: fills its cache with 64 KiB blocks, waits while main releases,
 * then makes and frees one 1 KiB tensor (its first allocation after the release frees its old
 * cache), and waits again before it exits. */
static pthread_barrier_t step;
static void *holder(void *arg) {
  (void)arg;
  ct_tensor ts[16];
  for (int i = 0; i < 16; i++) ts[i] = make(65536, (uint8_t)i);
  for (int i = 0; i < 16; i++)
    if (ts[i] != NULL) check_free(ts[i], 65536, (uint8_t)i);
  pthread_barrier_wait(&step); /* 1: cache filled */
  pthread_barrier_wait(&step); /* 2: main released */
  ct_tensor t = make(1024, 9);
  if (t != NULL) check_free(t, 1024, 9);
  pthread_barrier_wait(&step); /* 3: cache replaced */
  pthread_barrier_wait(&step); /* 4: main checked */
  return NULL;
}

/* Exact live bytes for sizes at and around the class bounds, and reuse on one thread. */
static void sizes(void) {
  static const int64_t ns[] = {1, 63, 64, 65, 80, 81, 127, 128, 129, 4095, 4096, 4097, 65536,
                               (4 << 20) - 1, 4 << 20, (4 << 20) + 1, 5 << 20};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    const int64_t live = ct_live_bytes();
    ct_tensor t = make(ns[i], (uint8_t)i);
    CHECK(t != NULL && ct_live_bytes() == live + ns[i]);
    if (t != NULL) check_free(t, ns[i], (uint8_t)i);
    CHECK(ct_live_bytes() == live);
  }
  CHECK(ok(ct_tensor_cache_release()));
  CHECK(ct_tensor_cache_bytes() == 0);
  ct_tensor t = make(1000, 1);
  CHECK(t != NULL && ct_tensor_cache_bytes() == 0);
  if (t != NULL) check_free(t, 1000, 1);
  /* 1,000 bytes: the class of 1,024 */
  CHECK(ct_tensor_cache_bytes() == (cache_on ? 1024 : 0));
  t = make(1020, 2); /* the same class: the cached block */
  CHECK(t != NULL && ct_tensor_cache_bytes() == 0);
  if (t != NULL) check_free(t, 1020, 2);
  t = make(5 << 20, 2); /* past the largest class: never cached */
  if (t != NULL) check_free(t, 5 << 20, 2);
  CHECK(ct_tensor_cache_bytes() == (cache_on ? 1024 : 0));
}

/* A thread's cache survives its exit (in the central pool), and a release reaches a thread
 * that holds a cache at its next allocation. */
static void release(void) {
  CHECK(ok(ct_tensor_cache_release()));
  CHECK(pthread_barrier_init(&step, NULL, 2) == 0);
  pthread_t th;
  CHECK(pthread_create(&th, NULL, holder, NULL) == 0);
  pthread_barrier_wait(&step); /* 1 */
  CHECK(ct_tensor_cache_bytes() == (cache_on ? 16 * 65536 : 0));
  CHECK(ok(ct_tensor_cache_release())); /* the holder's cache is its own until it allocates */
  CHECK(ct_tensor_cache_bytes() == (cache_on ? 16 * 65536 : 0));
  pthread_barrier_wait(&step); /* 2 */
  pthread_barrier_wait(&step); /* 3 */
  CHECK(ct_tensor_cache_bytes() == (cache_on ? 1024 : 0));
  pthread_barrier_wait(&step); /* 4 */
  CHECK(pthread_join(th, NULL) == 0);
  CHECK(ct_tensor_cache_bytes() == (cache_on ? 1024 : 0)); /* kept by the central pool */
  CHECK(ok(ct_tensor_cache_release()));
  CHECK(ct_tensor_cache_bytes() == 0);
  pthread_barrier_destroy(&step);
}

/* A thread that frees 64 MiB of blocks another thread made keeps at most its bound, and the
 * central pool at most its own. */
static void *free_all(void *arg) {
  ct_tensor *ts = arg;
  for (int i = 0; i < 64; i++) ct_tensor_free(ts[i]);
  if (ct_tensor_cache_bytes() > kThreadBytes + kCentralBytes) fail("cache past its bounds after 64 MiB of frees");
  return NULL;
}
static void bounds(void) {
  ct_tensor ts[64];
  for (int i = 0; i < 64; i++) ts[i] = make(1 << 20, (uint8_t)i);
  pthread_t th;
  CHECK(pthread_create(&th, NULL, free_all, ts) == 0);
  CHECK(pthread_join(th, NULL) == 0);
  const int64_t cached = ct_tensor_cache_bytes();
  CHECK(cache_on ? cached > 0 && cached <= kCentralBytes : cached == 0);
  CHECK(ok(ct_tensor_cache_release()));
}

/* Many threads that each keep a cache under their own bound still keep at most the
 * all-threads bound between them (plus the central pool's). */
enum { KEEPERS = 16, KEPT = 7 };
static pthread_barrier_t kept;
static void *keep_cache(void *arg) {
  (void)arg;
  ct_tensor ts[KEPT];
  for (int i = 0; i < KEPT; i++) ts[i] = make(1 << 20, (uint8_t)i);
  for (int i = 0; i < KEPT; i++) check_free(ts[i], 1 << 20, (uint8_t)i);
  pthread_barrier_wait(&kept); /* the caches are full */
  pthread_barrier_wait(&kept); /* measured */
  return NULL;
}
static void all_threads_bound(void) {
  CHECK(ok(ct_tensor_cache_release()));
  CHECK(pthread_barrier_init(&kept, NULL, KEEPERS + 1) == 0);
  pthread_t th[KEEPERS];
  for (int i = 0; i < KEEPERS; i++) CHECK(pthread_create(&th[i], NULL, keep_cache, NULL) == 0);
  pthread_barrier_wait(&kept);
  const int64_t cached = ct_tensor_cache_bytes();
  if (cached > kAllThreadsBytes + kCentralBytes) fail("threads' caches past the all-threads bound");
  CHECK(cache_on ? cached >= kAllThreadsBytes : cached == 0);
  pthread_barrier_wait(&kept);
  for (int i = 0; i < KEEPERS; i++) CHECK(pthread_join(th[i], NULL) == 0);
  pthread_barrier_destroy(&kept);
  CHECK(ok(ct_tensor_cache_release()));
}

/* A table's compaction frees the cache too (it hands the heap's free memory back). */
static void compact(void) {
  CHECK(ok(ct_tensor_cache_release()));
  ct_tensor t = make(1000, 4);
  if (t != NULL) check_free(t, 1000, 4);
  CHECK(ct_tensor_cache_bytes() == (cache_on ? 1024 : 0));
  ct_table_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.dim = 4;
  cfg.block_rows = 4;
  cfg.initializer = CT_INIT_ZEROS;
  cfg.optimizer = CT_OPT_SGD;
  cfg.device.type = CT_CPU;
  cfg.device.index = -1;
  ct_table tab = NULL;
  CHECK(ok(ct_table_new(&tab, "", &cfg)));
  CHECK(ok(ct_table_compact(tab)));
  CHECK(ct_tensor_cache_bytes() == 0);
  ct_table_free(tab);
}

int main(void) {
  (void)fails_with; /* check.h's; no error case here */
  CHECK(ok(ct_set_num_threads(1))); /* libtorch's OpenMP runtime is not instrumented */
  const char *env = getenv("GOREC_TENSOR_CACHE");
  cache_on = env == NULL || strcmp(env, "0") != 0;
  const int64_t bytes0 = ct_live_bytes();
  sizes();
  release();
  compact();
  bounds();
  all_threads_bound();
  pthread_t th[PRODUCERS + CONSUMERS];
  for (int i = 0; i < PRODUCERS; i++) CHECK(pthread_create(&th[i], NULL, produce, (void *)(uintptr_t)(100 + i)) == 0);
  for (int i = 0; i < CONSUMERS; i++)
    CHECK(pthread_create(&th[PRODUCERS + i], NULL, consume, (void *)(uintptr_t)(200 + i)) == 0);
  for (int i = 0; i < PRODUCERS + CONSUMERS; i++) CHECK(pthread_join(th[i], NULL) == 0);
  CHECK(atomic_load(&bad) == 0);
  CHECK(ct_live_bytes() == bytes0);
  CHECK(cache_on ? ct_tensor_cache_bytes() > 0 : ct_tensor_cache_bytes() == 0);
  CHECK(ok(ct_tensor_cache_release()));
  CHECK(ct_tensor_cache_bytes() == 0);
  printf("cache stress (cache %s): %d passed, %d failed\n", cache_on ? "on" : "off", passed, failed);
  return failed == 0 ? 0 : 1;
}
