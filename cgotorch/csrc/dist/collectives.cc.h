// collectives.cc.h: the collectives of a ct_dist_group (cgotorch.h, "Process groups"):
// all-reduce, broadcast, all-gather, all-to-all with uneven splits and barrier. Compiled
// through unity_dist.cc after group.cc.h.
//
// CUDA tensors go through the group's NCCL backend (nccl.cc.h), CPU tensors through Gloo;
// the headers always go through Gloo, and say which device kind each rank's tensor is on.
//
// Ranks agree before data moves. Gloo trusts its callers: ranks that pass different sizes make
// its I/O thread throw (gloo::EnforceNotMet), which ends the process. So every collective
// starts with an exchange of a fixed-size header (the collective, the dtype and shape, the
// reduction or root, the all-to-all splits, whether this rank's arguments are valid), every
// rank's to every other rank. Every rank then sees every header and takes the same decision:
// go on, or fail with "mismatch: " (or "invalid argument: " on the rank whose arguments were
// wrong), all ranks still in step. The header exchange is the whole of a barrier. Only a
// failure of Gloo itself (a timeout, a peer that failed) breaks the group.

namespace ct {
namespace dist {

struct mismatch_error : prefixed_error<CT_ERR_MISMATCH> {
  explicit mismatch_error(const std::string &m) : prefixed_error("mismatch: ", m) {}
};

// The tag of the headers' point-to-point messages. One tag for every exchange: Gloo matches a
// pair's messages of one tag in the order they were posted, the order every rank runs them in.
constexpr int kHeaderTag = 0x67726563;  // "grec"
// The tag of the all-to-all's point-to-point messages of CPU rows.
constexpr int kDataTag = 0x67726564;
// The tag of the direct all-reduce's messages.
constexpr int kReduceTag = 0x67726565;
// The most bytes a rank sends in a direct all-reduce (its tensor to each peer); a larger
// reduction goes through Gloo's ring, whose traffic does not grow with the ranks.
constexpr int64_t kDirectReduceBytes = 1 << 20;

enum class Kind : int64_t { all_reduce = 1, broadcast, all_gather, all_to_all, barrier, gather_ints };

inline const char *kind_name(int64_t k) {
  switch (static_cast<Kind>(k)) {
    case Kind::all_reduce:
      return "all-reduce";
    case Kind::broadcast:
      return "broadcast";
    case Kind::all_gather:
      return "all-gather";
    case Kind::all_to_all:
      return "all-to-all";
    case Kind::barrier:
      return "barrier";
    case Kind::gather_ints:
      return "all-gather of integers";
  }
  return "an unknown collective";
}

// A rank's header: the fields below, then world_size all-to-all send splits. Its length is the
// same for every collective (a rank in another collective must still send as many bytes).
struct Header {
  enum : int { kind, valid, dtype, arg, cuda, ndim, dims, num_dims = 8,
               shape_hash = dims + num_dims, splits };
  std::vector<int64_t> v;
  explicit Header(int world, Kind k) : v(splits + world, 0) { v[kind] = static_cast<int64_t>(k); }
  // Describes t: device kind, dtype, rank, the first num_dims sizes, and a hash of every size
  // from first_dim on (the sizes that must match across ranks).
  void describe(const at::Tensor &t, int first_dim) {
    v[cuda] = t.is_cuda() ? 1 : 0;
    v[dtype] = static_cast<int64_t>(t.scalar_type());
    v[ndim] = t.dim();
    uint64_t h = 1469598103934665603ull;
    for (int64_t d = 0; d < t.dim(); d++) {
      if (d < num_dims) v[dims + d] = t.size(d);
      if (d >= first_dim) h = (h ^ static_cast<uint64_t>(t.size(d))) * 1099511628211ull;
    }
    v[shape_hash] = static_cast<int64_t>(h);
  }
};

static_assert(Header::num_dims == CT_DIST_GATHER_INTS_MAX,
              "ct_dist_all_gather_ints carries its integers in the header's dims");

// "float32 [4, 2]" (or "cuda float32 [4, 2]") for a rank's header.
inline std::string tensor_desc(const int64_t *h) {
  std::string s = h[Header::cuda] != 0 ? "cuda " : "";
  s += c10::toString(static_cast<at::ScalarType>(h[Header::dtype]));
  s += " [";
  for (int64_t d = 0; d < h[Header::ndim]; d++) {
    if (d > 0) s += ", ";
    s += d < Header::num_dims ? std::to_string(h[Header::dims + d]) : "...";
  }
  return s + "]";
}

// The group behind h; throws if h is NULL or the group is broken.
inline ct_dist_group_s &usable(ct_dist_group h) {
  if (h == nullptr || !h->pg) throw closed_error("process group handle is NULL");
  if (!h->broken.empty()) throw broken_error(h->broken);
  return *h;
}

// Runs body, which moves a collective's data and waits for it within the group's timeout. A
// failure breaks the group: the tensors in keep live on (retained), since Gloo's threads may
// still use them.
template <class Body>
void guarded(ct_dist_group_s &g, const char *what, const std::vector<at::Tensor> &keep,
             Body &&body) {
  try {
    body();
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

// Waits for a collective's work within the group's timeout (see guarded).
inline void wait(ct_dist_group_s &g, const char *what, const std::vector<at::Tensor> &keep,
                 const std::function<c10::intrusive_ptr<c10d::Work>()> &issue) {
  guarded(g, what, keep, [&] { issue()->wait(g.timeout); });
}

// A message of point_to_point: a contiguous CPU tensor and the peer it goes to or comes from.
struct Message {
  at::Tensor t;
  int peer;
};

// Sends and receives messages point to point on the calling thread (c10d's send and recv on
// Gloo's pairs, with tag), every send first, all within one timeout. A Gloo collective would
// run on a worker thread of the process group, woken for each call and waking the caller at
// its end; these run on the calling thread, which Gloo's I/O thread wakes when the last message
// has arrived. The sends go first, as in Gloo's ring all-gather: with the receives posted first
// the exchange measured slower, and by turns fast and stalled for milliseconds
// (docs/performance.md has the figures). Gloo matches a pair's messages of one tag in the
// order they were posted, the order every rank runs them in. A failure breaks the group (see
// guarded); the buffers and requests then live on with it.
inline void point_to_point(ct_dist_group_s &g, const char *what, int tag,
                           const std::vector<Message> &sends, const std::vector<Message> &recvs) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  std::vector<at::Tensor> keep;
  for (const auto &m : sends) keep.push_back(m.t);
  for (const auto &m : recvs) keep.push_back(m.t);
  try {
    guarded(g, what, keep, [&] {
      const auto deadline = std::chrono::steady_clock::now() + g.timeout;
      for (const auto &m : sends) {
        std::vector<at::Tensor> v{m.t};
        works.push_back(g.pg->send(v, m.peer, tag));
      }
      for (const auto &m : recvs) {
        std::vector<at::Tensor> v{m.t};
        works.push_back(g.pg->recv(v, m.peer, tag));
      }
      for (auto &w : works) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (!w->wait(std::max(left, std::chrono::milliseconds(1)))) {
          throw std::runtime_error(std::string(what) + " was aborted");
        }
      }
    });
  } catch (...) {
    // Gloo's pairs may still hold the buffers of the sends and receives not done.
    g.retained_work.insert(g.retained_work.end(), works.begin(), works.end());
    throw;
  }
}

// The headers of every rank: [world_size, header size], each rank's sent to every other rank
// point to point (a lone rank makes no call).
inline at::Tensor exchange(ct_dist_group_s &g, const char *what, const Header &mine) {
  const int64_t n = static_cast<int64_t>(mine.v.size());
  at::Tensor all = at::empty({g.size, n}, at::kLong);
  std::copy(mine.v.begin(), mine.v.end(), all.data_ptr<int64_t>() + g.rank * n);
  std::vector<Message> sends, recvs;
  for (int r = 0; r < g.size; r++) {
    if (r == g.rank) continue;
    sends.push_back({all[g.rank], r});
    recvs.push_back({all[r], r});
  }
  if (!sends.empty()) point_to_point(g, what, kHeaderTag, sends, recvs);
  return all;
}

// The all-to-all of CPU tensors (src contiguous; splits agreed): rows go to and come from
// each peer point to point on the calling thread, this rank's own rows by a copy; empty
// blocks are not sent (both ends know they are empty).
inline void all_to_all_cpu(ct_dist_group_s &g, const at::Tensor &src, const at::Tensor &dst,
                           const std::vector<int64_t> &send, const std::vector<int64_t> &recv) {
  std::vector<Message> sends, recvs;
  int64_t from = 0, to = 0;
  for (int r = 0; r < g.size; r++) {
    at::Tensor out = src.narrow(0, from, send[r]), in = dst.narrow(0, to, recv[r]);
    if (r == g.rank) {
      in.copy_(out);
    } else {
      if (send[r] > 0) sends.push_back({out, r});
      if (recv[r] > 0) recvs.push_back({in, r});
    }
    from += send[r];
    to += recv[r];
  }
  if (!sends.empty() || !recvs.empty()) point_to_point(g, "all-to-all", kDataTag, sends, recvs);
}

// Runs one collective of kind k on h under its mutex. prepare validates this rank's arguments
// and fills its header (throwing arg_error when they are wrong); agree checks every rank's
// header (rows of all) against this rank's; issue runs the data movement (none for a barrier).
template <class Prepare, class Agree>
void run(ct_dist_group h, Kind k, Prepare &&prepare, Agree &&agree,
         const std::function<void(ct_dist_group_s &)> &issue) {
  if (h == nullptr) throw closed_error("process group handle is NULL");
  std::lock_guard<std::mutex> lock(h->mu);
  ct_dist_group_s &g = usable(h);
  const char *what = kind_name(static_cast<int64_t>(k));
  Header mine(g.size, k);
  std::string refused;
  int32_t refused_code = CT_ERR_INVALID_ARGUMENT;
  try {
    prepare(mine);
    mine.v[Header::valid] = 1;
  } catch (const std::exception &e) {
    refused = message_of(e);
    refused_code = code_of(e);
    if (refused_code != CT_ERR_INVALID_ARGUMENT && refused_code != CT_ERR_CLOSED) {
      refused = "invalid argument: " + std::string(what) + ": " + refused;
      refused_code = CT_ERR_INVALID_ARGUMENT;
    }
    mine = Header(g.size, k);  // valid = 0: the peers learn that this rank refused its arguments
  }
  const at::Tensor all = exchange(g, what, mine);
  if (!refused.empty()) throw coded_error(refused_code, refused);
  const int64_t *rows = all.data_ptr<int64_t>();
  const int64_t stride = all.size(1);
  for (int r = 0; r < g.size; r++) {
    const int64_t *other = rows + r * stride;
    if (other[Header::kind] != mine.v[Header::kind]) {
      throw mismatch_error("rank " + std::to_string(g.rank) + " runs " + what + ", rank " +
                           std::to_string(r) + " runs " + kind_name(other[Header::kind]) +
                           " (every rank must call the same collectives in the same order)");
    }
    if (other[Header::valid] != 1) {
      throw mismatch_error(std::string(what) + ": rank " + std::to_string(r) +
                           " refused its arguments (its error says why)");
    }
  }
  agree(rows, stride);
  issue(g);
}

// Checks that every rank's header has field f equal to this rank's.
inline void same_field(const int64_t *rows, int64_t stride, int rank, int size, int f,
                       const std::string &what) {
  for (int r = 0; r < size; r++) {
    if (rows[r * stride + f] != rows[rank * stride + f]) {
      throw mismatch_error(what + ": rank " + std::to_string(rank) + " has " +
                           std::to_string(rows[rank * stride + f]) + ", rank " +
                           std::to_string(r) + " has " + std::to_string(rows[r * stride + f]));
    }
  }
}

// Checks that every rank's tensor has this rank's dtype and shape (from dimension 1 on when
// trailing: the all-to-all's rows differ).
inline void same_tensor(const int64_t *rows, int64_t stride, int rank, int size, const char *what,
                        bool trailing) {
  const int64_t *mine = rows + rank * stride;
  for (int r = 0; r < size; r++) {
    const int64_t *other = rows + r * stride;
    if (other[Header::cuda] != mine[Header::cuda] || other[Header::dtype] != mine[Header::dtype] ||
        other[Header::ndim] != mine[Header::ndim] ||
        other[Header::shape_hash] != mine[Header::shape_hash]) {
      throw mismatch_error(std::string(what) + ": rank " + std::to_string(rank) + " has " +
                           tensor_desc(mine) + ", rank " + std::to_string(r) + " has " +
                           tensor_desc(other) +
                           (trailing ? " (device kind, dtype and sizes after the first must match)"
                                     : " (device kind, dtype and shape must match)"));
    }
  }
}

// t as its backend takes it, contiguous: a dense CPU tensor of a type Gloo reduces and moves,
// or a dense CUDA tensor of the group's NCCL device and a type NCCL moves.
inline at::Tensor data_input(const ct_dist_group_s &g, ct_tensor h, const char *what) {
  const at::Tensor &t = get(h);
  if (t.layout() != at::kStrided) throw arg_error(std::string(what) + ": the tensor must be dense");
  if (t.is_cuda()) {
    check_nccl_tensor(g.nccl, t, what);
    return t.contiguous();
  }
  if (!t.device().is_cpu()) {
    throw arg_error(std::string(what) + ": the tensor must be on the CPU or a CUDA device");
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
      throw arg_error(std::string(name) + " overflow");
    }
    sum += splits[i];
  }
  return sum;
}

// Whether an all-reduce of t on g goes direct (all_reduce_direct): a small dense CPU tensor
// of a type that at::add and at::maximum reduce as Gloo does (bool and half are left to Gloo).
inline bool direct_reduce(const ct_dist_group_s &g, const at::Tensor &t) {
  const auto type = t.scalar_type();
  return t.device().is_cpu() && type != at::kBool && type != at::kHalf &&
         t.nbytes() * static_cast<int64_t>(g.size - 1) <= kDirectReduceBytes;
}

// The all-reduce of a small CPU tensor (buf, contiguous, reduced in place), on the calling
// thread: every rank sends buf to every other rank point to point and reduces all of them in
// rank order (a sum, or the maximum with max), so every rank holds the same bits. For the
// small tensors of a step's dense gradients one exchange costs less than Gloo's algorithms on
// its worker thread.
inline void all_reduce_direct(ct_dist_group_s &g, at::Tensor &buf, bool max) {
  std::vector<at::Tensor> of(g.size);
  std::vector<Message> sends, recvs;
  for (int r = 0; r < g.size; r++) {
    if (r == g.rank) continue;
    of[r] = at::empty_like(buf);
    sends.push_back({buf, r});
    recvs.push_back({of[r], r});
  }
  point_to_point(g, "all-reduce", kReduceTag, sends, recvs);
  of[g.rank] = buf;
  at::Tensor acc = of[0].clone();
  for (int r = 1; r < g.size; r++) {
    if (max) {
      at::maximum_out(acc, acc, of[r]);
    } else {
      acc.add_(of[r]);
    }
  }
  buf.copy_(acc);
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
        g, d::Kind::all_reduce,
        [&](d::Header &h) {
          buf = d::data_input(*g, t, "all-reduce");
          red = d::reduce_op(op, buf);
          buf = buf.clone();
          h.describe(buf, 0);
          h.v[d::Header::arg] = op;
        },
        [&](const int64_t *rows, int64_t stride) {
          d::same_tensor(rows, stride, g->rank, g->size, "all-reduce", false);
          d::same_field(rows, stride, g->rank, g->size, d::Header::arg, "all-reduce's reduction");
        },
        [&](ct_dist_group_s &grp) {
          // a lone rank's reduction is its own tensor; an empty one is empty (Gloo divides by
          // the element count: SIGFPE)
          if (grp.size == 1 || buf.numel() == 0) return;
          if (d::direct_reduce(grp, buf)) {
            d::all_reduce_direct(grp, buf, op == CT_DIST_MAX);
            return;
          }
          d::wait(grp, "all-reduce", {buf}, [&] {
            std::vector<at::Tensor> v{buf};
            c10d::AllreduceOptions o;
            o.reduceOp = red;
            o.timeout = grp.timeout;
            return d::on_backend(*grp.pg, grp.nccl, buf,
                                 [&](auto &pg) { return pg.allreduce(v, o); });
          });
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
        g, d::Kind::broadcast,
        [&](d::Header &h) {
          buf = d::data_input(*g, t, "broadcast").clone();
          if (root < 0 || root >= g->size) {
            throw ct::arg_error("broadcast root " + std::to_string(root) + " is not in 0.." +
                                std::to_string(g->size - 1));
          }
          h.describe(buf, 0);
          h.v[d::Header::arg] = root;
        },
        [&](const int64_t *rows, int64_t stride) {
          d::same_tensor(rows, stride, g->rank, g->size, "broadcast", false);
          d::same_field(rows, stride, g->rank, g->size, d::Header::arg, "broadcast's root");
        },
        [&](ct_dist_group_s &grp) {
          if (grp.size == 1 || buf.numel() == 0) return;  // a lone rank is the root
          d::wait(grp, "broadcast", {buf}, [&] {
            std::vector<at::Tensor> v{buf};
            c10d::BroadcastOptions o;
            o.rootRank = root;
            o.timeout = grp.timeout;
            return d::on_backend(*grp.pg, grp.nccl, buf,
                                 [&](auto &pg) { return pg.broadcast(v, o); });
          });
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
        g, d::Kind::all_gather,
        [&](d::Header &h) {
          in = d::data_input(*g, t, "all-gather");
          if (in.dim() == 0) in = in.reshape({1});
          h.describe(in, 0);
        },
        [&](const int64_t *rows, int64_t stride) {
          d::same_tensor(rows, stride, g->rank, g->size, "all-gather", false);
        },
        [&](ct_dist_group_s &grp) {
          if (grp.size == 1) {  // a lone rank gathers its own tensor
            outs[0].push_back(in);  // (the cat below copies it)
            return;
          }
          for (int r = 0; r < grp.size; r++) outs[0].push_back(at::empty_like(in));
          if (in.numel() == 0) return;  // empty: nothing moves (Gloo would divide by zero)
          std::vector<at::Tensor> keep = outs[0];
          keep.push_back(in);
          d::wait(grp, "all-gather", keep, [&] {
            std::vector<at::Tensor> v{in};
            c10d::AllgatherOptions o;
            o.timeout = grp.timeout;
            return d::on_backend(*grp.pg, grp.nccl, in,
                                 [&](auto &pg) { return pg.allgather(outs, v, o); });
          });
        });
    *out = ct::wrap(at::cat(outs[0], 0));
  });
}

ct_error ct_dist_all_to_all(ct_tensor *out, int64_t *recv_splits, ct_dist_group g, ct_tensor in,
                            const int64_t *send_splits, int32_t n) {
  return ct::guard([&] {
    ct::need_out(out);
    ct::need_out(recv_splits);
    namespace d = ct::dist;
    at::NoGradGuard no_grad;
    at::Tensor src, dst;
    std::vector<int64_t> send, recv;
    d::run(
        g, d::Kind::all_to_all,
        [&](d::Header &h) {
          src = d::data_input(*g, in, "all-to-all");
          if (n != g->size) {
            throw ct::arg_error("all-to-all: " + std::to_string(n) + " splits for a world of " +
                                std::to_string(g->size));
          }
          if (src.dim() < 1) throw ct::arg_error("all-to-all of a 0-d tensor");
          const int64_t sent = d::checked_sum(send_splits, n, "all-to-all: the send splits");
          if (sent != src.size(0)) {
            throw ct::arg_error("all-to-all: the send splits add up to " + std::to_string(sent) +
                                ", the input has " + std::to_string(src.size(0)) + " rows");
          }
          h.describe(src, 1);
          std::copy(send_splits, send_splits + n, h.v.begin() + d::Header::splits);
          send.assign(send_splits, send_splits + n);
        },
        [&](const int64_t *rows, int64_t stride) {
          d::same_tensor(rows, stride, g->rank, g->size, "all-to-all", true);
          for (int r = 0; r < g->size; r++) {
            recv.push_back(rows[r * stride + d::Header::splits + g->rank]);
          }
        },
        [&](ct_dist_group_s &grp) {
          std::vector<int64_t> shape = src.sizes().vec();
          shape[0] = std::accumulate(recv.begin(), recv.end(), int64_t{0});
          dst = at::empty(shape, src.options());
          if (src.device().is_cpu()) {
            d::all_to_all_cpu(grp, src, dst, send, recv);
            return;
          }
          d::wait(grp, "all-to-all", {src, dst}, [&] {
            // alltoall_base moves its split vectors out (they are empty afterwards): copies.
            std::vector<int64_t> send_copy = send, recv_copy = recv;
            c10d::AllToAllOptions o;
            o.timeout = grp.timeout;
            return d::on_backend(*grp.pg, grp.nccl, src, [&](auto &pg) {
              return pg.alltoall_base(dst, src, recv_copy, send_copy, o);
            });
          });
        });
    std::copy(recv.begin(), recv.end(), recv_splits);
    *out = ct::wrap(std::move(dst));
  });
}

ct_error ct_dist_barrier(ct_dist_group g) {
  return ct::guard([&] {
    namespace d = ct::dist;
    d::run(
        g, d::Kind::barrier, [](d::Header &) {}, [](const int64_t *, int64_t) {},
        [](ct_dist_group_s &) {});  // the header exchange is the barrier
  });
}

ct_error ct_dist_all_gather_ints(int64_t *out, ct_dist_group g, const int64_t *v, int32_t n) {
  return ct::guard([&] {
    ct::need_out(out);
    namespace d = ct::dist;
    std::vector<int64_t> got;
    d::run(
        g, d::Kind::gather_ints,
        [&](d::Header &h) {
          if (n < 0 || n > CT_DIST_GATHER_INTS_MAX) {
            throw ct::arg_error("all-gather of " + std::to_string(n) + " integers (at most " +
                                std::to_string(CT_DIST_GATHER_INTS_MAX) + ")");
          }
          if (n > 0 && v == nullptr) throw ct::arg_error("all-gather of integers: v is NULL");
          h.v[d::Header::ndim] = n;  // the values ride in the header's fixed-size fields
          std::copy(v, v + n, h.v.begin() + d::Header::dims);
        },
        [&](const int64_t *rows, int64_t stride) {
          d::same_field(rows, stride, g->rank, g->size, d::Header::ndim,
                        "all-gather of integers: the count");
          for (int r = 0; r < g->size; r++) {
            got.insert(got.end(), rows + r * stride + d::Header::dims,
                       rows + r * stride + d::Header::dims + n);
          }
        },
        [](ct_dist_group_s &) {});  // the header exchange moved them
    std::copy(got.begin(), got.end(), out);
  });
}

}  // extern "C"
