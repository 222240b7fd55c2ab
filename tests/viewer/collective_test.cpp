// traceview's collectives tab on a real 4-rank gpttrain trace (TP 2 x DP 2): the instance of a
// selected collective span is found on every rank with the arrival, start, end and wait a brute
// force over the trace's spans computes (same group, same sequence number); the straggler table
// equals the brute force's; the groups hold the calls `tracerun report --json` counts; and the
// heatmap shows the last rank's mark in the cell computed from the trace.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "app/palette.h"
#include "e2e_common.h"
#include "tracerun/trace/reader.h"
#include "viewer_test_util.h"

using namespace tracerun;
using namespace tracerun::viewertest;
using nlohmann::json;

namespace {

struct Call {
  int rank = 0;
  int64_t id = 0, start = 0, end = 0;
};

// (decorator track name, seq) -> the calls, one per rank: straight from the trace's rows.
using Instances = std::map<std::pair<std::string, int64_t>, std::vector<Call>>;

// A collective call's span: communication, not a point-to-point send or receive.
bool isCollective(const trace::TraceReader& reader, const trace::SpanRow& s) {
  if (s.category != core::Category::kComm) return false;
  const std::string& name = reader.str(s.name);
  return name.find("send") == std::string::npos && name.find("recv") == std::string::npos;
}

// The span's argument `key`, or -1 when it has none.
int64_t argOf(const trace::TraceReader& reader, int64_t span, const std::string& key) {
  int64_t v = -1;
  for (const auto& a : reader.args(span))
    if (reader.str(a.key) == key) v = a.value;
  return v;
}

Instances bruteForce(const trace::TraceReader& reader) {
  Instances out;
  for (const auto& t : reader.tracks()) {
    if (t.name.rfind("c10d ", 0) != 0) continue;
    for (const auto& s : reader.spans(t.id, INT64_MIN / 2, INT64_MAX / 2)) {
      if (!isCollective(reader, s)) continue;
      const int64_t seq = argOf(reader, s.id, "seq");
      REQUIRE(seq >= 0);
      out[{t.name, seq}].push_back({t.rank, s.id, s.start_ns, s.end_ns()});
    }
  }
  for (auto& [k, calls] : out) {
    std::sort(calls.begin(), calls.end(),
              [](const Call& a, const Call& b) { return a.rank < b.rank; });
  }
  return out;
}

// The last to arrive: the latest start, ties to the lowest rank.
int lastRank(const std::vector<Call>& calls) {
  const Call* last = &calls.front();
  for (const Call& c : calls)
    if (c.start > last->start) last = &c;
  return last->rank;
}

std::vector<std::string> linesStarting(const std::string& text, const std::string& word) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(word + " ", 0) == 0) out.push_back(line);
  }
  return out;
}

// "k1 v1 k2 v2 ..." -> map (values as text); a line with an odd number of words starts with a
// keyword of its own ("selected group 3 seq 7 ..."), which is skipped.
std::map<std::string, std::string> fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  std::map<std::string, std::string> m;
  for (size_t i = words.size() % 2; i + 1 < words.size(); i += 2) m[words[i]] = words[i + 1];
  return m;
}

std::vector<int> intList(const std::string& s) {
  std::vector<int> v;
  std::istringstream in(s);
  for (std::string x; std::getline(in, x, ',');) v.push_back(std::stoi(x));
  return v;
}

#ifdef GPTTRAIN_BIN
// gpttrain on `ranks` ranks through the launcher (made once per test process).
// `capture`: the launcher's --capture list ("" = its default).
std::string gptTrace(const std::string& name, int ranks, const std::vector<std::string>& gpt,
                     const std::string& capture = "") {
  std::vector<std::string> launcher = {"--nproc-per-node", std::to_string(ranks)};
  if (!capture.empty()) launcher.insert(launcher.end(), {"--capture", capture});
  return scratchGpttrain(name, launcher, gpt);
}

// gpttrain's arguments for a 4-rank TP 2 x DP 2 run: four groups of two.
const std::vector<std::string> kTp2Dp2 = {"--tp",    "2", "--layers",  "1",  "--hidden",       "32",
                                          "--heads", "4", "--seq-len", "16", "--global-batch", "4",
                                          "--steps", "3", "--quiet"};

// That run with every capture (the c10d decorator included).
std::string tp2dp2() {
  return gptTrace("tp2dp2", 4, kTp2Dp2);
}

// The instance with the widest arrival spread among those two or more ranks made (null if none).
const std::pair<std::string, int64_t>* widestInstance(const Instances& all) {
  const std::pair<std::string, int64_t>* chosen = nullptr;
  int64_t widest = -1;
  for (const auto& [key, calls] : all) {
    if (calls.size() < 2) continue;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const Call& c : calls) lo = std::min(lo, c.start), hi = std::max(hi, c.start);
    if (hi - lo > widest) {
      widest = hi - lo;
      chosen = &key;
    }
  }
  return chosen;
}

// The dump's selected instance (sequence `seq`, last rank `last`): its rows rank by rank, each
// the brute force's call with the arrival, start, end, wait and lag computed from the calls.
void checkSelected(const std::string& text, int64_t seq, const std::vector<Call>& calls, int last) {
  const auto sel = linesStarting(text, "selected");
  REQUIRE(sel.size() == 1);
  CHECK(fields(sel[0])["seq"] == std::to_string(seq));
  CHECK(fields(sel[0])["last"] == std::to_string(last));
  const auto rows = linesStarting(text, "rank");
  REQUIRE(rows.size() == calls.size());
  int64_t lastArrival = INT64_MIN, firstArrival = INT64_MAX;
  for (const Call& c : calls) {
    lastArrival = std::max(lastArrival, c.start);
    firstArrival = std::min(firstArrival, c.start);
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    const Call& c = calls[i];
    auto f = fields(rows[i]);
    const int64_t start = std::clamp(lastArrival, c.start, c.end);
    CHECK(f["rank"] == std::to_string(c.rank));
    CHECK(f["span"] == std::to_string(c.id));
    CHECK(f["arrival"] == std::to_string(c.start));
    CHECK(f["start"] == std::to_string(start));
    CHECK(f["end"] == std::to_string(c.end));
    CHECK(f["wait"] == std::to_string(start - c.start));
    CHECK(f["lag"] == std::to_string(c.start - firstArrival));
  }
}

// The straggler table: who arrived last, over every instance with two or more ranks, as the brute
// force counts it and as the dump shows it (rank -> (last, instances)).
void checkStragglers(const std::string& text, const Instances& all) {
  std::map<int, std::pair<int64_t, int64_t>> expected;
  for (const auto& [key, cs] : all) {
    if (cs.size() < 2) continue;
    for (const Call& c : cs) ++expected[c.rank].second;
    ++expected[lastRank(cs)].first;
  }
  std::map<int, std::pair<int64_t, int64_t>> shown;
  for (const auto& line : linesStarting(text, "straggler")) {
    auto f = fields(line);
    shown[std::stoi(f["rank"])] = {std::stoll(f["last"]), std::stoll(f["instances"])};
  }
  CHECK(shown == expected);
}
#endif

}  // namespace

#ifdef GPTTRAIN_BIN

TEST_CASE("collectives view: one instance on every rank of a TP 2 x DP 2 gpttrain run") {
  e2e::ScratchDir dir("vcoll");
  const std::string db = tp2dp2();
  const auto reader = trace::TraceReader::open(db);
  const Instances all = bruteForce(reader);
  // The chosen call: the instance with the widest arrival spread among those two or more ranks
  // made; its span on a rank that was not last (the view must find the others).
  const std::pair<std::string, int64_t>* chosen = widestInstance(all);
  REQUIRE(chosen != nullptr);
  const std::vector<Call>& calls = all.at(*chosen);
  const int last = lastRank(calls);
  const Call& picked = calls.front().rank == last ? calls.back() : calls.front();
  INFO("instance " << chosen->first << " seq " << chosen->second << ", selected span "
                   << picked.id);

  const std::string png = dir.file("coll.png"), dump = dir.file("coll.txt");
  runTraceviewOk({db, "--select", std::to_string(picked.id), "--view", "collectives", "--size",
                  "1600x900", "--dump-view", dump, "--screenshot", png},
                 dir.path());
  const std::string text = e2e::readFile(dump);
  INFO(text);

  // The selected instance: every rank's row equals the brute force's, and marks the last rank.
  checkSelected(text, chosen->second, calls, last);
  const auto rows = linesStarting(text, "rank");
  for (size_t i = 0; i < calls.size(); ++i) {
    CHECK(fields(rows[i])["last"] == (calls[i].rank == last ? "1" : "0"));
  }

  checkStragglers(text, all);

  // Groups: as many instances as the brute force finds, and as many calls as the report counts
  // for that op and member set (summed over callers).
  const json j = reportJson(db);
  std::map<std::vector<int>, int64_t> reportCalls;
  for (const auto& c : j["comm"]["collectives"]) {
    reportCalls[c["ranks"].get<std::vector<int>>()] += c["calls"].get<int64_t>();
  }
  std::map<std::string, int64_t> bruteCount;
  for (const auto& [key, cs] : all) ++bruteCount[key.first];
  const auto groups = linesStarting(text, "group");
  REQUIRE(groups.size() == bruteCount.size());
  std::map<std::string, int> groupIndex;
  for (const auto& line : groups) {
    const std::string name = line.substr(line.find(" name ") + 6);
    auto f = fields(line.substr(0, line.find(" name ")));
    groupIndex[name] = std::stoi(f["group"]);
    CHECK(std::stoll(f["instances"]) == bruteCount[name]);
    CHECK(reportCalls[intList(f["members"])] == bruteCount[name]);
  }

  // The heatmap: the chosen instance's column, the last rank's row holds the red mark, the other
  // ranks' cells a lag colour.
  const auto hm = linesStarting(text, "heatmap");
  REQUIRE(hm.size() == 1);
  auto h = fields(hm[0]);
  CHECK(std::stoi(h["group"]) == groupIndex[chosen->first]);
  int col = 0;
  for (const auto& [key, cs] : all) {
    if (key.first == chosen->first && key.second < chosen->second) ++col;
  }
  const std::vector<int> order = intList(h["rows"]);
  const double x0 = std::stod(h["x"]), y0 = std::stod(h["y"]), colW = std::stod(h["col_w"]),
               rowH = std::stod(h["row_h"]), first = std::stod(h["first_col"]);
  REQUIRE(colW >= 6);
  const double cx = x0 + (col - first) * colW + (colW - 1) / 2;
  REQUIRE(cx > x0);
  REQUIRE(cx < x0 + std::stod(h["w"]));
  const Png shot = loadPng(png);
  const uint32_t mark = paletteRgb(viewer::palette::kCollLast);
  for (size_t row = 0; row < order.size(); ++row) {
    const int cy = static_cast<int>(y0 + rowH * static_cast<double>(row) + (rowH - 1) / 2);
    const uint32_t px = shot.rgb(static_cast<int>(cx), cy);
    INFO("rank " << order[row] << " pixel " << std::hex << px);
    if (order[row] == last) {
      CHECK(px == mark);
    } else {
      CHECK(px != mark);
      CHECK(px != paletteRgb(viewer::palette::kBackground));
      CHECK(px != paletteRgb(viewer::palette::kCollAbsent));
    }
  }
}

// Without the c10d decorator (--capture without comm) the trace holds only Gloo's own spans
// ("gloo:all_reduce" on each rank's async track), and gpttrain's C++ calls record no group: an
// instance is the k-th call of one signature (name, shapes, bytes) on every rank of a group, and
// the ranks of a group are those whose k-th calls all overlap in time (10 us slack, between any
// two of them directly or through others); the ranks that overlap nobody make one group. The
// brute force groups the rows so from that definition, straight from the reader; the key of an
// instance is "signature [members]" and its ordinal.
Instances bruteForceBySignature(const trace::TraceReader& reader,
                                std::map<std::string, std::vector<int>>* members) {
  // signature -> rank -> calls
  std::map<std::string, std::map<int, std::vector<Call>>> bySig;
  for (const auto& t : reader.tracks()) {
    REQUIRE(t.name.rfind("c10d ", 0) != 0);  // the premise: no decorator track
    if (t.kind == core::TrackKind::kCounter || t.kind == core::TrackKind::kMemory) continue;
    for (const auto& s : reader.spans(t.id, INT64_MIN / 2, INT64_MAX / 2)) {
      if (!isCollective(reader, s)) continue;
      REQUIRE(argOf(reader, s.id, "group_size") < 0);  // the premise: no group recorded
      const std::string sig = reader.str(s.name) + "|" + reader.str(s.detail) + "|" +
                              std::to_string(argOf(reader, s.id, "bytes"));
      bySig[sig][t.rank].push_back({t.rank, s.id, s.start_ns, s.end_ns()});
    }
  }
  constexpr int64_t kSlackNs = 10'000;
  auto together = [&](const std::vector<Call>& a, const std::vector<Call>& b) {
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k) {
      if (a[k].start > b[k].end + kSlackNs || b[k].start > a[k].end + kSlackNs) return false;
    }
    return true;
  };
  Instances out;
  for (auto& [sig, byRank] : bySig) {
    for (auto& [rank, calls] : byRank) {
      std::sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) {
        return std::tie(a.start, a.id) < std::tie(b.start, b.id);
      });
    }
    // Components of the "together" relation, by a walk from each rank not yet reached.
    std::map<int, int> component;
    int next = 0;
    for (const auto& [start, unused] : byRank) {
      if (component.count(start)) continue;
      std::vector<int> todo{start};
      component[start] = next;
      while (!todo.empty()) {
        const int r = todo.back();
        todo.pop_back();
        for (const auto& [other, calls] : byRank) {
          if (!component.count(other) && together(byRank[r], calls)) {
            component[other] = next;
            todo.push_back(other);
          }
        }
      }
      ++next;
    }
    std::map<int, std::vector<int>> groups;
    for (const auto& [r, c] : component) groups[c].push_back(r);
    std::vector<int> alone;
    for (const auto& [c, g] : groups) {
      if (g.size() == 1) alone.push_back(g[0]);
    }
    for (auto& [c, g] : groups) {
      if (g.size() == 1) g = alone;
      std::string key = sig + " [";
      for (int r : g) key += (key.back() == '[' ? "" : ",") + std::to_string(r);
      key += "]";
      (*members)[key] = g;
      for (int r : g) {
        for (size_t k = 0; k < byRank[r].size(); ++k) {
          auto& calls = out[{key, static_cast<int64_t>(k)}];
          if (std::none_of(calls.begin(), calls.end(),
                           [&](const Call& x) { return x.id == byRank[r][k].id; }))
            calls.push_back(byRank[r][k]);
        }
      }
    }
  }
  for (auto& [key, calls] : out) {
    std::sort(calls.begin(), calls.end(),
              [](const Call& a, const Call& b) { return a.rank < b.rank; });
  }
  return out;
}

TEST_CASE("collectives view: without the decorator, calls match by signature and order") {
  e2e::ScratchDir dir("vcoll-sig");
  const std::string db = gptTrace("tp2dp2-nocomm", 4, kTp2Dp2, "ops,scopes");
  const auto reader = trace::TraceReader::open(db);
  std::map<std::string, std::vector<int>> members;
  const Instances all = bruteForceBySignature(reader, &members);
  REQUIRE(all.size() > 4);
  // The instance with the widest arrival spread; its span on a rank that was not last.
  const std::pair<std::string, int64_t>* chosen = widestInstance(all);
  REQUIRE(chosen != nullptr);
  const std::vector<Call>& calls = all.at(*chosen);
  const int last = lastRank(calls);
  const Call& picked = calls.front().rank == last ? calls.back() : calls.front();
  INFO("instance " << chosen->first << " #" << chosen->second << ", selected span " << picked.id);
  const std::string dump = dir.file("coll.txt");
  runTraceviewOk({db, "--select", std::to_string(picked.id), "--view", "collectives", "--size",
                  "1600x900", "--dump-view", dump, "--screenshot", dir.file("coll.png")},
                 dir.path());
  const std::string text = e2e::readFile(dump);
  INFO(text);

  // The selected instance, rank by rank.
  checkSelected(text, chosen->second, calls, last);

  // Stragglers over every instance of two or more ranks.
  checkStragglers(text, all);

  // Groups: one per signature and group of ranks, with as many instances as the most calls one of
  // its ranks made.
  std::multiset<std::pair<std::string, int64_t>> want, got;
  std::map<std::string, int64_t> count;
  for (const auto& [key, cs] : all) count[key.first] = std::max(count[key.first], key.second + 1);
  for (const auto& [sig, n] : count) {
    std::string m;
    for (int k : members.at(sig)) m += (m.empty() ? "" : ",") + std::to_string(k);
    want.insert({m, n});
  }
  for (const auto& line : linesStarting(text, "group")) {
    auto f = fields(line.substr(0, line.find(" name ")));
    got.insert({f["members"], std::stoll(f["instances"])});
  }
  CHECK(got == want);
}

TEST_CASE("collectives view: a click on a heatmap cell selects that rank's call") {
  e2e::ScratchDir dir("vcoll-click");
  const std::string db = tp2dp2();
  const auto reader = trace::TraceReader::open(db);
  const Instances all = bruteForce(reader);
  // Open on the first instance of a TP group (its first call, rank order first).
  const auto first = std::find_if(all.begin(), all.end(), [](const auto& kv) {
    return kv.first.first.find(" tp ") != std::string::npos && kv.second.size() == 2;
  });
  REQUIRE(first != all.end());
  const std::string group = first->first.first;
  const std::string dump = dir.file("coll.txt");
  const std::vector<std::string> args{db,
                                      "--size",
                                      "1600x900",
                                      "--view",
                                      "collectives",
                                      "--select",
                                      std::to_string(first->second[0].id)};
  std::vector<std::string> shot = args;
  shot.insert(shot.end(), {"--screenshot", dir.file("coll.png"), "--dump-view", dump});
  runTraceviewOk(shot, dir.path());
  std::string text = e2e::readFile(dump);
  auto h = fields(linesStarting(text, "heatmap").at(0));
  const std::vector<int> order = intList(h["rows"]);
  const double x0 = std::stod(h["x"]), y0 = std::stod(h["y"]), colW = std::stod(h["col_w"]),
               rowH = std::stod(h["row_h"]), firstCol = std::stod(h["first_col"]);
  // The instance two after the selected one in that group (its column from the trace: the
  // group's instances by sequence), on its second row's rank.
  auto it = first;
  std::advance(it, 2);
  REQUIRE(it->first.first == group);
  int col = 0;
  for (const auto& [key, cs] : all) col += key.first == group && key.second < it->first.second;
  const int rank = order.at(1);
  const Call* target = nullptr;
  for (const Call& c : it->second)
    if (c.rank == rank) target = &c;
  REQUIRE(target != nullptr);
  const int cx = static_cast<int>(x0 + (col - firstCol) * colW + colW / 2);
  const int cy = static_cast<int>(y0 + rowH * 1 + rowH / 2);
  // A script (--script) hovers the cell for a frame, clicks it, waits for the answers, dumps.
  const std::string after = dir.file("coll-after.txt");
  const auto r = runScript(args,
                           {"0 move " + std::to_string(cx) + " " + std::to_string(cy), "+1 click",
                            "+1 settle", "+0 dump-view " + after},
                           dir.path(), "coll-script.txt");
  INFO(r.out);
  REQUIRE(r.out.find("selected span " + std::to_string(target->id) + " of collective") !=
          std::string::npos);
  text = e2e::readFile(after);
  INFO(text);
  const auto sel = linesStarting(text, "selected");
  REQUIRE(sel.size() == 1);
  CHECK(fields(sel[0])["seq"] == std::to_string(it->first.second));
  std::vector<std::string> spans;
  for (const auto& line : linesStarting(text, "rank")) spans.push_back(fields(line)["span"]);
  std::vector<std::string> expected;
  for (const Call& c : it->second) expected.push_back(std::to_string(c.id));
  CHECK(spans == expected);
}

TEST_CASE("collectives view: point-to-point wait and transfer equal the report's") {
  e2e::ScratchDir dir("vcoll-p2p");
  const std::string db = gptTrace("pp2", 2,
                                  {"--pp", "2", "--schedule", "1f1b", "--global-batch", "4",
                                   "--layers", "2", "--hidden", "32", "--steps", "2", "--quiet"});
  const std::string dump = dir.file("coll.txt");
  runTraceviewOk(
      {db, "--view", "collectives", "--dump-view", dump, "--screenshot", dir.file("p2p.png")},
      dir.path());
  const std::string text = e2e::readFile(dump);
  INFO(text);
  const json p2p = reportJson(db)["comm"]["p2p"];
  const auto lines = linesStarting(text, "p2p");
  REQUIRE(!p2p.empty());
  REQUIRE(lines.size() == p2p.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    auto f = fields(lines[i]);
    CHECK(f["src"] == p2p[i]["src"].dump());
    CHECK(f["dst"] == p2p[i]["dst"].dump());
    CHECK(f["kind"] == p2p[i]["kind"].get<std::string>());
    for (const char* k : {"messages", "matched", "wait_ns", "transfer_ns"}) {
      CHECK(f[k] == p2p[i][k].dump());
    }
  }
}

#endif
