// scope.cc.h: scopes that release the tensors of a training step in one go. A scope belongs to the
// thread that began it (the Go side locks the goroutine to its OS thread for the scope's life).
#include <atomic>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "internal.h"

struct ct_scope_s {
  ct_scope_s *parent;
  std::thread::id thread;
  std::unordered_set<ct_tensor> members;
};

namespace {
// Open scopes of the calling thread, innermost last.
thread_local std::vector<ct_scope> open_scopes;
// Guards every scope's members and every handle's scope field: handles can be freed from any
// thread (Go cleanups run on their own goroutine).
std::mutex scope_mu;
// Number of scopes alive in the process; lets ct_tensor_free skip the lock when zero.
std::atomic<int64_t> scopes_alive{0};
}  // namespace

namespace ct {

void scope_adopt(ct_tensor h) {
  if (open_scopes.empty()) return;
  ct_scope s = open_scopes.back();
  std::lock_guard<std::mutex> lock(scope_mu);
  s->members.insert(h);
  h->scope = s;
}

void scope_forget(ct_tensor h) {
  if (scopes_alive.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(scope_mu);
  if (h->scope != nullptr) {
    h->scope->members.erase(h);
    h->scope = nullptr;
  }
}

}  // namespace ct

using ct::guard;

extern "C" {

ct_error ct_scope_begin(ct_scope *out) {
  return guard([&] {
    ct::need_out(out);
    ct_scope parent = open_scopes.empty() ? nullptr : open_scopes.back();
    auto *s = new ct_scope_s{parent, std::this_thread::get_id(), {}};
    open_scopes.push_back(s);
    scopes_alive.fetch_add(1, std::memory_order_acq_rel);
    *out = s;
  });
}

ct_error ct_scope_keep(ct_scope s, ct_tensor t) {
  return guard([&] {
    if (s == nullptr || t == nullptr) throw ct::arg_error("scope or tensor handle is NULL");
    std::lock_guard<std::mutex> lock(scope_mu);
    // t's scope is s or one nested in s when s is on its chain of enclosing scopes. Every scope
    // on that chain is alive: t->scope is (members are cleared before a scope is deleted) and
    // a scope ends only after those opened inside it; parent pointers never change.
    ct_scope owner = t->scope;
    ct_scope p = owner;
    while (p != nullptr && p != s) p = p->parent;
    if (p == nullptr) return;  // not (or no longer) in s or a scope inside it: nothing to do
    owner->members.erase(t);
    t->scope = s->parent;
    if (s->parent != nullptr) s->parent->members.insert(t);
  });
}

ct_error ct_scope_end(int64_t *released, ct_scope s) {
  return guard([&] {
    if (s == nullptr) throw ct::arg_error("scope handle is NULL");
    if (open_scopes.empty() || open_scopes.back() != s) {
      throw ct::arg_error(s->thread != std::this_thread::get_id()
                              ? "scope ended on another thread than the one that began it"
                              : "scopes must end in the reverse order they began");
    }
    std::vector<at::Tensor> doomed;  // destroyed outside the lock
    {
      std::lock_guard<std::mutex> lock(scope_mu);
      doomed.reserve(s->members.size());
      for (ct_tensor h : s->members) {
        doomed.push_back(std::move(h->t));
        h->t = at::Tensor();
        h->scope = nullptr;
      }
      s->members.clear();
    }
    open_scopes.pop_back();
    delete s;
    scopes_alive.fetch_sub(1, std::memory_order_acq_rel);
    if (released != nullptr) *released = static_cast<int64_t>(doomed.size());
  });
}

}  // extern "C"
