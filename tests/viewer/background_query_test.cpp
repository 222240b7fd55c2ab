// BackgroundQuery: a result arrives on another thread, errors are kept, stop() cancels and joins.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "data/background_query.h"

using tracerun::viewer::BackgroundQuery;

namespace {
template <typename T>
void waitReady(const BackgroundQuery<T>& q) {
  for (int i = 0; i < 5000 && !q.ready(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
}  // namespace

TEST_CASE("BackgroundQuery delivers a result computed on another thread", "[viewer]") {
  BackgroundQuery<std::thread::id> q;
  CHECK_FALSE(q.started());
  std::atomic<int> woken{0};
  q.start([](const std::atomic<bool>&) { return std::this_thread::get_id(); }, [&] { ++woken; });
  waitReady(q);
  REQUIRE(q.ready());
  REQUIRE(q.result() != nullptr);
  CHECK(*q.result() != std::this_thread::get_id());
  // wake() runs on the worker just after it marks the result ready: give it the moment it needs.
  for (int i = 0; i < 5000 && woken == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(woken == 1);
  CHECK(q.error().empty());
}

TEST_CASE("BackgroundQuery keeps the error of a query that throws", "[viewer]") {
  BackgroundQuery<int> q;
  q.start([](const std::atomic<bool>&) -> int { throw std::runtime_error("no pipeline data"); },
          nullptr);
  waitReady(q);
  CHECK(q.result() == nullptr);
  CHECK(q.error() == "no pipeline data");
}

TEST_CASE("BackgroundQuery stop cancels a running query and drops it", "[viewer]") {
  BackgroundQuery<int> q;
  std::atomic<bool> sawCancel{false};
  q.start(
      [&](const std::atomic<bool>& cancel) {
        while (!cancel.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        sawCancel = true;
        return 1;
      },
      nullptr);
  CHECK(q.running());
  q.stop();
  CHECK(sawCancel);
  CHECK_FALSE(q.started());
  CHECK(q.result() == nullptr);
  // A second start after stop runs again.
  q.start([](const std::atomic<bool>&) { return 7; }, nullptr);
  waitReady(q);
  REQUIRE(q.result() != nullptr);
  CHECK(*q.result() == 7);
}
