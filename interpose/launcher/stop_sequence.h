// The launcher's one way of stopping what it started: SIGTERM (at once, or after a delay that lets
// the program end on its own), then SIGKILL `--stop-grace` seconds after the SIGTERM. It does not
// decide to stop (the attempt and the child's wait loop do) and it sends nothing by itself: the
// wait loop calls advance() on every turn with how to signal its processes.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdint>

namespace tracerun::launcher {

class StopSequence {
 public:
  using Clock = std::chrono::steady_clock;

  explicit StopSequence(double grace_s)
      : grace_(std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000))) {}

  bool stopping() const { return stopping_; }
  Clock::duration grace() const { return grace_; }

  // Begins stopping: SIGTERM is due `termDelay` from now, SIGKILL `grace` after the SIGTERM went
  // out. Only the first call counts (its deadlines stand); returns whether this call began it.
  bool begin(Clock::duration termDelay = Clock::duration::zero()) {
    if (stopping_) return false;
    stopping_ = true;
    termAt_ = Clock::now() + termDelay;
    return true;
  }

  // Begins (or hurries) stopping with SIGKILL at once and no SIGTERM: for ranks that cannot have
  // recorded anything yet (the group failed to start).
  void killNow() {
    stopping_ = termSent_ = true;
    killAt_ = Clock::now();
  }

  // Sends what is due through send(SIGTERM) / send(SIGKILL), each once.
  template <typename Send>
  void advance(Send&& send) {
    if (!stopping_) return;
    const Clock::time_point now = Clock::now();
    if (!termSent_ && now >= termAt_) {
      termSent_ = true;
      killAt_ = now + grace_;
      send(SIGTERM);
    }
    if (termSent_ && !killSent_ && now >= killAt_) {
      killSent_ = true;
      send(SIGKILL);
    }
  }

 private:
  Clock::duration grace_;
  bool stopping_ = false, termSent_ = false, killSent_ = false;
  Clock::time_point termAt_{}, killAt_{};
};

}  // namespace tracerun::launcher
