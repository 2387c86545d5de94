// group.cc.h: process groups over torch.distributed's c10d ProcessGroupGloo (cgotorch.h,
// "Process groups"): the stores the ranks meet through, the job-identity check, Gloo's device,
// and the ct_dist_group handle's lifecycle. The collectives are in collectives.cc.h, the
// optional NCCL backend in nccl.cc.h. They are compiled through unity_dist.cc, with
// -DUSE_C10D_GLOO (flags.go): without it c10d's ProcessGroupGloo.hpp declares nothing.
//
// libtorch 1.13 and 2.x: ProcessGroupGloo derives from ProcessGroup in 1.x and from Backend in
// 2.x (its Options likewise), but the members used here (the constructor, Options::create,
// devices, the collectives, Work::wait) are the same in both. TCPStore learnt to serve on a
// socket it is given (masterListenFd) in 2.x; that is detected on the options type itself.
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../tensor/internal.h"

#ifndef USE_C10D_GLOO
#error "group.cc.h needs -DUSE_C10D_GLOO (cgotorch/flags.go, mk/dist.mk)"
#endif

#include "nccl.cc.h"

// The object behind a ct_dist_group handle.
struct ct_dist_group_s {
  std::mutex mu;  // serialises the collectives: Gloo tags each with a per-group counter
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  ct::dist::nccl_backend nccl;  // CUDA tensors' process group, with the nccl backend
  int rank = 0;
  int size = 0;
  std::chrono::milliseconds timeout{0};
  std::string broken;  // why the group is out of step; empty while it is usable
  // The tensors of a failed collective: Gloo's threads may still hold their memory, so they
  // live until the process group (its threads and connections) is gone.
  std::vector<at::Tensor> retained;
  std::vector<c10::intrusive_ptr<c10d::Work>> retained_work;  // their sends and receives
};

namespace ct {
namespace dist {

// The process group's errors, with their codes (CT_ERR_*).
struct timeout_error : prefixed_error<CT_ERR_TIMEOUT> {
  explicit timeout_error(const std::string &m) : prefixed_error("timeout: ", m) {}
};
struct peer_error : prefixed_error<CT_ERR_PEER> {
  explicit peer_error(const std::string &m) : prefixed_error("peer: ", m) {}
};
struct refused_error : prefixed_error<CT_ERR_REFUSED> {
  explicit refused_error(const std::string &m) : prefixed_error("refused: ", m) {}
};
struct broken_error : prefixed_error<CT_ERR_BROKEN> {
  explicit broken_error(const std::string &m) : prefixed_error("broken: ", m) {}
};

// The message of an exception from c10d or Gloo, without libtorch's C++ backtrace.
inline std::string message_of(const std::exception &e) {
  if (auto *c = dynamic_cast<const c10::Error *>(&e)) return c->what_without_backtrace();
  return e.what();
}

// Whether a c10d or Gloo failure is a timeout (Gloo: "Timed out waiting ...", c10d's Work:
// "Operation timed out!", the stores: "Socket Timeout", "Wait timeout") rather than a failed
// or departed peer (a closed or reset connection, a read or write error).
inline bool is_timeout(const std::string &msg) {
  for (const char *s : {"imed out", "imeout", "timed out"}) {
    if (msg.find(s) != std::string::npos) return true;
  }
  return false;
}

// Rethrows the exception being handled as a timeout_error or a peer_error.
[[noreturn]] inline void rethrow_classified(const std::string &what) {
  try {
    throw;
  } catch (const std::exception &e) {
    std::string msg = what + ": " + message_of(e);
    if (is_timeout(msg)) throw timeout_error(msg);
    throw peer_error(msg);
  }
}

inline std::string str(const char *s) { return s == nullptr ? std::string() : std::string(s); }

// ---- stores ----------------------------------------------------------------------------------

// Whether TCPStoreOptions has masterListenFd (libtorch 2.x): a listening socket for the server.
template <class O, class = void>
struct has_listen_fd : std::false_type {};
template <class O>
struct has_listen_fd<O, std::void_t<decltype(std::declval<O &>().masterListenFd)>> : std::true_type {};

// A TCP socket bound to host:port and listening; the caller owns it.
inline int listen_on(const std::string &host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo *res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    throw arg_error("store address " + host + ": " + gai_strerror(rc));
  }
  std::string last = "no address";
  for (addrinfo *a = res; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0) {
      freeaddrinfo(res);
      return fd;
    }
    last = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(res);
  throw peer_error("cannot listen on " + host + ":" + service + ": " + last);
}

// On libtorch with masterListenFd, rank 0's server takes a socket bound to host only.
template <class O>
void bind_server(O &opts, const std::string &host, int port) {
  if constexpr (has_listen_fd<O>::value) {
    opts.masterListenFd = listen_on(host, port);  // the server owns and closes it
  }
}

inline c10::intrusive_ptr<c10d::Store> make_store(const ct_dist_config &cfg,
                                                  std::chrono::milliseconds timeout) {
  const std::string path = str(cfg.store_path);
  if (!path.empty()) {
    auto store = c10::make_intrusive<c10d::FileStore>(path, cfg.world_size);
    store->setTimeout(timeout);
    return store;
  }
  const std::string host = str(cfg.store_host);
  if (host.empty()) throw arg_error("neither a store path nor a store host");
  if (cfg.store_port < 1 || cfg.store_port > 65535) {
    throw arg_error("store port " + std::to_string(cfg.store_port) + " is not in 1..65535");
  }
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(cfg.store_port);
  opts.isServer = cfg.rank == 0 && cfg.store_client_only == 0;
  opts.waitWorkers = false;  // the identity check below waits for the ranks, within the timeout
  opts.timeout = timeout;
  if (opts.isServer) bind_server(opts, host, cfg.store_port);
  try {
    return c10::make_intrusive<c10d::TCPStore>(host, opts);
  } catch (...) {
    rethrow_classified("store " + host + ":" + std::to_string(cfg.store_port));
  }
}

// ---- the job's identity ------------------------------------------------------------------------

inline std::vector<uint8_t> bytes(const std::string &s) { return {s.begin(), s.end()}; }
inline std::string text(const std::vector<uint8_t> &v) { return {v.begin(), v.end()}; }

// What a rank announces: the job's identity and world size, then (after a newline) a nonce that
// tells this process from another one announcing the same.
inline std::string announced(const std::string &claim) { return claim.substr(0, claim.find('\n')); }

// Every rank claims its rank's key with its identity (compare-and-set: a rank already claimed by
// another process is refused), then reads every other rank's claim as it arrives. A difference
// is refused on the rank that sees it, which also posts the reason under a key every rank polls,
// so that the ranks whose peers are all alike learn of it too. Nothing but these keys has moved.
// The rank that serves a TCPStore waits, within the timeout, until the others have read the
// refusal (each adds itself to a count): its process may end as soon as it returns, and the
// others would then see the store's connection break (ErrPeer) instead of the reason.
inline void check_identity(c10d::Store &store, const ct_dist_config &cfg,
                           std::chrono::milliseconds timeout) {
  const std::string identity = "job \"" + str(cfg.job) + "\" of world size " +
                               std::to_string(cfg.world_size);
  std::random_device rd;
  const std::string claim = identity + "\n" + std::to_string(getpid()) + "-" +
                            std::to_string(rd()) + "-" + std::to_string(rd());
  const std::string key = "gorec/identity/", refused = "gorec/refused", read = "gorec/refused-read";
  const bool serves = str(cfg.store_path).empty() && cfg.rank == 0 && cfg.store_client_only == 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto refused_here = [&](const std::string &why) -> refused_error {
    if (!serves) {
      store.add(read, 1);
      return refused_error(why);
    }
    while (store.add(read, 0) < cfg.world_size - 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return refused_error(why);
  };
  auto refuse = [&](const std::string &why) {
    store.set(refused, bytes(why));
    throw refused_here(why);
  };
  const std::string mine = key + std::to_string(cfg.rank);
  const std::string got = text(store.compareSet(mine, {}, bytes(claim)));
  if (got != claim) {
    refuse("rank " + std::to_string(cfg.rank) + " is already taken, by " + announced(got) +
           "; this process announces " + identity);
  }
  std::vector<bool> seen(cfg.world_size, false);
  seen[cfg.rank] = true;
  int left = cfg.world_size - 1;
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    if (store.check({refused})) throw refused_here(text(store.get(refused)));
    for (int r = 0; r < cfg.world_size; r++) {
      const std::string k = key + std::to_string(r);
      if (seen[r] || !store.check({k})) continue;
      const std::string other = announced(text(store.get(k)));
      if (other != identity) {
        refuse("rank " + std::to_string(r) + " announces " + other + ", rank " +
               std::to_string(cfg.rank) + " announces " + identity);
      }
      seen[r] = true;
      left--;
    }
    if (left == 0) return;
    if (std::chrono::steady_clock::now() > deadline) {
      std::string missing;
      for (int r = 0; r < cfg.world_size; r++) {
        if (!seen[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      throw timeout_error("ranks " + missing + " did not join within " +
                          std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

// ---- Gloo ------------------------------------------------------------------------------------

inline std::shared_ptr<::gloo::transport::Device> make_device(const ct_dist_config &cfg) {
  const std::string iface = str(cfg.gloo_interface), host = str(cfg.gloo_host);
  if (!iface.empty()) return c10d::ProcessGroupGloo::createDeviceForInterface(iface);
  if (!host.empty()) return c10d::ProcessGroupGloo::createDeviceForHostname(host);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

inline void check_config(const ct_dist_config &cfg) {
  if (cfg.world_size < 1) throw arg_error("world size " + std::to_string(cfg.world_size) + " < 1");
  if (cfg.rank < 0 || cfg.rank >= cfg.world_size) {
    throw arg_error("rank " + std::to_string(cfg.rank) + " is not in 0.." +
                    std::to_string(cfg.world_size - 1));
  }
  if (cfg.timeout_ms <= 0) throw arg_error("timeout must be positive");
  if (cfg.backend != CT_DIST_GLOO && cfg.backend != CT_DIST_NCCL) {
    throw arg_error("unknown backend " + std::to_string(cfg.backend));
  }
  if (cfg.backend == CT_DIST_NCCL && !nccl_built()) {
    throw arg_error("the nccl backend is not in this build: build cgotorch with the gorec_nccl "
                    "tag against a libtorch with CUDA and NCCL (make cuda-test-bins)");
  }
}

}  // namespace dist
}  // namespace ct

extern "C" {

ct_error ct_dist_group_new(ct_dist_group *out, const ct_dist_config *cfg) {
  return ct::guard([&] {
    ct::need_out(out);
    if (cfg == nullptr) throw ct::arg_error("config is NULL");
    namespace d = ct::dist;
    d::check_config(*cfg);
    const std::chrono::milliseconds timeout(cfg->timeout_ms);
    auto device = [&] {
      try {
        return d::make_device(*cfg);
      } catch (const std::exception &e) {  // no such interface, an address not of this host
        throw ct::arg_error("gloo device: " + d::message_of(e));
      }
    }();
    auto g = std::make_unique<ct_dist_group_s>();
    g->rank = cfg->rank;
    g->size = cfg->world_size;
    g->timeout = timeout;
    g->store = d::make_store(*cfg, timeout);
    const std::string prefix = d::str(cfg->store_prefix);
    if (!prefix.empty()) g->store = c10::make_intrusive<c10d::PrefixStore>(prefix, g->store);
    try {
      d::check_identity(*g->store, *cfg, timeout);
    } catch (const d::refused_error &) {
      throw;
    } catch (const d::timeout_error &) {
      throw;
    } catch (...) {
      d::rethrow_classified("identity check");
    }
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    opts->devices.push_back(device);
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("gorec/gloo", g->store);
    try {
      g->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, cfg->rank, cfg->world_size,
                                                          opts);
    } catch (...) {
      d::rethrow_classified("gloo rendezvous");
    }
    if (cfg->backend == CT_DIST_NCCL) {
      try {
        d::start_nccl(g->nccl, g->store, *cfg, timeout);
      } catch (const ct::arg_error &) {
        throw;
      } catch (...) {
        d::stop_nccl(g->nccl, true);
        d::rethrow_classified("nccl start");
      }
    }
    *out = g.release();
  });
}

void ct_dist_group_free(ct_dist_group g) {
  if (g == nullptr) return;
  try {
    ct::dist::stop_nccl(g->nccl, !g->broken.empty());
    g->pg.reset();  // joins Gloo's threads and closes its connections first
    g->retained_work.clear();
    g->retained.clear();
    g->store.reset();
  } catch (...) {
    // a destructor that throws: nothing more can be released
  }
  delete g;
}

ct_error ct_dist_store_binds_address(int32_t *out) {
  return ct::guard([&] {
    ct::need_out(out);
    *out = ct::dist::has_listen_fd<c10d::TCPStoreOptions>::value ? 1 : 0;
  });
}

ct_error ct_dist_backend_available(int32_t *out, int32_t backend) {
  return ct::guard([&] {
    ct::need_out(out);
    *out = backend == CT_DIST_GLOO || (backend == CT_DIST_NCCL && ct::dist::nccl_built()) ? 1 : 0;
  });
}

}  // extern "C"
