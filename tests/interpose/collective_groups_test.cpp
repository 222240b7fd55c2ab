// The table that carries a collective's process group from its dispatcher op to the backend's
// span (interpose/src/collective_groups.h): taken by any of its addresses, oldest first, once;
// nothing for an unknown address; the oldest calls dropped beyond its size; and under threads
// that publish and take at once, every call taken exactly once with its own group.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "collective_groups.h"

using namespace tracerun::interpose;

namespace {
const uint32_t kAllReduce = collectiveOpCode("c10d::allreduce_");
const uint32_t kBarrier = collectiveOpCode("c10d::barrier");
}  // namespace

TEST_CASE("collective groups: the dispatcher's and Gloo's names of one collective agree") {
  CHECK(collectiveOpCode("c10d::allreduce_") == collectiveOpCode("gloo:all_reduce"));
  CHECK(collectiveOpCode("c10d::allgather_") == collectiveOpCode("gloo:all_gather"));
  CHECK(collectiveOpCode("c10d::_allgather_base_") == collectiveOpCode("gloo:all_gather"));
  CHECK(collectiveOpCode("c10d::broadcast_") == collectiveOpCode("gloo:broadcast"));
  CHECK(collectiveOpCode("c10d::recv_any_source_") == collectiveOpCode("gloo:recvAnysource"));
  CHECK(collectiveOpCode("c10d::reduce_") != collectiveOpCode("gloo:reduce_scatter"));
  CHECK(collectiveOpCode("c10d::scatter_") != collectiveOpCode("gloo:all_reduce"));
  CHECK(isBarrierName("c10d::barrier"));
  CHECK(isBarrierName("gloo:barrier"));
  CHECK_FALSE(isBarrierName("c10d::monitored_barrier_"));
}

TEST_CASE("collective groups: taken by any of its addresses and oldest first: once") {
  clearCollectiveGroups();
  const uint64_t a[] = {0x1000, 0x2000};
  publishCollectiveGroup(a, 2, kAllReduce, {2, 1});
  const uint64_t b[] = {0x1000};
  publishCollectiveGroup(b, 1, kAllReduce, {4, 3});
  CollectiveGroup g;
  CHECK_FALSE(takeCollectiveGroup(0x3000, kAllReduce, &g));
  CHECK_FALSE(takeCollectiveGroup(0, kAllReduce, &g));
  REQUIRE(takeCollectiveGroup(0x2000, kAllReduce, &g));  // the second address of the first call
  CHECK((g.size == 2 && g.rank == 1));
  REQUIRE(takeCollectiveGroup(0x1000, kAllReduce, &g));  // the first call is taken: the second one
  CHECK((g.size == 4 && g.rank == 3));
  CHECK_FALSE(takeCollectiveGroup(0x1000, kAllReduce, &g));

  SECTION("with two calls on one address, the older is taken first") {
    publishCollectiveGroup(b, 1, kAllReduce, {8, 5});
    publishCollectiveGroup(b, 1, kAllReduce, {2, 0});
    REQUIRE(takeCollectiveGroup(0x1000, kAllReduce, &g));
    CHECK(g.size == 8);
    REQUIRE(takeCollectiveGroup(0x1000, kAllReduce, &g));
    CHECK(g.size == 2);
  }
  SECTION("a call with no tensor has its own key, and replaces older ones never taken") {
    publishCollectiveGroup(&kNoTensorKey, 1, kBarrier, {4, 2});
    REQUIRE(takeCollectiveGroup(kNoTensorKey, kBarrier, &g));
    CHECK((g.size == 4 && g.rank == 2));
    // An NCCL world's barrier (its span takes nothing) and then a Gloo group's: the Gloo
    // barrier's span gets the Gloo group, not the older world's.
    publishCollectiveGroup(&kNoTensorKey, 1, kBarrier, {8, 5});
    publishCollectiveGroup(&kNoTensorKey, 1, kBarrier, {2, 1});
    REQUIRE(takeCollectiveGroup(kNoTensorKey, kBarrier, &g));
    CHECK((g.size == 2 && g.rank == 1));
    CHECK_FALSE(takeCollectiveGroup(kNoTensorKey, kBarrier, &g));
  }
  SECTION("beyond the table's size the oldest calls are gone") {
    for (int i = 0; i < kCollectiveGroupSlots + 3; ++i) {
      const uint64_t key = 0x10000 + static_cast<uint64_t>(i) * 64;
      publishCollectiveGroup(&key, 1, kAllReduce, {2, i});
    }
    for (int i = 0; i < kCollectiveGroupSlots + 3; ++i) {
      const uint64_t key = 0x10000 + static_cast<uint64_t>(i) * 64;
      INFO(i);
      CHECK(takeCollectiveGroup(key, kAllReduce, &g) == (i >= 3));
      if (i >= 3) CHECK(g.rank == i);
    }
  }
  SECTION("a call of another collective on the same memory is never taken") {
    // A scatter's entry (its Gloo span names another tensor, so nothing takes it) must not give
    // its group to a later all-reduce of a tensor placed where the scatter's output was.
    publishCollectiveGroup(b, 1, collectiveOpCode("c10d::scatter_"), {8, 7});
    CHECK_FALSE(takeCollectiveGroup(0x1000, kAllReduce, &g));
    publishCollectiveGroup(b, 1, kAllReduce, {2, 1});
    REQUIRE(takeCollectiveGroup(0x1000, kAllReduce, &g));
    CHECK((g.size == 2 && g.rank == 1));
  }
  SECTION("cleared: nothing left") {
    publishCollectiveGroup(b, 1, kAllReduce, {2, 0});
    clearCollectiveGroups();
    CHECK_FALSE(takeCollectiveGroup(0x1000, kAllReduce, &g));
  }
}

TEST_CASE("collective groups: callers publish while workers take: each call taken once") {
  clearCollectiveGroups();
  // Two callers publish calls on their own addresses (group size = the caller, rank = the call);
  // two workers take them as they come. No caller runs more than 8 calls ahead of the slower
  // worker, so no call waits while kCollectiveGroupSlots others are published (the table's limit).
  constexpr int kCalls = 20000;
  std::atomic<int> taken[2] = {{0}, {0}};
  std::atomic<bool> wrong{false};
  std::vector<std::vector<bool>> seen(2, std::vector<bool>(kCalls, false));
  auto key = [](int caller, int call) {
    return 0x100000 + (static_cast<uint64_t>(caller) << 32) + static_cast<uint64_t>(call) * 16;
  };
  auto caller = [&](int c) {
    for (int i = 0; i < kCalls; ++i) {
      while (i - std::min(taken[0].load(), taken[1].load()) >= 8) std::this_thread::yield();
      const uint64_t k = key(c, i);
      publishCollectiveGroup(&k, 1, kAllReduce, {c + 1, i});
    }
  };
  auto worker = [&](int c) {  // worker c takes caller c's calls, in order
    for (int i = 0; i < kCalls; ++i) {
      CollectiveGroup g;
      // A call lost by the table would spin forever: give up after a few seconds' worth.
      long spins = 0;
      while (!takeCollectiveGroup(key(c, i), kAllReduce, &g) && ++spins < 20'000'000) {
        std::this_thread::yield();
      }
      if (spins == 20'000'000) {
        wrong = true;
        taken[c].store(kCalls);  // lets the callers finish
        return;
      }
      if (g.size != c + 1 || g.rank != i || seen[c][i]) wrong = true;
      seen[c][i] = true;
      taken[c].store(i + 1);
    }
  };
  std::thread t0(caller, 0), t1(caller, 1), w0(worker, 0), w1(worker, 1);
  t0.join();
  t1.join();
  w0.join();
  w1.join();
  CHECK_FALSE(wrong);
}

TEST_CASE(
    "collective groups: a group's name is found by its address, the latest one, and carried") {
  clearProcessGroupNames();
  CHECK(processGroupId(0x7000) == -1);
  nameProcessGroup(0x7000, 1);
  nameProcessGroup(0x8000, 2);
  nameProcessGroup(0x9000, -1);  // no name: ignored
  nameProcessGroup(0, 5);        // no address: ignored
  CHECK(processGroupId(0x7000) == 1);
  CHECK(processGroupId(0x8000) == 2);
  CHECK(processGroupId(0x9000) == -1);
  CHECK(processGroupId(0) == -1);
  // A group made where a destroyed one was: the newer name, in the same slot.
  nameProcessGroup(0x7000, 3);
  CHECK(processGroupId(0x7000) == 3);
  // A destroyed group is forgotten; its address named again later has the new name.
  nameProcessGroup(0x8000, -1);
  CHECK(processGroupId(0x8000) == -1);
  nameProcessGroup(0x8000, 2);
  // Beyond the table's slots (two used: 0x7000 and 0x8000), further addresses
  // stay unnamed and earlier ones keep theirs, and may still be renamed.
  for (int i = 0; i < kNamedGroupSlots; ++i) nameProcessGroup(0x10000 + 16 * i, 100 + i);
  CHECK(processGroupId(0x8000) == 2);
  CHECK(processGroupId(0x10000) == 100);
  CHECK(processGroupId(0x10000 + 16 * (kNamedGroupSlots - 3)) == 100 + kNamedGroupSlots - 3);
  CHECK(processGroupId(0x10000 + 16 * (kNamedGroupSlots - 2)) == -1);
  nameProcessGroup(0x7000, 4);
  CHECK(processGroupId(0x7000) == 4);
  // The id travels with the call to the backend's span.
  clearCollectiveGroups();
  const uint64_t key[] = {0x1000};
  publishCollectiveGroup(key, 1, kAllReduce, {2, 1, 7});
  CollectiveGroup g;
  REQUIRE(takeCollectiveGroup(0x1000, kAllReduce, &g));
  CHECK((g.size == 2 && g.rank == 1 && g.id == 7));
  clearProcessGroupNames();
  CHECK(processGroupId(0x7000) == -1);
}
