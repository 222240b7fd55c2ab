// traceview's elastic restart marker under Xvfb (timeline/restart_overlay.h): a trace written
// through the real writer with a "restart" instant and the launcher's elastic_round_V_world stats
// shows one vertical line at the column the instant's time maps to (its time read back from the
// instants table, its world sizes from the stats table), in the marker colour on the screenshot;
// a window that leaves the instant out draws none. A trace of two attempts (merged as the elastic
// launcher merges its rounds) shows the earlier attempt's rows first, its counter rows ending with
// its ranks, and the marker's world sizes from the attempts table.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "app/palette.h"
#include "temp_dir.h"
#include "tracerun/core/clock.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/merge.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/shard_writer.h"
#include "viewer_test_util.h"

using namespace tracerun;
using namespace tracerun::viewertest;

namespace {

// 40 spans of 15 us every 20 us on one thread, a "restart" instant (round 1) in the middle and,
// when `stats`, the stats an elastic round 1 at world 1 after world 2 leaves.
void writeRestartTrace(const std::string& path, bool stats) {
  core::Session session(4096);
  trace::ShardOptions so;
  so.path = path;
  so.host = "test-host";
  so.pid = 4243;
  trace::ShardWriter writer(session, so);
  writer.start();
  core::ThreadBuffer& buf = session.threadBuffer("main");
  const core::StringId name = session.strings().intern("aten::mm");
  const int64_t t0 = core::nowNs() + 1000;
  for (int i = 0; i < 40; ++i) {
    core::SpanRecord r;
    r.category = core::Category::kOp;
    r.name = name;
    r.id = buf.nextId();
    r.start_ns = t0 + i * 20000;
    r.end_ns = r.start_ns + 15000;
    REQUIRE(buf.ring.tryPush(core::Record::from(r)));
  }
  core::InstantRecord in;
  in.category = core::Category::kPhase;
  in.name = session.strings().intern("restart");
  in.ts_ns = t0 + 20 * 20000 + 17000;  // in the gap after span 20
  in.value = 1;
  REQUIRE(buf.ring.tryPush(core::Record::from(in)));
  if (stats) {
    writer.setStat("elastic_rounds", 2, trace::Severity::kInfo);
    writer.setStat("elastic_round_0_world", 2, trace::Severity::kInfo);
    writer.setStat("elastic_round_1_world", 1, trace::Severity::kInfo);
  }
  writer.close();
}

// One rank of one attempt: 40 spans of 15 us every 20 us from t0 on "main", a "loss" counter
// sample at each span's start, and (restart) the restart instant of round 1 just before t0.
void writeAttemptShard(const std::string& path, int rank, int world, int64_t t0, bool restart) {
  core::Session session(4096);
  trace::ShardOptions so;
  so.path = path;
  so.rank = rank;
  so.world_size = world;
  so.host = "test-host";
  so.pid = 5000 + rank;
  trace::ShardWriter writer(session, so);
  writer.start();
  core::ThreadBuffer& buf = session.threadBuffer("main");
  const core::StringId name = session.strings().intern("aten::mm");
  const core::StringId loss = session.strings().intern("loss");
  if (restart) {
    core::InstantRecord in;
    in.category = core::Category::kPhase;
    in.name = session.strings().intern("restart");
    in.ts_ns = t0 - 500;
    in.value = 1;
    REQUIRE(buf.ring.tryPush(core::Record::from(in)));
  }
  for (int i = 0; i < 40; ++i) {
    core::SpanRecord r;
    r.category = core::Category::kOp;
    r.name = name;
    r.id = buf.nextId();
    r.start_ns = t0 + i * 20000;
    r.end_ns = r.start_ns + 15000;
    REQUIRE(buf.ring.tryPush(core::Record::from(r)));
    core::CounterRecord c;
    c.name = loss;
    c.ts_ns = r.start_ns;
    c.value = 4.0 - i * 0.01;
    REQUIRE(buf.ring.tryPush(core::Record::from(c)));
  }
  writer.close();
}

struct Marker {
  int rank = -1;
  double x = 0;
  int64_t round = 0, world = 0, prev = 0;
};

std::vector<Marker> readMarkers(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<Marker> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string a, b;
    s >> a >> b;
    if (a != "instant" || b != "restart") continue;
    Marker m;
    s >> m.rank >> m.x >> m.round >> m.world >> m.prev;
    REQUIRE(s);
    out.push_back(m);
  }
  return out;
}

}  // namespace

TEST_CASE("an elastic restart instant is a marker line at its time with its world sizes",
          "[viewer][restart]") {
  testing::TempDir dir("traceview-restart");
  for (const bool stats : {true, false}) {
    INFO("stats rows " << stats);
    const std::string db = dir.file(stats ? "el.db" : "bare.db");
    writeRestartTrace(db, stats);
    const auto reader = trace::TraceReader::open(db);
    // The independent truth: the instants table and the stats table.
    int64_t ts = -1, round = -1, rank = -1;
    for (const auto& t : reader.tracks()) {
      for (const auto& i : reader.instants(t.id, INT64_MIN / 2, INT64_MAX / 2)) {
        if (reader.str(i.name) != "restart") continue;
        ts = i.ts_ns;
        round = i.value;
        rank = t.rank;
      }
    }
    REQUIRE(ts >= 0);
    std::map<std::string, int64_t> st;
    for (const auto& s : reader.stats()) st[s.name] = s.value;
    const int64_t world = st.count("elastic_round_1_world") ? st["elastic_round_1_world"] : -1;
    const int64_t prev = st.count("elastic_round_0_world") ? st["elastic_round_0_world"] : -1;
    CHECK(world == (stats ? 1 : -1));

    const std::string shot = dir.file(stats ? "el.png" : "bare.png");
    const std::string layout = dir.file("layout.txt");
    runTraceviewOk({db, "--screenshot", shot, "--size", "1200x700", "--dump-layout", layout},
                   dir.path.string());
    const Layout l = readLayout(layout);
    const auto markers = readMarkers(layout);
    REQUIRE(markers.size() == 1);
    const Marker& m = markers[0];
    CHECK(m.rank == rank);
    CHECK(m.round == round);
    CHECK(m.world == world);
    CHECK(m.prev == prev);
    const double want = l.xOf(static_cast<double>(ts));
    CHECK(std::fabs(l.area_x + m.x - want) <= 1.0);

    // On the picture: the marker colour at that column in the middle of the track's row (a
    // span-free column: the instant sits in a gap), and nowhere 20 px to either side.
    const Png png = loadPng(shot);
    REQUIRE(l.rows.size() == 1);
    const auto& row = l.rows.begin()->second;
    const int y = static_cast<int>(row.y + row.h / 2);
    const uint32_t marker = paletteRgb(viewer::palette::kRestart);
    const int xi = static_cast<int>(std::floor(want));
    bool seen = false;
    for (int x = xi - 1; x <= xi + 1; ++x) seen = seen || png.rgb(x, y) == marker;
    CHECK(seen);
    CHECK(png.rgb(xi - 20, y) != marker);
    CHECK(png.rgb(xi + 20, y) != marker);
  }

  SECTION("hovering the marker shows its tooltip, 10 px beside it does not") {
    const std::string db = dir.file("el.db");
    const std::string layout = dir.file("hover-layout.txt");
    runTraceviewOk(
        {db, "--screenshot", dir.file("h.png"), "--size", "1200x700", "--dump-layout", layout},
        dir.path.string());
    const Layout l = readLayout(layout);
    const auto markers = readMarkers(layout);
    REQUIRE(markers.size() == 1);
    REQUIRE(l.rows.size() == 1);
    const auto& row = l.rows.begin()->second;
    const auto xy = [](double x, double y) {
      return std::to_string(static_cast<int>(std::lround(x))) + " " +
             std::to_string(static_cast<int>(std::lround(y)));
    };
    const double x = l.area_x + markers[0].x, y = row.y + row.h / 2;
    const std::string on = dir.file("on.txt"), off = dir.file("off.txt");
    const auto r = runScript({db, "--size", "1200x700"},
                             {"0 settle", "+0 move " + xy(x, y), "+2 dump-layout " + on,
                              "+0 screenshot " + dir.file("hover.png"), "+1 move " + xy(x + 10, y),
                              "+2 dump-layout " + off},
                             dir.path.string(), "restart-hover.txt");
    INFO(r.out);
    auto text = [](const std::string& path) {
      std::ifstream in(path);
      std::stringstream ss;
      ss << in.rdbuf();
      return ss.str();
    };
    CHECK(text(on).find("restart-hover " + std::to_string(markers[0].rank) + " 1\n") !=
          std::string::npos);
    CHECK(text(off).find("restart-hover") == std::string::npos);
  }

  SECTION("a window before the restart draws no marker") {
    const std::string db = dir.file("el.db");
    const auto reader = trace::TraceReader::open(db);
    const auto [a, b] = reader.timeRange();
    const std::string range = std::to_string(0) + ":" + std::to_string((b - a) / 4);
    const std::string layout = dir.file("early.txt");
    runTraceviewOk({db, "--screenshot", dir.file("early.png"), "--size", "1200x700",
                    "--dump-layout", layout, "--range", range},
                   dir.path.string());
    CHECK(readMarkers(layout).empty());
  }
}

TEST_CASE("two attempts in one trace: the earlier one's rows first and ending with it",
          "[viewer][restart]") {
  testing::TempDir dir("traceview-attempts");
  // Attempt 0: ranks 0 and 1 at world 2; attempt 1, 1 ms after it: rank 0 at world 1.
  const int64_t t0 = core::nowNs() + 1000, t1 = t0 + 2'000'000;
  std::vector<trace::MergeInput> inputs;
  for (const auto& [attempt, rank] : {std::pair(0, 0), std::pair(0, 1), std::pair(1, 0)}) {
    const std::string shard =
        dir.file("a" + std::to_string(attempt) + "r" + std::to_string(rank) + ".db");
    writeAttemptShard(shard, rank, attempt == 0 ? 2 : 1, attempt == 0 ? t0 : t1, attempt == 1);
    inputs.push_back({shard});
    inputs.back().attempt = attempt;
  }
  const std::string db = dir.file("run.db");
  trace::mergeShards(inputs, trace::MergeOptions{db, {}});
  // The truth from the file: which rank row is which attempt's, and where attempt 0 ends.
  const auto reader = trace::TraceReader::open(db);
  std::map<int, int> attemptOf;
  int64_t attempt0End = 0;
  for (const auto& k : reader.ranks()) {
    attemptOf[k.rank] = k.attempt;
    if (k.attempt == 0) attempt0End = std::max(attempt0End, k.end_ns);
  }
  REQUIRE(attemptOf == std::map<int, int>{{0, 1}, {1, 0}, {2, 0}});
  std::map<int64_t, bool> counterRow;  // track id -> a counter row
  for (const auto& t : reader.tracks()) counterRow[t.id] = t.kind == core::TrackKind::kCounter;

  const std::string shot = dir.file("attempts.png"), layout = dir.file("layout.txt");
  runTraceviewOk({db, "--screenshot", shot, "--size", "1200x700", "--dump-layout", layout},
                 dir.path.string());
  const Layout l = readLayout(layout);
  std::map<int, double> top;  // rank -> its first row's y
  for (const auto& [track, row] : l.rows) {
    if (!top.count(row.rank) || row.y < top[row.rank]) top[row.rank] = row.y;
  }
  REQUIRE(top.size() == 3);
  CHECK(top[1] < top[2]);  // attempt 0's ranks, in their order
  CHECK(top[2] < top[0]);  // then attempt 1's
  const auto markers = readMarkers(layout);
  REQUIRE(markers.size() == 1);
  CHECK(markers[0].rank == 0);
  CHECK(markers[0].world == 1);  // from the attempts table: this file has no stats rows
  CHECK(markers[0].prev == 2);

  // On the picture: an earlier attempt's counter row has no line right of its rank's end; the
  // last attempt's holds its value to the right edge.
  const Png png = loadPng(shot);
  const uint32_t line = paletteRgb(viewer::palette::kCounterLine);
  auto lineIn = [&](const Layout::Row& row, int x0, int x1) {
    for (int x = x0; x <= x1; ++x) {
      for (int y = static_cast<int>(row.y) + 1; y < static_cast<int>(row.y + row.h) - 1; ++y) {
        if (png.rgb(x, y) == line) return true;
      }
    }
    return false;
  };
  const int endX = static_cast<int>(std::ceil(l.xOf(static_cast<double>(attempt0End))));
  const int right = static_cast<int>(l.area_x + l.area_w) - 2;
  // (Loop run 33 failed here once, endX 1204 against right 766, not reproduced: what the view
  // opened on, to read when it fails again.)
  INFO("view area x " << l.area_x << " w " << l.area_w << ", time " << l.t0 << ".." << l.t1
                      << " ns; attempt 0 ends at " << attempt0End << " ns");
  REQUIRE(endX + 10 < right - 10);
  int checked = 0;
  for (const auto& [track, row] : l.rows) {
    if (!counterRow[track]) continue;
    INFO("counter row of rank " << row.rank);
    if (attemptOf[row.rank] == 0) {
      CHECK(lineIn(row, static_cast<int>(l.area_x), endX));  // drawn while it ran
      CHECK_FALSE(lineIn(row, endX + 10, right - 10));
    } else {
      CHECK(lineIn(row, right - 10, right));
    }
    ++checked;
  }
  CHECK(checked == 3);
}
