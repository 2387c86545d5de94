// prefetch.cc.h: prefetches (ct_table_prefetch / _wait / _discard): lookups queued on a
// process-wide pool of two worker threads, whose rows a caller waits for by id.
// Compiled as part of unity_table.cc, after table.cc.h (class Table) and the files listed there.

#include <pthread.h>

namespace ct {
namespace table {

namespace {

// ---- the prefetch worker pool ---------------------------------------------------------------

class Pool {
 public:
  static Pool &get() {
    static Pool *p = make();  // never destroyed: its threads outlive static destructors
    // At exit (this static is destroyed before libtorch's, which were built earlier), let the
    // tasks in flight finish, so that no worker touches libtorch while it is being torn down.
    static struct Drain {
      Pool *p;
      ~Drain() { p->drain(std::chrono::seconds(10)); }
    } drain{p};
    return *p;
  }
  // Waits until no task is queued or running (at most timeout).
  void drain(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu_);
    idle_.wait_for(l, timeout, [this] { return q_.empty() && running_ == 0; });
  }
  void submit(std::function<void()> f) {
    {
      std::lock_guard<std::mutex> l(mu_);
      q_.push_back(std::move(f));
      start_locked();
    }
    cv_.notify_one();
  }
  // Starts the threads that queued tasks need (a forked child has none: see make).
  void kick() {
    std::lock_guard<std::mutex> l(mu_);
    start_locked();
  }

 private:
  static constexpr int kThreads = 2;
  static Pool *&instance() {
    static Pool *p = nullptr;
    return p;
  }
  // A fork (a PyTorch DataLoader's worker) gives the child none of the pool's threads. The
  // lock is held across the fork, so that the child's copy of the queue is whole; the child
  // then counts no thread and no task running, and starts threads at its next submit or wait.
  // A task that was running in the parent at the fork never ends in the child.
  static Pool *make() {
    Pool *p = new Pool();
    instance() = p;
    pthread_atfork([] { instance()->mu_.lock(); }, [] { instance()->mu_.unlock(); },
                   [] {
                     Pool *q = instance();
                     q->started_ = 0;
                     q->running_ = 0;
                     new (&q->cv_) std::condition_variable();  // (the parent's waiters are gone)
                     new (&q->idle_) std::condition_variable();
                     q->mu_.unlock();
                   });
    return p;
  }
  void start_locked() {
    for (; started_ < kThreads && !q_.empty(); started_++) std::thread([this] { run(); }).detach();
  }
  void run() {
    for (;;) {
      std::function<void()> f;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [this] { return !q_.empty(); });
        f = std::move(q_.front());
        q_.pop_front();
        running_++;
      }
      f();  // never throws: tasks catch everything
      f = nullptr;
      {
        std::lock_guard<std::mutex> l(mu_);
        running_--;
      }
      idle_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> q_;
  int started_ = 0;
  int running_ = 0;
};

}  // namespace

// ---- prefetch -------------------------------------------------------------------------------

int64_t Table::prefetch(const Keys &k, int32_t mode) {
  check_mode(mode);
  check_open();
  auto st = std::make_shared<Prefetch>();
  Keys copy = k;
  copy.host = k.host.clone();  // the caller may change or free its keys
  int64_t id;
  {
    std::lock_guard<std::mutex> l(prefetches_.mu);
    check_open();  // under prefetches_.mu: close cannot miss this task
    id = prefetches_.next++;
    prefetches_.pending.emplace(id, st);
    prefetches_.tasks++;
  }
  std::shared_ptr<Table> self = shared_from_this();
  auto task = [self, st, copy, mode]() mutable {
    at::Tensor rows, found;
    std::string err;
    int32_t code = CT_ERR_TORCH;
    try {
      ct::sync_thread_count();  // this worker thread follows SetNumThreads too
      c10::NoGradGuard no_grad;
      std::tie(rows, found) = self->read(copy, mode);
    } catch (const c10::Error &e) {
      err = e.what_without_backtrace();
    } catch (const std::exception &e) {
      err = e.what();
      code = ct::code_of(e);
    } catch (...) {
      err = "unknown C++ exception";
    }
    {
      std::lock_guard<std::mutex> l(st->mu);
      st->rows = std::move(rows);
      st->found = std::move(found);
      st->error = std::move(err);
      st->error_code = code;
      st->done = true;
    }
    st->cv.notify_all();
    // Drop every tensor before telling close that this task is over.
    st.reset();
    copy = Keys();
    Table *t = self.get();
    {
      std::lock_guard<std::mutex> l(t->prefetches_.mu);
      t->prefetches_.tasks--;
    }
    t->prefetches_.cv.notify_all();
    self.reset();  // after a close this may destroy the table: its tensors are gone already
  };
  try {
    Pool::get().submit(std::move(task));
  } catch (...) {
    {
      std::lock_guard<std::mutex> l(prefetches_.mu);
      prefetches_.pending.erase(id);
      prefetches_.tasks--;
    }
    prefetches_.cv.notify_all();
    throw;
  }
  return id;
}

bool Table::wait(int64_t id, int64_t timeout_us, at::Tensor *rows, at::Tensor *found) {
  check_open();
  Pool::get().kick();  // (a forked child's queued tasks need its threads)
  std::shared_ptr<Prefetch> st;
  {
    std::lock_guard<std::mutex> l(prefetches_.mu);
    auto it = prefetches_.pending.find(id);
    if (it == prefetches_.pending.end()) {
      throw prefetch_error("no pending prefetch " + std::to_string(id) + " on table \"" + name_ +
                           "\" (never started, already waited for, or discarded)");
    }
    st = it->second;
    if (st->claimed) throw prefetch_error("prefetch " + std::to_string(id) + " is already being waited for");
    st->claimed = true;
  }
  bool done, discarded;
  {
    std::unique_lock<std::mutex> l(st->mu);
    auto ready = [&] { return st->done || st->discarded; };  // discard wakes the waiter
    if (timeout_us < 0) {
      st->cv.wait(l, ready);
    } else {
      st->cv.wait_for(l, std::chrono::microseconds(timeout_us), ready);
    }
    done = st->done;
  }
  {
    std::lock_guard<std::mutex> l(prefetches_.mu);
    discarded = st->discarded;  // also when discarded after the wait above
    if (discarded) {
      // discard took it out of prefetches_.pending already
    } else if (done) {
      prefetches_.pending.erase(id);
    } else {
      st->claimed = false;
    }
  }
  if (discarded) {
    throw prefetch_error("prefetch " + std::to_string(id) + " on table \"" + name_ +
                         "\" was discarded while waited for");
  }
  if (!done) return false;
  if (!st->error.empty()) throw ct::coded_error(st->error_code, st->error);
  // Moved, not copied: the worker may drop its reference to st after this returns, and the last
  // reference to a tensor the caller was handed must not go with it. Python's torch ties a
  // tensor's Python object to the tensor once Python has seen it, so the worker's release
  // would need the GIL: at interpreter exit that ended the worker thread inside a destructor
  // (std::terminate, with torch 2.15).
  *rows = std::move(st->rows);
  if (found != nullptr) *found = std::move(st->found);
  return true;
}

// A prefetch being waited for is discarded too: its waiter wakes and fails with "unknown
// prefetch: " (so that a discard always forgets the prefetch, which the waiter, polling in time
// slices, nearly always holds).
void Table::discard(int64_t id) {
  check_open();
  std::shared_ptr<Prefetch> st;  // released after the lock: it may hold the last rows
  {
    std::lock_guard<std::mutex> l(prefetches_.mu);
    auto it = prefetches_.pending.find(id);
    if (it == prefetches_.pending.end()) {
      throw prefetch_error("no pending prefetch " + std::to_string(id) + " to discard on table \"" + name_ + "\"");
    }
    st = std::move(it->second);
    prefetches_.pending.erase(it);
    if (!st->claimed) return;
    std::lock_guard<std::mutex> sl(st->mu);  // order: prefetches_.mu, then the prefetch's mu
    st->discarded = true;
  }
  st->cv.notify_all();
}

}  // namespace table
}  // namespace ct
