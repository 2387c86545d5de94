// dist_collectives.hxx: the collectives of a ct_dist_group (cgotorch.h, "Process groups"):
// all-reduce, broadcast, all-gather, all-to-all with uneven splits and barrier, each one call of
// c10d's ProcessGroupGloo waited for within the group's timeout. Inputs are handed to Gloo as
// they are (contiguous) and never written; results are fresh tensors. Compiled through
// unity_dist.cc after dist_group.hxx.

namespace ct {
namespace dist {

// The group behind h; throws if h is NULL or the group is broken.
inline ct_dist_group_s &usable(ct_dist_group h) {
  if (h == nullptr || !h->pg) throw closed_error("process group handle is NULL");
  if (!h->broken.empty()) throw broken_error(h->broken);
  return *h;
}

// Runs one collective on g under its mutex. check validates the arguments (nothing is sent
// yet) and issue starts the collective; its Work is waited for within the timeout. Any failure
// breaks the group: a rank whose arguments are refused skips the collective its peers run, so
// they are out of step as surely as after a timeout. The tensors in keep (the collective's
// inputs and outputs) outlive a failure (retained), since Gloo's threads may still use them.
template <class Check, class Issue>
void run(ct_dist_group h, const char *what, Check &&check, Issue &&issue) {
  if (h == nullptr) throw closed_error("process group handle is NULL");
  std::lock_guard<std::mutex> lock(h->mu);
  ct_dist_group_s &g = usable(h);
  try {
    check();
  } catch (const std::exception &e) {
    g.broken = std::string(what) + " was skipped by rank " + std::to_string(g.rank) + ": " +
               message_of(e);
    throw;
  }
  std::vector<at::Tensor> keep;
  try {
    c10::intrusive_ptr<c10d::Work> work = issue(keep);
    work->wait(g.timeout);
  } catch (...) {
    g.retained.insert(g.retained.end(), keep.begin(), keep.end());
    try {
      rethrow_classified(what);
    } catch (const std::exception &e) {
      g.broken = e.what();
      throw;
    }
  }
}

// t as Gloo takes it: a dense CPU tensor of a type Gloo reduces and moves, contiguous.
inline at::Tensor gloo_input(ct_tensor h, const char *what) {
  const at::Tensor &t = get(h);
  if (!t.device().is_cpu() || t.layout() != at::kStrided) {
    throw arg_error(std::string(what) + ": the tensor must be a dense CPU tensor");
  }
  switch (t.scalar_type()) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kInt:
    case at::kLong:
    case at::kChar:
    case at::kByte:
    case at::kBool:
      break;
    default:
      throw arg_error(std::string(what) + ": Gloo does not support dtype " +
                      std::string(c10::toString(t.scalar_type())));
  }
  return t.contiguous();
}

inline c10d::ReduceOp reduce_op(int32_t op, const at::Tensor &t) {
  switch (op) {
    case CT_DIST_SUM:
      return c10d::ReduceOp::SUM;
    case CT_DIST_MAX:
      if (t.scalar_type() == at::kBool) throw arg_error("all-reduce max of bool tensors");
      return c10d::ReduceOp::MAX;
    case CT_DIST_AVG:  // Gloo has no average: a sum, then a division
      if (!at::isFloatingType(t.scalar_type())) {
        throw arg_error("all-reduce average of a " + std::string(c10::toString(t.scalar_type())) +
                        " tensor (floating-point tensors only)");
      }
      return c10d::ReduceOp::SUM;
    default:
      throw arg_error("unknown reduction " + std::to_string(op));
  }
}

inline int64_t checked_sum(const int64_t *splits, int32_t n, const char *name) {
  if (n > 0 && splits == nullptr) throw arg_error(std::string(name) + " is NULL");
  int64_t sum = 0;
  for (int32_t i = 0; i < n; i++) {
    if (splits[i] < 0) throw arg_error(std::string(name) + " has a negative split");
    if (splits[i] > std::numeric_limits<int64_t>::max() - sum) {
      throw arg_error(std::string(name) + " overflows");
    }
    sum += splits[i];
  }
  return sum;
}

}  // namespace dist
}  // namespace ct

extern "C" {

ct_error ct_dist_all_reduce(ct_tensor *out, ct_dist_group g, ct_tensor t, int32_t op) {
  return ct::guard([&] {
    ct::need_out(out);
    namespace d = ct::dist;
    at::NoGradGuard no_grad;
    at::Tensor buf;
    c10d::ReduceOp red;
    d::run(
        g, "all-reduce",
        [&] {
          buf = d::gloo_input(t, "all-reduce").clone();
          red = d::reduce_op(op, buf);
        },
        [&](std::vector<at::Tensor> &keep) {
          keep.push_back(buf);
          std::vector<at::Tensor> v{buf};
          c10d::AllreduceOptions o;
          o.reduceOp = red;
          o.timeout = g->timeout;
          return g->pg->allreduce(v, o);
        });
    if (op == CT_DIST_AVG) buf.div_(g->size);
    *out = ct::wrap(std::move(buf));
  });
}

ct_error ct_dist_broadcast(ct_tensor *out, ct_dist_group g, ct_tensor t, int32_t root) {
  return ct::guard([&] {
    ct::need_out(out);
    namespace d = ct::dist;
    at::NoGradGuard no_grad;
    at::Tensor buf;
    d::run(
        g, "broadcast",
        [&] {
          buf = d::gloo_input(t, "broadcast").clone();
          if (root < 0 || root >= g->size) {
            throw ct::arg_error("broadcast root " + std::to_string(root) + " is not in 0.." +
                                std::to_string(g->size - 1));
          }
        },
        [&](std::vector<at::Tensor> &keep) {
          keep.push_back(buf);
          std::vector<at::Tensor> v{buf};
          c10d::BroadcastOptions o;
          o.rootRank = root;
          o.timeout = g->timeout;
          return g->pg->broadcast(v, o);
        });
    *out = ct::wrap(std::move(buf));
  });
}

ct_error ct_dist_all_gather(ct_tensor *out, ct_dist_group g, ct_tensor t) {
  return ct::guard([&] {
    ct::need_out(out);
    namespace d = ct::dist;
    at::NoGradGuard no_grad;
    at::Tensor in;
    std::vector<std::vector<at::Tensor>> outs(1);
    d::run(
        g, "all-gather",
        [&] {
          in = d::gloo_input(t, "all-gather");
          if (in.dim() == 0) in = in.reshape({1});
          for (int r = 0; r < g->size; r++) outs[0].push_back(at::empty_like(in));
        },
        [&](std::vector<at::Tensor> &keep) {
          keep.push_back(in);
          keep.insert(keep.end(), outs[0].begin(), outs[0].end());
          std::vector<at::Tensor> v{in};
          c10d::AllgatherOptions o;
          o.timeout = g->timeout;
          return g->pg->allgather(outs, v, o);
        });
    *out = ct::wrap(at::cat(outs[0], 0));
  });
}

ct_error ct_dist_all_to_all(ct_tensor *out, ct_dist_group g, ct_tensor in,
                            const int64_t *send_splits, const int64_t *recv_splits, int32_t n) {
  return ct::guard([&] {
    ct::need_out(out);
    namespace d = ct::dist;
    at::NoGradGuard no_grad;
    at::Tensor src, dst;
    std::vector<int64_t> send, recv;
    d::run(
        g, "all-to-all",
        [&] {
          src = d::gloo_input(in, "all-to-all");
          if (n != g->size) {
            throw ct::arg_error("all-to-all: " + std::to_string(n) + " splits for a world of " +
                                std::to_string(g->size));
          }
          if (src.dim() < 1) throw ct::arg_error("all-to-all of a 0-d tensor");
          const int64_t sent = d::checked_sum(send_splits, n, "send splits");
          const int64_t received = d::checked_sum(recv_splits, n, "receive splits");
          if (sent != src.size(0)) {
            throw ct::arg_error("all-to-all: the send splits add up to " + std::to_string(sent) +
                                ", the input has " + std::to_string(src.size(0)) + " rows");
          }
          send.assign(send_splits, send_splits + n);
          recv.assign(recv_splits, recv_splits + n);
          std::vector<int64_t> shape = src.sizes().vec();
          shape[0] = received;
          dst = at::empty(shape, src.options());
        },
        [&](std::vector<at::Tensor> &keep) {
          keep.push_back(src);
          keep.push_back(dst);
          // alltoall_base moves its split vectors out (they are empty afterwards): copies.
          std::vector<int64_t> send_copy = send, recv_copy = recv;
          c10d::AllToAllOptions o;
          o.timeout = g->timeout;
          return g->pg->alltoall_base(dst, src, recv_copy, send_copy, o);
        });
    *out = ct::wrap(std::move(dst));
  });
}

ct_error ct_dist_barrier(ct_dist_group g) {
  return ct::guard([&] {
    ct::dist::run(
        g, "barrier", [] {},
        [&](std::vector<at::Tensor> &) {
          c10d::BarrierOptions o;
          o.timeout = g->timeout;
          return g->pg->barrier(o);
        });
  });
}

}  // extern "C"
