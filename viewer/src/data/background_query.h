// BackgroundQuery<T>: one computation over a trace on its own thread, for views whose data is a
// whole-trace analysis (trace/analysis/*). The frame polls ready() (one atomic load, no lock) and
// reads the result; the destructor cancels and joins. Not a queue: starting again replaces the
// previous run (the old one is cancelled and joined first).
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>

namespace tracerun::viewer {

template <typename T>
class BackgroundQuery {
 public:
  using Work = std::function<T(const std::atomic<bool>& cancel)>;

  BackgroundQuery() = default;
  BackgroundQuery(const BackgroundQuery&) = delete;
  BackgroundQuery& operator=(const BackgroundQuery&) = delete;
  ~BackgroundQuery() { stop(); }

  // Runs `work` on a new thread; `wake` is called from it when the result (or error) is ready.
  void start(Work work, std::function<void()> wake) {
    stop();
    started_ = true;
    thread_ = std::thread([this, work = std::move(work), wake = std::move(wake)] {
      try {
        result_ = work(cancel_);
      } catch (const std::exception& e) {
        error_ = e.what();
      } catch (...) {
        error_ = "the query failed";
      }
      ready_.store(true, std::memory_order_release);
      if (wake) wake();
    });
  }
  // Cancels a running query and waits for its thread; the result is dropped.
  void stop() {
    cancel_.store(true);
    if (thread_.joinable()) thread_.join();
    cancel_.store(false);
    ready_.store(false);
    started_ = false;
    result_.reset();
    error_.clear();
  }

  bool started() const { return started_; }
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  bool running() const { return started_ && !ready(); }
  // Valid once ready(): the value, or nullptr when the work threw (then error() says why).
  const T* result() const { return ready() && result_ ? &*result_ : nullptr; }
  T* result() { return ready() && result_ ? &*result_ : nullptr; }
  const std::string& error() const {
    static const std::string kNone;
    return ready() ? error_ : kNone;
  }

 private:
  std::atomic<bool> cancel_{false}, ready_{false};
  bool started_ = false;
  std::optional<T> result_;  // written by the thread before ready_ turns true
  std::string error_;
  std::thread thread_;
};

}  // namespace tracerun::viewer
