// tracerun's collective decorator: a c10d process group that forwards every call to the group it
// wraps and records op, bytes, dtype, group, peer, issue and completion time. Header-only: needs
// libtorch (c10d), never libtracerun; it does not change what the wrapped group computes.
//
// Use (where a program creates its groups):
//   pg = tracerun::traceGroup(pg, "dp", {0, 2});   // name and the members' global ranks
// When libtracerun.so is not loaded traceGroup returns `pg` itself (no decorator, no cost). When it
// is loaded, each collective becomes one span (category comm) on a track "c10d <name> [ranks]",
// from issue (the call) to completion: the work's future completing, or, for work without a future
// (Gloo send/recv in 1.13), the first wait() or isCompleted() that sees it done. Args: see
// docs/capture.md ("Collectives"). Calls that throw are not recorded; the exception propagates.
//
// Include this before tracerun/torch_compat.h in a translation unit (it enables the c10d section).
#pragma once

#ifndef TRACERUN_COMPAT_C10D
#define TRACERUN_COMPAT_C10D
#endif
#include "tracerun/torch_compat.h"
#ifndef TRACERUN_COMPAT_C10D_DONE
#error \
    "include tracerun/traced_group.h before tracerun/torch_compat.h (or define TRACERUN_COMPAT_C10D)"
#endif

#include <time.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

// Entry points defined by libtracerun.so (weak): tracerun/comm_event.h.
#include "tracerun/comm_event.h"

namespace tracerun {

namespace detail {

inline int64_t commNowNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

inline int64_t tensorBytes(const std::vector<at::Tensor>& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += t.defined() ? static_cast<int64_t>(t.nbytes()) : 0;
  return n;
}
inline int64_t tensorBytes(const std::vector<std::vector<at::Tensor>>& ts) {
  int64_t n = 0;
  for (const auto& v : ts) n += tensorBytes(v);
  return n;
}
inline int64_t dtypeOf(const std::vector<at::Tensor>& ts) {
  for (const auto& t : ts) {
    if (t.defined()) return static_cast<int64_t>(t.scalar_type());
  }
  return -1;
}
inline int64_t dtypeOf(const std::vector<std::vector<at::Tensor>>& ts) {
  for (const auto& v : ts) {
    const int64_t d = dtypeOf(v);
    if (d >= 0) return d;
  }
  return -1;
}

// One issued call, completed once (by the future's callback or by TracedWork).
struct PendingComm {
  tracerun_comm_event event{};
  std::string op, group, track;
  std::atomic<bool> done{false};

  void finish() noexcept {
    if (done.exchange(true)) return;
    event.end_ns = commNowNs();
    event.op = op.c_str();
    event.group = group.c_str();
    event.track = track.c_str();
    if (&tracerun_comm_record != nullptr) tracerun_comm_record(&event);
  }
};

// Work without a future: forwards everything, and completes the record when it sees the work done.
class TracedWork : public c10d::Work {
 public:
  TracedWork(c10::intrusive_ptr<c10d::Work> inner, std::shared_ptr<PendingComm> pending)
      : c10d::Work(-1, inner->retrieveOpType()),
        inner_(std::move(inner)),
        pending_(std::move(pending)) {}
  bool isCompleted() override {
    const bool done = inner_->isCompleted();
    if (done) pending_->finish();
    return done;
  }
  bool isSuccess() const override { return inner_->isSuccess(); }
  std::exception_ptr exception() const override { return inner_->exception(); }
  int sourceRank() const override { return inner_->sourceRank(); }
  std::vector<at::Tensor> result() override { return inner_->result(); }
  void synchronize() override { inner_->synchronize(); }
  bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) override {
    const bool ok = inner_->wait(timeout);
    pending_->finish();
    return ok;
  }
  void abort() override { inner_->abort(); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return inner_->getFuture(); }
  const c10::intrusive_ptr<c10d::Work>& inner() const noexcept { return inner_; }

 private:
  c10::intrusive_ptr<c10d::Work> inner_;
  std::shared_ptr<PendingComm> pending_;
};

}  // namespace detail

// The decorator. Thread-safe as far as the wrapped group is.
class TracedGroup : public compat::CollectiveGroup {
 public:
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;

  // globalRanks[i] is the global rank of group rank i (empty: group ranks are reported as is).
  TracedGroup(compat::CollectiveGroupPtr inner, std::string name, std::vector<int> globalRanks)
      : compat::CollectiveGroup(inner->getRank(), inner->getSize()),
        inner_(std::move(inner)),
        name_(std::move(name)),
        globalRanks_(std::move(globalRanks)) {
    track_ = "c10d " + name_ + " [";
    for (size_t i = 0; i < globalRanks_.size(); ++i) {
      track_ += (i ? "," : "") + std::to_string(globalRanks_[i]);
    }
    track_ += "]";
  }

  const compat::CollectiveGroupPtr& inner() const noexcept { return inner_; }
  const std::string& name() const noexcept { return name_; }

  const std::string getBackendName() const override { return inner_->getBackendName(); }

  WorkPtr broadcast(std::vector<at::Tensor>& tensors,
                    const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override {
    return traced("c10d:broadcast", detail::tensorBytes(tensors), detail::dtypeOf(tensors), -1,
                  global(opts.rootRank), -1, [&] { return inner_->broadcast(tensors, opts); });
  }
  WorkPtr allreduce(std::vector<at::Tensor>& tensors,
                    const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override {
    return traced("c10d:allreduce", detail::tensorBytes(tensors), detail::dtypeOf(tensors), -1, -1,
                  -1, [&] { return inner_->allreduce(tensors, opts); });
  }
  WorkPtr allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override {
    return traced("c10d:allreduce_coalesced", detail::tensorBytes(tensors),
                  detail::dtypeOf(tensors), -1, -1, -1,
                  [&] { return inner_->allreduce_coalesced(tensors, opts); });
  }
  WorkPtr reduce(std::vector<at::Tensor>& tensors,
                 const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override {
    return traced("c10d:reduce", detail::tensorBytes(tensors), detail::dtypeOf(tensors), -1,
                  global(opts.rootRank), -1, [&] { return inner_->reduce(tensors, opts); });
  }
  WorkPtr allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                    const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    return traced("c10d:allgather", detail::tensorBytes(inputs), detail::dtypeOf(inputs), -1, -1,
                  -1, [&] { return inner_->allgather(outputs, inputs, opts); });
  }
  WorkPtr _allgather_base(at::Tensor& output, at::Tensor& input,
                          const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    return traced("c10d:_allgather_base", static_cast<int64_t>(input.nbytes()),
                  static_cast<int64_t>(input.scalar_type()), -1, -1, -1,
                  [&] { return inner_->_allgather_base(output, input, opts); });
  }
  WorkPtr allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    return traced("c10d:allgather_coalesced", detail::tensorBytes(inputs), detail::dtypeOf(inputs),
                  -1, -1, -1, [&] { return inner_->allgather_coalesced(outputs, inputs, opts); });
  }
  WorkPtr gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                 const c10d::GatherOptions& opts = c10d::GatherOptions()) override {
    return traced("c10d:gather", detail::tensorBytes(inputs), detail::dtypeOf(inputs), -1,
                  global(opts.rootRank), -1, [&] { return inner_->gather(outputs, inputs, opts); });
  }
  WorkPtr scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                  const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override {
    return traced("c10d:scatter", detail::tensorBytes(outputs), detail::dtypeOf(outputs), -1,
                  global(opts.rootRank), -1,
                  [&] { return inner_->scatter(outputs, inputs, opts); });
  }
  WorkPtr reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    return traced("c10d:reduce_scatter", detail::tensorBytes(inputs), detail::dtypeOf(inputs), -1,
                  -1, -1, [&] { return inner_->reduce_scatter(outputs, inputs, opts); });
  }
  WorkPtr _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    return traced("c10d:_reduce_scatter_base", static_cast<int64_t>(input.nbytes()),
                  static_cast<int64_t>(input.scalar_type()), -1, -1, -1,
                  [&] { return inner_->_reduce_scatter_base(output, input, opts); });
  }
  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
                        std::vector<int64_t>& inputSplits,
                        const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override {
    return traced("c10d:alltoall_base", static_cast<int64_t>(input.nbytes()),
                  static_cast<int64_t>(input.scalar_type()), -1, -1, -1, [&] {
                    return inner_->alltoall_base(output, input, outputSplits, inputSplits, opts);
                  });
  }
  WorkPtr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                   const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override {
    return traced("c10d:alltoall", detail::tensorBytes(inputs), detail::dtypeOf(inputs), -1, -1, -1,
                  [&] { return inner_->alltoall(outputs, inputs, opts); });
  }
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks = false) override {
    if (!capturing()) return inner_->monitoredBarrier(opts, waitAllRanks);
    auto p = pending("c10d:monitored_barrier", 0, -1, -1, -1, -1);
    inner_->monitoredBarrier(opts, waitAllRanks);
    p->finish();
  }
  void setSequenceNumberForGroup() override { inner_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return inner_->getSequenceNumberForGroup(); }
  WorkPtr send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override {
    return traced(
        "c10d:send", detail::tensorBytes(tensors), detail::dtypeOf(tensors), global(dstRank), -1,
        tag, [&] { return inner_->send(tensors, dstRank, tag); }, Completion::kByWait);
  }
  WorkPtr recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override {
    return traced(
        "c10d:recv", detail::tensorBytes(tensors), detail::dtypeOf(tensors), global(srcRank), -1,
        tag, [&] { return inner_->recv(tensors, srcRank, tag); }, Completion::kByWait);
  }
  WorkPtr recvAnysource(std::vector<at::Tensor>& tensors, int tag) override {
    return traced(
        "c10d:recv_anysource", detail::tensorBytes(tensors), detail::dtypeOf(tensors), -1, -1, tag,
        [&] { return inner_->recvAnysource(tensors, tag); }, Completion::kByWait);
  }
  WorkPtr barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override {
    return traced("c10d:barrier", 0, -1, -1, -1, -1, [&] { return inner_->barrier(opts); });
  }
  TRACERUN_C10D_FORWARD_COALESCING(inner_)

 private:
  static bool capturing() noexcept {
    return &tracerun_comm_capturing != nullptr && tracerun_comm_capturing() != 0;
  }
  int64_t global(int64_t groupRank) const noexcept {
    if (groupRank >= 0 && static_cast<size_t>(groupRank) < globalRanks_.size()) {
      return globalRanks_[static_cast<size_t>(groupRank)];
    }
    return groupRank;
  }
  std::shared_ptr<detail::PendingComm> pending(const char* op, int64_t bytes, int64_t dtype,
                                               int64_t peer, int64_t root, int64_t tag) {
    auto p = std::make_shared<detail::PendingComm>();
    p->op = op;
    p->group = name_;
    p->track = track_;
    tracerun_comm_event& e = p->event;
    e.bytes = bytes;
    e.dtype = dtype;
    e.peer = peer;
    e.root = root;
    e.tag = tag;
    e.group_size = getSize();
    e.group_rank = getRank();
    e.seq = seq_.fetch_add(1, std::memory_order_relaxed);
    e.start_ns = detail::commNowNs();
    return p;
  }
  // How a call's completion time is taken: from the work's future, or when the caller sees the
  // work done (wait / isCompleted). Point-to-point works have no future in Gloo (1.13), and asking
  // throws a c10::Error whose backtrace costs ~0.5 ms per message, so they never ask.
  enum class Completion { kByFuture, kByWait };

  template <typename Call>
  WorkPtr traced(const char* op, int64_t bytes, int64_t dtype, int64_t peer, int64_t root,
                 int64_t tag, Call&& call, Completion completion = Completion::kByFuture) {
    if (!capturing()) return call();
    auto p = pending(op, bytes, dtype, peer, root, tag);
    WorkPtr work = call();
    if (!work) {
      p->finish();
      return work;
    }
    c10::intrusive_ptr<c10::ivalue::Future> future;
    if (completion == Completion::kByFuture) {
      try {
        future = work->getFuture();
      } catch (const std::exception&) {
        // A backend without futures for this call: complete when the caller sees the work done.
      }
    }
    if (!future) return c10::make_intrusive<detail::TracedWork>(std::move(work), std::move(p));
    future->addCallback([p](c10::ivalue::Future&) { p->finish(); });
    return work;
  }

  compat::CollectiveGroupPtr inner_;
  std::string name_;
  std::vector<int> globalRanks_;
  std::string track_;
  std::atomic<int64_t> seq_{0};
};

// Wraps `group` in a TracedGroup when libtracerun.so is loaded; returns `group` itself otherwise.
inline compat::CollectiveGroupPtr traceGroup(compat::CollectiveGroupPtr group,
                                             const std::string& name,
                                             std::vector<int> globalRanks = {}) {
  if (!group || &tracerun_comm_record == nullptr) return group;
  return c10::make_intrusive<TracedGroup>(std::move(group), name, std::move(globalRanks));
}

}  // namespace tracerun
