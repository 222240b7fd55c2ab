// Unit tests of the capture's libtorch-free parts: name and shape caches, the forward-op map,
// span emission, configuration from the environment, target matching. No libtorch, no files.
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "capture.h"
#include "thread_state.h"
#include "tracerun/core/clock.h"

using namespace tracerun;
using namespace tracerun::interpose;

TEST_CASE("NameCache interns by content, never by pointer") {
  core::StringTable strings;
  auto cache = std::make_unique<NameCache>();
  char buf[64];
  std::strcpy(buf, "aten::add");
  const core::StringId add = cache->lookup(buf, strings);
  CHECK(strings.get(add) == "aten::add");
  // The same buffer now holds another name (RecordFunction reuses std::string storage).
  std::strcpy(buf, "aten::mul");
  const core::StringId mul = cache->lookup(buf, strings);
  CHECK(mul != add);
  CHECK(strings.get(mul) == "aten::mul");
  // The same text at another address: the same id, and no new miss.
  const uint64_t misses = cache->misses();
  std::string copy = "aten::add";
  CHECK(cache->lookup(copy.c_str(), strings) == add);
  CHECK(cache->misses() == misses);
  CHECK(cache->lookup("", strings) == 0);
  CHECK(cache->lookup(nullptr, strings) == 0);
}

TEST_CASE("NameCache tells apart long names that share their first 48 bytes") {
  core::StringTable strings;
  auto cache = std::make_unique<NameCache>();
  const std::string prefix(60, 'x');
  const core::StringId a = cache->lookup((prefix + "A").c_str(), strings);
  const core::StringId b = cache->lookup((prefix + "B").c_str(), strings);
  CHECK(a != b);
  CHECK(strings.get(a) == prefix + "A");
  CHECK(strings.get(b) == prefix + "B");
  CHECK(cache->lookup((prefix + "A").c_str(), strings) == a);
}

TEST_CASE("hashBytes depends on every byte and on the length") {
  const std::string a = "autograd::engine::evaluate_function: AddmmBackward0";
  std::string b = a;
  b[20] = 'X';
  CHECK(hashBytes(a.data(), a.size()) != hashBytes(b.data(), b.size()));
  CHECK(hashBytes(a.data(), 10) != hashBytes(a.data(), 11));
  CHECK(hashBytes(a.data(), a.size()) == hashBytes(a.c_str(), a.size()));
}

TEST_CASE("ShapeCache finds what was inserted and counts misses") {
  auto cache = std::make_unique<ShapeCache>();
  core::StringId id = 0;
  CHECK_FALSE(cache->find(12345, &id));
  cache->insert(12345, 7);
  REQUIRE(cache->find(12345, &id));
  CHECK(id == 7);
  // Two hashes of the same set both stay; a third evicts the oldest.
  const uint64_t sets = ShapeCache::kSlots / 2;
  CHECK_FALSE(cache->find(12345 + sets, &id));
  cache->insert(12345 + sets, 8);
  REQUIRE(cache->find(12345, &id));
  CHECK(id == 7);
  REQUIRE(cache->find(12345 + sets, &id));
  CHECK(id == 8);
  cache->insert(12345 + 2 * sets, 9);
  CHECK_FALSE(cache->find(12345, &id));
  CHECK(cache->misses() == 3);
}

TEST_CASE("SeqMap returns the latest start of a sequence number and forgets overwritten ones") {
  auto m = std::make_unique<SeqMap>();
  int64_t start = 0;
  CHECK_FALSE(m->get(4, &start));
  m->put(4, 100);
  m->put(4, 150);  // a later op with the same number (the one that created the node) wins
  REQUIRE(m->get(4, &start));
  CHECK(start == 150);
  m->put(4 + static_cast<int64_t>(SeqMap::kSlots), 999);  // reuses the slot
  CHECK_FALSE(m->get(4, &start));
}

TEST_CASE("SeqMap is readable from another thread while its owner writes") {
  auto m = std::make_unique<SeqMap>();
  std::thread writer([&] {
    for (int64_t s = 0; s < 200000; ++s) m->put(s, s * 10);
  });
  int64_t bad = 0;
  for (int64_t s = 0; s < 200000; ++s) {
    int64_t start = 0;
    if (m->get(s, &start) && start != s * 10) ++bad;
  }
  writer.join();
  CHECK(bad == 0);
}

TEST_CASE("seq maps are registered per RecordFunction thread id") {
  CHECK(seqMapForThread(kMaxSeqThreads) == nullptr);
  CHECK(createSeqMapForThread(kMaxSeqThreads + 5) == nullptr);
  SeqMap* m = createSeqMapForThread(3);
  REQUIRE(m != nullptr);
  CHECK(createSeqMapForThread(3) == m);
  CHECK(seqMapForThread(3) == m);
}

TEST_CASE("emitSpan writes the frame's record image, its end and up to four arguments") {
  core::Session session(64);
  auto t = std::make_unique<ThreadState>();
  t->session = &session;
  t->buffer = &session.threadBuffer("test");
  Frame& outer = t->frames[0];
  outer.id = 11;
  Frame& f = t->frames[1];
  f.id = 12;
  f.depth = 1;
  f.parent = outer.id;
  f.seq = 7;
  f.detail = t->intern("f32[2]");
  f.name = t->intern("microbatch");
  f.category = core::Category::kPhase;
  f.start_ns = 1000;
  f.nargs = 4;
  for (int i = 0; i < 4; ++i) f.args[i] = {t->intern(("k" + std::to_string(i)).c_str()), 0, i * 10};
  emitSpan(*t, f, 2500);
  std::vector<core::Record> got;
  t->buffer->ring.drain([&](const core::Record* r, size_t n) { got.insert(got.end(), r, r + n); });
  REQUIRE(got.size() == 3);
  REQUIRE(got[0].kind() == core::RecordKind::kSpan);
  const auto s = got[0].as<core::SpanRecord>();
  CHECK(s.parent == 11);
  CHECK(s.depth == 1);
  CHECK(s.id == 12);
  CHECK(s.name == f.name);
  CHECK(s.seq == 7);
  CHECK(s.detail == f.detail);
  CHECK(s.track == 0);
  CHECK(s.start_ns == 1000);
  CHECK(s.end_ns == 2500);
  CHECK(f.end_ns == 0);  // the end goes into the record only
  CHECK(s.category == core::Category::kPhase);
  const auto a = got[1].as<core::ArgsRecord>();
  const auto b = got[2].as<core::ArgsRecord>();
  CHECK(a.owner == 12);
  CHECK(a.count == 3);
  CHECK(b.owner == 12);
  CHECK(b.count == 1);
  CHECK(b.args[0].value == 30);
  CHECK(session.strings().get(b.args[0].key) == "k3");
}

TEST_CASE("targetMatches compares paths by realpath and bare names by basename") {
  CHECK(targetMatches("", "/usr/bin/python3.11"));
  CHECK(targetMatches("python3.11", "/usr/bin/python3.11"));
  CHECK_FALSE(targetMatches("python3", "/usr/bin/python3.11"));
  CHECK_FALSE(targetMatches("timeout", "/usr/bin/python3.11"));
  CHECK(targetMatches("/proc/self/exe", selfExecutable()));
  CHECK_FALSE(targetMatches("/bin/true", selfExecutable()));
  CHECK_FALSE(targetMatches("x", ""));
}

namespace {
void clearCaptureEnv() {
  for (const char* k : {"TRACERUN_OUTPUT", "TRACERUN_TARGET", "TRACERUN_CAPTURE", "TRACERUN_SHAPES",
                        "TRACERUN_CLAIM", "RANK", "WORLD_SIZE"}) {
    ::unsetenv(k);
  }
}
struct EnvGuard {
  explicit EnvGuard(const std::vector<std::pair<std::string, std::string>>& vars) {
    clearCaptureEnv();
    for (auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~EnvGuard() { clearCaptureEnv(); }
};
}  // namespace

TEST_CASE("configFromEnvironment starts only when told to and only in the target") {
  std::string why;
  {
    EnvGuard env({});
    CHECK_FALSE(configFromEnvironment(&why));
    CHECK(why.find("TRACERUN_OUTPUT") != std::string::npos);
  }
  {
    EnvGuard env({{"TRACERUN_OUTPUT", "/tmp/x/rank%r.db"}, {"TRACERUN_TARGET", "/bin/true"}});
    CHECK_FALSE(configFromEnvironment(&why));
  }
  {
    EnvGuard env({{"TRACERUN_OUTPUT", "/tmp/x/rank%r.db"},
                  {"TRACERUN_TARGET", selfExecutable()},
                  {"TRACERUN_CAPTURE", "ops,memory,cuda"},
                  {"TRACERUN_SHAPES", "0"},
                  {"TRACERUN_CLAIM", "1"},
                  {"RANK", "3"},
                  {"WORLD_SIZE", "4"}});
    auto c = configFromEnvironment(&why);
    REQUIRE(c);
    CHECK(c->output == "/tmp/x/rank3.db");
    CHECK(c->ops);
    CHECK_FALSE(c->scopes);
    CHECK(c->memory);
    CHECK_FALSE(c->shapes);
    CHECK(c->claim);
    CHECK(c->rank == 3);
    CHECK(c->world_size == 4);
  }
}

TEST_CASE("the TSC clock follows CLOCK_MONOTONIC and never steps back across refits") {
  if (!core::enableTscClock()) {
    WARN("TSC clock not usable here (clocksource or CPU flags); nowNs() is clock_gettime");
    CHECK_FALSE(core::tscClockEnabled());
    return;
  }
  REQUIRE(core::tscClockEnabled());
  // Error against an independent CLOCK_MONOTONIC read between two TSC reads: the monotonic time
  // must lie between them, widened by the fit's tolerance (10 us after a 10 ms calibration; the
  // refits below bring it down).
  auto maxError = [] {
    int64_t worst = 0;
    for (int i = 0; i < 1000; ++i) {
      const int64_t a = core::nowNs();
      const int64_t m = core::monotonicNs();
      const int64_t b = core::nowNs();
      if (m < a) worst = std::max(worst, a - m);
      if (m > b) worst = std::max(worst, m - b);
    }
    return worst;
  };
  CHECK(maxError() < 10'000);
  // Refit every 50 ms for 0.5 s while another thread checks the clock never runs backwards.
  std::atomic<bool> stop{false};
  std::atomic<int64_t> backwards{0};
  std::thread reader([&] {
    int64_t last = core::nowNs();
    while (!stop.load()) {
      const int64_t now = core::nowNs();
      if (now < last) backwards.fetch_add(1);
      last = now;
    }
  });
  // A refit slopes the line to meet CLOCK_MONOTONIC one period later, so a refit that comes late
  // (a 50 ms sleep overrun on a loaded machine) leaves the error multiplied by the overrun. The
  // claim is about refits on schedule: at least 10, the last 5 of them within 1.2 periods of the
  // one before (each then shrinks the error to a fifth or less), for at most 10 s.
  int64_t lastError = 0;
  int onTime = 0;
  auto lastRefit = std::chrono::steady_clock::now();
  for (int i = 0; i < 200 && (i < 10 || onTime < 5); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    lastError = core::recalibrateClock(50'000'000);
    const auto now = std::chrono::steady_clock::now();
    onTime = now - lastRefit < std::chrono::milliseconds(60) ? onTime + 1 : 0;
    lastRefit = now;
  }
  INFO("refits on schedule at the end: " << onTime);
  stop = true;
  reader.join();
  CHECK(backwards.load() == 0);
  CHECK(std::abs(lastError) < 2'000);
  CHECK(maxError() < 2'000);
}

TEST_CASE("a refit published long after its measurement never steps a reading back") {
  if (!core::enableTscClock()) {
    WARN("TSC clock not usable here (clocksource or CPU flags); nowNs() is clock_gettime");
    return;
  }
  struct FreshFitAfter {  // whatever runs next in this process gets a fresh line
    ~FreshFitAfter() {
      core::disableTscClock();
      core::enableTscClock();
    }
  } freshFit;
  // Put the line 5 ms ahead of CLOCK_MONOTONIC (a jump forward, within the slew range): the refit
  // then slows it by the most a refit may, 1/1000.
  {
    auto& l = core::clock_detail::gLine;
    core::clock_detail::publish(l.baseTsc.load(), l.baseNs.load() + 5'000'000,
                                l.nsPerTick32.load());
  }
  const core::ClockRefit refit = core::measureClockRefit(1'000'000'000);
  REQUIRE(refit.ns_per_tick32 != 0);
  CHECK(refit.error_ns > 4'000'000);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> largestStepBack{0};
  std::thread reader([&] {
    int64_t last = core::nowNs();
    while (!stop.load()) {
      const int64_t now = core::nowNs();
      if (now < last && last - now > largestStepBack.load()) largestStepBack = last - now;
      last = now;
    }
  });
  // The refitting thread preempted for 50 ms between measuring and publishing: anchored at the
  // measurement, the slower line would start 50 us below where readers already were.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const int64_t before = core::nowNs();
  core::clock_detail::republish(refit.ns_per_tick32);
  const int64_t after = core::nowNs();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop = true;
  reader.join();
  CHECK(after >= before);  // on this thread, whatever the scheduler did with the reader
  CHECK(largestStepBack.load() == 0);
}

TEST_CASE("emitSpan appends tensor identities after the frame's arguments and drops whole pairs") {
  core::Session session(4);  // four slots: one span with two ArgsRecords fits, a second does not
  auto t = std::make_unique<ThreadState>();
  t->session = &session;
  t->buffer = &session.threadBuffer("test");
  Frame& f = t->frames[0];
  f.id = 21;
  f.name = t->intern("aten::add");
  f.start_ns = 100;
  f.ninputs = 2;
  f.inputs[0] = 0x1000;
  f.inputs[1] = 0x2000;
  const int64_t outputs[2] = {0x3000, int64_t{1} << 48 | 0x1000};
  emitSpan(*t, f, 200, outputs, 2);
  emitSpan(*t, f, 300, outputs, 2);  // does not fit: neither the span nor its args go in
  CHECK(t->buffer->ring.dropped() == 2);
  f.ninputs = 0;
  emitSpan(*t, f, 400);  // no arguments: the span alone takes the one slot left
  std::vector<core::Record> got;
  t->buffer->ring.drain([&](const core::Record* r, size_t n) { got.insert(got.end(), r, r + n); });
  REQUIRE(got.size() == 4);
  CHECK(got[0].as<core::SpanRecord>().end_ns == 200);
  CHECK(got[3].kind() == core::RecordKind::kSpan);
  CHECK(got[3].as<core::SpanRecord>().end_ns == 400);
  CHECK(got[3].as<core::SpanRecord>().name == f.name);
  std::vector<std::pair<std::string, int64_t>> args;
  for (int r = 1; r < 3; ++r) {
    const auto a = got[r].as<core::ArgsRecord>();
    CHECK(a.owner == 21);
    for (int i = 0; i < a.count; ++i)
      args.emplace_back(session.strings().get(a.args[i].key), a.args[i].value);
  }
  CHECK(args == std::vector<std::pair<std::string, int64_t>>{{"in0", 0x1000},
                                                             {"in1", 0x2000},
                                                             {"out0", 0x3000},
                                                             {"out1", int64_t{1} << 48 | 0x1000}});
}

TEST_CASE("NameCache's address table: a hit needs the same address and the same text") {
  core::StringTable strings;
  auto cache = std::make_unique<NameCache>();
  // Two pages, so a name can end right at the first page's end.
  void* raw = std::aligned_alloc(4096, 8192);
  REQUIRE(raw != nullptr);
  std::unique_ptr<void, decltype(&std::free)> pages(raw, &std::free);
  char* base = static_cast<char*>(raw);
  std::memset(base, 'z', 8192);

  char* s = base + 100;
  std::strcpy(s, "aten::addmm");
  const core::StringId addmm = cache->lookup(s, strings);
  const uint64_t misses = cache->misses();
  CHECK(cache->lookup(s, strings) == addmm);  // same address, same text
  // Same address, a prefix of the old text, a longer text, one changed byte: each its own name.
  std::strcpy(s, "aten::add");
  const core::StringId add = cache->lookup(s, strings);
  CHECK(strings.get(add) == "aten::add");
  std::strcpy(s, "aten::addmm_backward");
  CHECK(strings.get(cache->lookup(s, strings)) == "aten::addmm_backward");
  std::strcpy(s, "aten::addmn");
  CHECK(strings.get(cache->lookup(s, strings)) == "aten::addmn");
  std::strcpy(s, "aten::addmm");
  CHECK(cache->lookup(s, strings) == addmm);
  CHECK(cache->misses() == misses + 3);  // add, addmm_backward, addmn: interned once each

  // Lengths around the word and table boundaries (7, 8, 15, 16, 38, 39, 40 bytes), each read
  // back at the same address after another name was there.
  for (size_t len : {7, 8, 15, 16, 38, 39, 40, 41}) {
    const std::string name = "op::" + std::string(len - 4, 'k');
    std::strcpy(s, name.c_str());
    const core::StringId id = cache->lookup(s, strings);
    CHECK(strings.get(id) == name);
    std::strcpy(s, "aten::mul");
    CHECK(strings.get(cache->lookup(s, strings)) == "aten::mul");
    std::strcpy(s, name.c_str());
    CHECK(cache->lookup(s, strings) == id);
  }

  // A name that ends exactly where readable memory ends (the next page is PROT_NONE): the compare
  // must not touch the next page, on the first lookup nor on the hit.
  void* twoPages =
      ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(twoPages != MAP_FAILED);
  REQUIRE(::mprotect(static_cast<char*>(twoPages) + 4096, 4096, PROT_NONE) == 0);
  for (size_t len : {1, 7, 8, 9, 16, 39, 40}) {  // bytes with the NUL
    char* atEnd = static_cast<char*>(twoPages) + 4096 - len;
    std::memset(atEnd, 'r', len - 1);
    atEnd[len - 1] = '\0';
    const core::StringId id = cache->lookup(atEnd, strings);
    CHECK(strings.get(id) == std::string(len - 1, 'r'));
    CHECK(cache->lookup(atEnd, strings) == id);
  }
  ::munmap(twoPages, 8192);
}
