// exportChrome on a real fixture trace (Session + ShardWriter + merge), parsed back with
// nlohmann::json: counts per event type against the reader, X nesting per tid against the nesting
// the fixture generated, flows paired and bound to existing slices, escaping, args, counters.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "fixture_trace.h"
#include "../support/temp_dir.h"
#include "tracerun/trace/chrome_export.h"
#include "tracerun/trace/reader.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace tracerun;

namespace {

struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("tracerun-chrome") {}
};

int64_t ns(const json& microseconds) {
  return std::llround(microseconds.get<double>() * 1000.0);
}

// One X event, times in ns.
struct Slice {
  int64_t pid, tid, ts, dur;
  std::string name;
  const json* event;
  long parent = -1;  // index of the enclosing slice on the same tid, by the stack walk
  int64_t end() const { return ts + dur; }
};

// The exported file, indexed.
struct Exported {
  json doc;
  std::vector<Slice> slices;
  std::map<std::pair<int64_t, int64_t>, std::string> trackName;  // (pid, tid) -> fixture track
  std::map<std::string, int> perPhase;
  std::map<std::tuple<int64_t, std::string, int64_t, std::string>, size_t> byKey;  // rank, track,
                                                                                   // ts, name
};

std::string fixtureTrackName(std::string shown) {
  const auto tid = shown.find(" (tid ");
  if (tid != std::string::npos) shown.resize(tid);
  const auto lane = shown.find(" #");
  if (lane != std::string::npos) shown.resize(lane);
  return shown;
}

// Walks each tid's slices in (start, longest first) order with a stack: every slice must lie
// inside the one on top (or after it ends), which also gives each slice its enclosing parent.
void nest(Exported& e) {
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> byTid;
  for (size_t i = 0; i < e.slices.size(); ++i) {
    byTid[{e.slices[i].pid, e.slices[i].tid}].push_back(i);
  }
  for (auto& [tid, list] : byTid) {
    std::sort(list.begin(), list.end(), [&](size_t a, size_t b) {
      const auto& x = e.slices[a];
      const auto& y = e.slices[b];
      return x.ts != y.ts ? x.ts < y.ts : x.dur > y.dur;
    });
    std::vector<size_t> stack;
    for (size_t i : list) {
      Slice& s = e.slices[i];
      while (!stack.empty() && e.slices[stack.back()].end() <= s.ts) stack.pop_back();
      if (!stack.empty()) {
        const Slice& top = e.slices[stack.back()];
        INFO("pid " << s.pid << " tid " << s.tid << ": '" << s.name << "' [" << s.ts << ", "
                    << s.end() << "] overlaps '" << top.name << "' [" << top.ts << ", " << top.end()
                    << "] without nesting");
        REQUIRE(s.end() <= top.end());
        s.parent = static_cast<long>(stack.back());
      }
      stack.push_back(i);
    }
  }
}

Exported load(const std::string& path) {
  Exported e;
  std::ifstream in(path);
  e.doc = json::parse(in);  // throws on invalid JSON (including invalid UTF-8)
  for (const auto& ev : e.doc.at("traceEvents")) {
    const std::string ph = ev.at("ph");
    ++e.perPhase[ph];
    if (ph == "M" && ev.at("name") == "thread_name") {
      e.trackName[{ev.at("pid"), ev.at("tid")}] = fixtureTrackName(ev.at("args").at("name"));
    }
  }
  for (const auto& ev : e.doc.at("traceEvents")) {
    if (ev.at("ph") != "X") continue;
    Slice s{ev.at("pid"), ev.at("tid"), ns(ev.at("ts")), ns(ev.at("dur")), ev.at("name"), &ev};
    const std::string track = e.trackName.at({s.pid, s.tid});
    e.byKey[{s.pid, track, s.ts, s.name}] = e.slices.size();
    e.slices.push_back(s);
  }
  nest(e);
  return e;
}

// The fixture and its export, shared by the test cases (built once per process).
struct Fixture {
  TempDir dir;
  fixture::Generated g;
  std::vector<double> progress;
  trace::ChromeExportStats stats;
  trace::EventCounts counts;
  int64_t origin = 0;
  Exported e;
};

Fixture& fixtureTrace() {
  static const std::unique_ptr<Fixture> f = [] {
    auto f = std::make_unique<Fixture>();
    fixture::Options o;
    o.dir = f->dir.file("trace");
    o.ranks = 3;
    o.threads = 3;
    o.roots_per_thread = 25;
    f->g = fixture::writeFixture(o);
    auto reader = trace::TraceReader::open(f->g.merged);
    f->counts = reader.counts();
    f->origin = std::stoll(reader.meta("origin_ns"));
    const std::string out = f->dir.file("out.json");
    auto* raw = f.get();
    f->stats = trace::exportChrome(reader, out, [raw](double p) { raw->progress.push_back(p); });
    f->e = load(out);
    return f;
  }();
  return *f;
}

// The name as the export shows it: invalid UTF-8 becomes U+FFFD (the fixture has one such name).
std::string shownName(const std::string& name) {
  return name == "bad utf8 \xFF\xFE end" ? "bad utf8 \xEF\xBF\xBD\xEF\xBF\xBD end" : name;
}

size_t sliceOf(const Exported& e, const fixture::Span& s, int64_t origin) {
  const auto it = e.byKey.find({s.rank, s.track, s.start - origin, shownName(s.name)});
  if (it == e.byKey.end()) {
    FAIL("no X event for rank " << s.rank << " track '" << s.track << "' name '" << s.name
                                << "' at " << s.start - origin << " ns");
  }
  return it->second;
}

}  // namespace

TEST_CASE("chrome export: event counts per type equal the reader's") {
  auto& f = fixtureTrace();
  const auto& e = f.e;
  CHECK(e.perPhase.at("X") == f.counts.spans);
  CHECK(e.perPhase.at("i") == f.counts.instants);
  CHECK(e.perPhase.at("s") == f.counts.flows);
  CHECK(e.perPhase.at("f") == f.counts.flows);
  int64_t memory = 0, counters = 0;
  for (const auto& ev : e.doc["traceEvents"]) {
    if (ev["ph"] != "C") continue;
    const std::string name = ev["name"];
    (name.rfind("memory ", 0) == 0 ? memory : counters)++;
  }
  CHECK(memory == f.counts.memory);
  CHECK(counters == f.counts.counters);
  CHECK(f.stats.spans == f.counts.spans);
  CHECK(f.stats.instants == f.counts.instants);
  CHECK(f.stats.counters == f.counts.counters);
  CHECK(f.stats.memory == f.counts.memory);
  CHECK(f.stats.flows == f.counts.flows);
  // And the reader agrees with what the fixture generated.
  CHECK(f.counts.spans == static_cast<int64_t>(f.g.spans.size()));
  CHECK(f.counts.flows == static_cast<int64_t>(f.g.flows.size()));

  CHECK(e.doc["displayTimeUnit"] == "ns");
  CHECK(e.doc["metadata"]["origin_ns"] == std::to_string(f.origin));
  CHECK(e.doc["metadata"]["kind"] == "merged");
  REQUIRE_FALSE(f.progress.empty());
  CHECK(std::is_sorted(f.progress.begin(), f.progress.end()));
  CHECK(f.progress.back() == 1.0);
  // A process per rank, a named thread for every tid that has slices.
  std::set<int64_t> pids;
  for (const auto& ev : e.doc["traceEvents"]) {
    if (ev["ph"] == "M" && ev["name"] == "process_name") pids.insert(ev["pid"].get<int64_t>());
  }
  CHECK(pids == std::set<int64_t>{0, 1, 2});
  for (const auto& s : e.slices) CHECK(e.trackName.count({s.pid, s.tid}) == 1);
}

TEST_CASE("chrome export: X events nest per tid exactly as the generated spans") {
  auto& f = fixtureTrace();
  const auto& e = f.e;
  size_t checked = 0, nested = 0;
  for (const auto& s : f.g.spans) {
    const Slice& x = e.slices[sliceOf(e, s, f.origin)];
    CHECK(x.dur == s.end - s.start);
    if (s.parent < 0) {
      // Roots enclose nothing's children: no generated parent, no enclosing slice.
      CHECK(x.parent == -1);
    } else {
      const auto& p = f.g.spans[static_cast<size_t>(s.parent)];
      REQUIRE(x.parent >= 0);
      const Slice& px = e.slices[static_cast<size_t>(x.parent)];
      INFO("span '" << s.name << "' at " << s.start - f.origin);
      CHECK(px.name == shownName(p.name));
      CHECK(px.ts == p.start - f.origin);
      CHECK(x.tid == px.tid);
      ++nested;
    }
    ++checked;
  }
  CHECK(checked == f.g.spans.size());
  CHECK(nested > 100);
  // Overlapping collectives on the async lane were moved to extra lanes to stay nestable.
  bool extraLane = false;
  for (const auto& ev : e.doc["traceEvents"]) {
    if (ev["ph"] == "M" && ev["name"] == "thread_name") {
      extraLane = extraLane || ev["args"]["name"] == "gloo lane #2";
    }
  }
  CHECK(extraLane);
}

TEST_CASE("chrome export: flows pair up and land on existing slices") {
  auto& f = fixtureTrace();
  const auto& e = f.e;
  std::map<int64_t, std::vector<const json*>> starts, finishes;
  for (const auto& ev : e.doc["traceEvents"]) {
    if (ev["ph"] == "s") starts[ev["id"]].push_back(&ev);
    if (ev["ph"] == "f") finishes[ev["id"]].push_back(&ev);
  }
  REQUIRE(starts.size() == f.g.flows.size());
  std::multiset<std::tuple<int64_t, int64_t, int64_t>> want, got;
  for (const auto& fl : f.g.flows)
    want.insert({fl.rank, fl.src_ts - f.origin, fl.dst_ts - f.origin});
  for (const auto& [id, s] : starts) {
    REQUIRE(s.size() == 1);
    REQUIRE(finishes[id].size() == 1);
    const json& a = *s[0];
    const json& b = *finishes[id][0];
    CHECK(b["bp"] == "e");
    CHECK(a["name"] == b["name"]);
    // "s" at the start of a slice on its tid; "f" inside (here: at the start of) one on its tid.
    const auto onSlice = [&](const json& ev, bool exactStart) {
      const int64_t pid = ev["pid"], tid = ev["tid"], ts = ns(ev["ts"]);
      return std::any_of(e.slices.begin(), e.slices.end(), [&](const Slice& x) {
        return x.pid == pid && x.tid == tid &&
               (exactStart ? x.ts == ts : x.ts <= ts && ts <= x.end());
      });
    };
    CHECK(onSlice(a, true));
    CHECK(onSlice(b, false));
    got.insert({a["pid"].get<int64_t>(), ns(a["ts"]), ns(b["ts"])});
  }
  CHECK(got == want);
}

TEST_CASE("chrome export: names escaped, args, counters and memory carried") {
  auto& f = fixtureTrace();
  const auto& e = f.e;
  std::set<std::string> names;
  for (const auto& s : e.slices) names.insert(s.name);
  CHECK(names.count("weird \"quoted\"\tname \xC3\xBC \\ end") == 1);
  CHECK(names.count("control\x01"
                    "char") == 1);
  CHECK(names.count("bad utf8 \xEF\xBF\xBD\xEF\xBF\xBD end") == 1);  // U+FFFD for bad bytes

  size_t withArgs = 0;
  for (const auto& s : f.g.spans) {
    const json& ev = *e.slices[sliceOf(e, s, f.origin)].event;
    for (const auto& [key, value] : s.args) {
      REQUIRE(ev.contains("args"));
      CHECK(ev["args"][key] == value);
      ++withArgs;
    }
    if (!s.detail.empty()) CHECK(ev["args"]["detail"] == s.detail);
    if (s.seq >= 0) CHECK(ev["args"]["seq"] == s.seq);
    CHECK(ev["cat"] == core::categoryName(static_cast<core::Category>(s.category)));
  }
  CHECK(withArgs > 50);

  std::multiset<std::tuple<int64_t, std::string, int64_t, double>> wantC, gotC;
  for (const auto& c : f.g.counters) wantC.insert({c.rank, c.name, c.ts - f.origin, c.value});
  std::multiset<std::tuple<int64_t, std::string, int64_t, double>> wantM, gotM;
  for (const auto& m : f.g.memory) {
    wantM.insert(
        {m.rank, m.device_type ? "memory CUDA:0" : "memory CPU", m.ts - f.origin, double(m.total)});
  }
  for (const auto& ev : e.doc["traceEvents"]) {
    if (ev["ph"] != "C") continue;
    const std::string name = ev["name"];
    if (name.rfind("memory ", 0) == 0) {
      gotM.insert({ev["pid"], name, ns(ev["ts"]), ev["args"]["live bytes"].get<double>()});
    } else {
      gotC.insert({ev["pid"], name, ns(ev["ts"]), ev["args"]["value"].get<double>()});
    }
  }
  CHECK(gotC == wantC);
  CHECK(gotM == wantM);

  std::multiset<std::tuple<int64_t, int64_t, int64_t>> wantI, gotI;
  for (const auto& i : f.g.instants) wantI.insert({i.rank, i.ts - f.origin, i.value});
  for (const auto& ev : e.doc["traceEvents"]) {
    if (ev["ph"] != "i") continue;
    CHECK(ev["s"] == "t");
    gotI.insert({ev["pid"], ns(ev["ts"]), ev["args"]["value"]});
  }
  CHECK(gotI == wantI);
}

TEST_CASE("chrome export: an unwritable destination fails naming it, leaving nothing behind") {
  auto& f = fixtureTrace();
  auto reader = trace::TraceReader::open(f.g.merged);
  const std::string bad = f.dir.file("missing-dir/out.json");
  try {
    trace::exportChrome(reader, bad);
    FAIL("export to a missing directory succeeded");
  } catch (const trace::TraceError& err) {
    CHECK_THAT(err.what(), Catch::StartsWith(bad + ": cannot write"));
  }
  CHECK_FALSE(fs::exists(f.dir.file("missing-dir")));
  // Exporting over the trace itself is refused before anything is written.
  const std::string copy = f.dir.file("copy.db");
  fs::copy_file(f.g.merged, copy);
  {
    auto copyReader = trace::TraceReader::open(copy);
    CHECK_THROWS_WITH(trace::exportChrome(copyReader, copy), Catch::Contains("is the trace"));
  }
  CHECK(trace::TraceReader::open(copy).counts().spans == f.counts.spans);
  // Writing to /dev/full fails at the end and says so.
  if (fs::exists("/dev/full")) {
    CHECK_THROWS_AS(trace::exportChrome(reader, "/dev/full"), trace::TraceError);
  }
}
