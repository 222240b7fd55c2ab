// RecordRing: order, wrap-around, drop counting, and one producer racing one consumer.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "tracerun/core/record_ring.h"

using namespace tracerun::core;

namespace {
Record counterWithValue(int64_t v) {
  CounterRecord c;
  c.ts_ns = v;
  return Record::from(c);
}
std::vector<int64_t> drainAll(RecordRing& ring) {
  std::vector<int64_t> out;
  ring.drain([&](const Record* r, size_t n) {
    for (size_t i = 0; i < n; ++i) out.push_back(r[i].as<CounterRecord>().ts_ns);
  });
  return out;
}
}  // namespace

TEST_CASE("capacity rounds up to a power of two") {
  CHECK(RecordRing(5).capacity() == 8);
  CHECK(RecordRing(8).capacity() == 8);
  CHECK(RecordRing(0).capacity() == 2);
}

TEST_CASE("a full ring drops and counts, never overwrites") {
  RecordRing ring(4);
  for (int i = 0; i < 6; ++i) ring.tryPush(counterWithValue(i));
  CHECK(ring.dropped() == 2);
  CHECK(drainAll(ring) == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(ring.empty());
  CHECK(ring.tryPush(counterWithValue(10)));
  CHECK(drainAll(ring) == std::vector<int64_t>{10});
}

TEST_CASE("wrap-around keeps order across the two runs a drain can see") {
  RecordRing ring(8);
  int64_t next = 0;
  std::vector<int64_t> seen;
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 5; ++i) REQUIRE(ring.tryPush(counterWithValue(next++)));
    auto got = drainAll(ring);
    seen.insert(seen.end(), got.begin(), got.end());
  }
  REQUIRE(seen.size() == 50);
  for (int64_t i = 0; i < 50; ++i) CHECK(seen[size_t(i)] == i);
}

TEST_CASE("a pair is pushed whole or dropped whole") {
  RecordRing ring(4);
  REQUIRE(ring.tryPush(counterWithValue(0)));
  REQUIRE(ring.tryPush(counterWithValue(1)));
  REQUIRE(ring.tryPush(counterWithValue(2)));
  CHECK_FALSE(ring.tryPushPair(counterWithValue(3), counterWithValue(4)));
  CHECK(ring.dropped() == 2);
  CHECK(drainAll(ring).size() == 3);
  CHECK(ring.tryPushPair(counterWithValue(5), counterWithValue(6)));
  CHECK(drainAll(ring) == std::vector<int64_t>{5, 6});
}

TEST_CASE("one producer and one consumer racing lose nothing but counted drops") {
  RecordRing ring(256);
  constexpr int64_t kCount = 200000;
  std::thread producer([&] {
    for (int64_t i = 0; i < kCount; ++i) ring.tryPush(counterWithValue(i));
  });
  std::vector<int64_t> seen;
  while (true) {
    auto got = drainAll(ring);
    seen.insert(seen.end(), got.begin(), got.end());
    if (got.empty() && static_cast<int64_t>(ring.pushed() + ring.dropped()) == kCount &&
        ring.empty())
      break;
  }
  producer.join();
  auto rest = drainAll(ring);
  seen.insert(seen.end(), rest.begin(), rest.end());
  CHECK(static_cast<int64_t>(seen.size() + ring.dropped()) == kCount);
  for (size_t i = 1; i < seen.size(); ++i) REQUIRE(seen[i] > seen[i - 1]);
}
