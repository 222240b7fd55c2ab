// Session: several producer threads, one draining consumer; per-thread order, ids, retirement.
#include <catch2/catch.hpp>

#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "tracerun/core/session.h"

using namespace tracerun::core;

TEST_CASE("several producers, one consumer: every record arrives once, in order per thread") {
  Session session(1024);
  constexpr int kThreads = 4;
  constexpr int64_t kPerThread = 50000;
  std::atomic<int> finished{0};
  std::atomic<uint64_t> refused{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&] {
      ThreadBuffer& buf = session.threadBuffer();
      for (int64_t i = 0; i < kPerThread; ++i) {
        SpanRecord s;
        s.id = buf.nextId();
        s.start_ns = i;
        // Spin on a full ring so the test also exercises the consumer keeping up.
        while (!buf.ring.tryPush(Record::from(s))) {
          refused.fetch_add(1);
          std::this_thread::yield();
        }
      }
      finished.fetch_add(1);
    });
  }
  std::map<TrackId, std::vector<int64_t>> byTrack;
  std::set<EventId> ids;
  auto drain = [&] {
    session.forEachBuffer([&](ThreadBuffer& b) {
      b.ring.drain([&](const Record* r, size_t n) {
        for (size_t i = 0; i < n; ++i) {
          const auto s = r[i].as<SpanRecord>();
          byTrack[b.track].push_back(s.start_ns);
          ids.insert(s.id);
        }
      });
    });
  };
  while (finished.load() < kThreads) drain();
  for (auto& p : producers) p.join();
  drain();

  REQUIRE(byTrack.size() == kThreads);
  for (auto& [track, starts] : byTrack) {
    REQUIRE(starts.size() == size_t(kPerThread));
    for (int64_t i = 0; i < kPerThread; ++i) REQUIRE(starts[size_t(i)] == i);
  }
  CHECK(ids.size() == size_t(kThreads * kPerThread));  // ids are unique across threads
  CHECK(session.tracks().size() == kThreads);
  // Buffers of exited threads are forgotten once drained; the dropped count survives them.
  session.forEachBuffer([](ThreadBuffer&) { FAIL("no buffer should be left"); });
  CHECK(session.dropped() == refused.load());  // every refused push was counted as a drop
}

TEST_CASE("drops are counted per buffer and survive the thread") {
  Session session(4);
  std::thread t([&] {
    ThreadBuffer& buf = session.threadBuffer("worker");
    for (int i = 0; i < 10; ++i) buf.ring.tryPush(Record::from(CounterRecord{}));
  });
  t.join();
  CHECK(session.dropped() == 6);
  int drained = 0;
  session.forEachBuffer([&](ThreadBuffer& b) {
    drained += int(b.ring.drain([](const Record*, size_t) {}));
  });
  CHECK(drained == 4);
  CHECK(session.dropped() == 6);
  auto tracks = session.tracks().since(0);
  REQUIRE(tracks.size() == 1);
  CHECK(tracks[0].name == "worker");
  CHECK(tracks[0].kind == TrackKind::kThread);
}

TEST_CASE("a thread gets one buffer per session, and separate sessions stay separate") {
  Session a(16), b(16);
  ThreadBuffer& a1 = a.threadBuffer();
  ThreadBuffer& a2 = a.threadBuffer();
  ThreadBuffer& b1 = b.threadBuffer();
  CHECK(&a1 == &a2);
  CHECK(&a1 != &b1);
  CHECK(a.tracks().size() == 1);
  CHECK(b.tracks().size() == 1);
}
