// nccl.cc.h: the NCCL backend of a ct_dist_group (cgotorch.h, ct_dist_config's backend): a
// c10d ProcessGroupNCCL beside the group's ProcessGroupGloo. NCCL moves the collectives' CUDA
// tensors; Gloo keeps the CPU tensors and the ranks' agreement before each collective (the
// header exchange of collectives.cc.h), as TorchRec keeps a Gloo group for metadata: so
// ranks that disagree still fail alike, with nothing sent to NCCL.
//
// Compiled in only with -DGOREC_NCCL (Go's build tag gorec_nccl: flags_nccl.go, which also sets
// -DUSE_C10D_NCCL, without which ProcessGroupNCCL.hpp declares nothing). That needs a libtorch
// with CUDA and NCCL (PyPI's wheel; Debian's 1.13 has none) and the CUDA and NCCL headers
// (mk/cuda.mk). Without it the backend is refused with "invalid argument: ".
//
// Failures must not end the process: NCCL's watchdog aborts it on a timeout unless
// TORCH_NCCL_ASYNC_ERROR_HANDLING=0, and Work::wait(timeout) only throws on a timeout with
// TORCH_NCCL_BLOCKING_WAIT=1. ProcessGroupNCCL reads both when it is constructed; package dist
// sets them (the C ABI documents that the caller must).
#ifdef GOREC_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace ct {
namespace dist {

// The NCCL side of a group; device < 0: the group has none.
struct nccl_backend {
#ifdef GOREC_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg;
#endif
  int device = -1;
};

inline bool nccl_built() {
#ifdef GOREC_NCCL
  return true;
#else
  return false;
#endif
}

// Starts n on the store's keys under "gorec/nccl" for cfg's rank, on CUDA device cfg.device,
// and connects NCCL's communicator now, so that a failure shows at the start rather than in
// the first collective.
inline void start_nccl(nccl_backend &n, const c10::intrusive_ptr<c10d::Store> &store,
                       const ct_dist_config &cfg, std::chrono::milliseconds timeout) {
#ifdef GOREC_NCCL
  const int count = at::hasCUDA() ? static_cast<int>(c10::cuda::device_count()) : 0;
  if (cfg.device < 0 || cfg.device >= count) {
    throw arg_error("nccl backend: device cuda:" + std::to_string(cfg.device) +
                    " does not exist (this machine has " + std::to_string(count) +
                    " CUDA devices)");
  }
  const at::Device device(at::kCUDA, static_cast<c10::DeviceIndex>(cfg.device));
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  n.pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(
      c10::make_intrusive<c10d::PrefixStore>("gorec/nccl", store), cfg.rank, cfg.world_size,
      opts);
  n.pg->setBoundDeviceId(device);
  n.device = cfg.device;
  n.pg->eagerConnectSingleDevice(device);
#else
  (void)n, (void)store, (void)cfg, (void)timeout;
  throw arg_error("the nccl backend is not in this build");  // check_config says more
#endif
}

// Releases n: a broken group's communicators are aborted (their peers may be gone), a sound
// one's shut down.
inline void stop_nccl(nccl_backend &n, bool broken) {
#ifdef GOREC_NCCL
  if (!n.pg) return;
  try {
    if (broken) {
      n.pg->abort();
    } else {
      n.pg->shutdown();
    }
  } catch (...) {
    // nothing more can be released
  }
  n.pg.reset();
#else
  (void)n, (void)broken;
#endif
}

// Checks that t can go through the group's NCCL backend: a CUDA tensor of its device.
inline void check_nccl_tensor(const nccl_backend &n, const at::Tensor &t, const char *what) {
  if (n.device < 0) {
    throw arg_error(std::string(what) + ": a CUDA tensor needs a group with the nccl backend");
  }
  if (t.device().index() != n.device) {
    throw arg_error(std::string(what) + ": the tensor is on " + t.device().str() +
                    ", the group's NCCL device is cuda:" + std::to_string(n.device));
  }
  switch (t.scalar_type()) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kInt:
    case at::kLong:
    case at::kChar:
    case at::kByte:
    case at::kBool:
      return;
    default:
      throw arg_error(std::string(what) + ": NCCL does not support dtype " +
                      std::string(c10::toString(t.scalar_type())));
  }
}

// Runs issue on the process group that moves t: NCCL's for a CUDA tensor, else Gloo's.
template <class Gloo, class Issue>
c10::intrusive_ptr<c10d::Work> on_backend(Gloo &gloo, nccl_backend &n, const at::Tensor &t,
                                          Issue &&issue) {
#ifdef GOREC_NCCL
  if (t.is_cuda()) return issue(*n.pg);
#else
  (void)n, (void)t;
#endif
  return issue(gloo);
}

}  // namespace dist
}  // namespace ct
