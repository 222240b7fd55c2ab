// --offload-optimizer nvme:DIR (issue 31 point 1) on 2 ranks: the losses are bit-equal to the same
// ZeRO stage without offload (1, 2, 3, and 2 with bf16-mixed); traced, the ranks' own device (the
// CPU here) holds no optimizer state at its peak while the report's "nvme" device holds the states
// (1.5 x what the non-offloaded run's log counts: the master weights beside the two moments) and
// the Memory tab's ZeRO line for the device counts parameters and gradients only; the
// file reads and writes are spans with bytes on a track of their own, overlapping the CPU updates;
// the refused combinations exit 2 with one line. --offload-optimizer cpu needs a GPU: tests/gpu's.
#include "trainer_test_util.h"

#include "tracerun/trace/analysis/memory_live.h"
#include "tracerun/trace/analysis/memory_summary.h"
#include "tracerun/trace/reader.h"

#include <sqlite3.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <dirent.h>

#include <algorithm>
#include <map>
#include <regex>

using namespace gpttrain::testing;

namespace {

std::vector<std::string> offloadModel() {
  return tinyModelArgs() + std::vector<std::string>{"--bucket-mb", "0.01"};
}

// The "optimizer states N B" of a rank's end-of-run line.
long long heldOptimizerStates(const std::string& log) {
  std::smatch m;
  REQUIRE(std::regex_search(log, m, std::regex("optimizer states ([0-9]+) B")));
  return std::stoll(m[1]);
}

int filesIn(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

struct Interval {
  long long track, start, end;
};

// Spans named `name` of `rank`: track, start and end.
std::vector<Interval> spansOf(const std::string& db, int rank, const std::string& name) {
  sqlite3* h = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(
              h,
              "SELECT s.track, s.start_ns, s.start_ns + s.dur_ns FROM spans s JOIN tracks t ON "
              "t.id = s.track JOIN strings n ON n.id = s.name WHERE t.rank = ? AND "
              "n.value = ? ORDER BY s.start_ns",
              -1, &st, nullptr) == SQLITE_OK);
  sqlite3_bind_int(st, 1, rank);
  sqlite3_bind_text(st, 2, name.c_str(), -1, SQLITE_TRANSIENT);
  std::vector<Interval> out;
  while (sqlite3_step(st) == SQLITE_ROW) {
    out.push_back(
        {sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2)});
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}

}  // namespace

TEST_CASE("nvme offload gives the losses of the same ZeRO layout without it, bit for bit",
          "[trainer][offload]") {
  const std::vector<std::vector<std::string>> layouts = {
      {"--zero", "1"},
      {"--zero", "2"},
      {"--zero", "3"},
      {"--zero", "2", "--precision", "bf16-mixed"},  // fp32 master weights of bf16 shards
  };
  for (size_t i = 0; i < layouts.size(); ++i) {
    INFO("layout " << i << ": " << layouts[i][1] << (layouts[i].size() > 2 ? " bf16-mixed" : ""));
    const std::string dir = scratchDir("offload_losses_" + std::to_string(i));
    const std::string states = dir + "/states";
    REQUIRE(std::system(("mkdir -p " + states).c_str()) == 0);
    const auto args = offloadModel() + layouts[i];
    auto plain =
        launchRanks(kGpttrain, args + std::vector<std::string>{"--log-json", dir + "/plain.json"},
                    2, dir + "/plain");
    REQUIRE(plain.ok());
    auto offload =
        launchRanks(kGpttrain,
                    args + std::vector<std::string>{"--offload-optimizer", "nvme:" + states,
                                                    "--log-json", dir + "/offload.json"},
                    2, dir + "/offload");
    INFO(offload.summary());
    REQUIRE(offload.ok());
    const auto want = jsonValues(dir + "/plain.json", "loss");
    const auto got = jsonValues(dir + "/offload.json", "loss");
    REQUIRE(want.size() == 5);
    CHECK(got == want);
    for (int r = 0; r < 2; ++r) {
      CHECK(heldOptimizerStates(plain.logs[r]) > 0);
      CHECK(heldOptimizerStates(offload.logs[r]) == 0);  // nothing on the device
    }
    CHECK(filesIn(states) == 0);  // the state files go with the run
  }
}

TEST_CASE(
    "traced nvme offload: no optimizer state on the device, the states on an nvme device, "
    "file I/O on its own track overlapping the updates",
    "[trainer][offload][trace]") {
  const std::string dir = scratchDir("offload_trace");
  const std::string states = dir + "/states", db = dir + "/run.db";
  REQUIRE(std::system(("mkdir -p " + states).c_str()) == 0);
  // hidden 128: buckets of 0.01 MiB, some 18 a rank, each long enough to be seen overlapping
  const auto args = offloadModel() + std::vector<std::string>{"--zero", "1", "--hidden", "128"};
  auto plain = launchRanks(kGpttrain, args, 2, dir + "/plain");
  REQUIRE(plain.ok());
  const long long moments = heldOptimizerStates(plain.logs[0]);  // 8 bytes a shard element
  auto run = launchRanks(
      TRACERUN_EXE,
      std::vector<std::string>{"--nproc-per-node", "2", "-o", db, "-q", "--", kGpttrain} + args +
          std::vector<std::string>{"--offload-optimizer", "nvme:" + states},
      0, dir);
  INFO(run.summary());
  REQUIRE(run.ok());
  auto report = launchRanks(TRACERUN_EXE, {"report", db, "--json"}, 0, dir + "/report");
  REQUIRE(report.ok());
  const std::string text = report.logs[0];
  const auto j = nlohmann::json::parse(text.substr(text.find('{')));
  const auto& ranks = j.at("memory").at("per_rank");
  REQUIRE(ranks.size() == 2);
  const auto reader = tracerun::trace::TraceReader::open(db);
  for (const auto& rank : ranks) {
    INFO("rank " << rank.at("rank") << ", primary device " << rank.at("device"));
    CHECK(rank.at("device") == "cpu");
    CHECK(rank.at("category_peaks").at("optimizer_state") == 0);
    CHECK(rank.at("by_category").at("optimizer_state") == 0);
    bool nvme = false;
    for (const auto& d : rank.at("devices")) {
      if (d.at("device") != "nvme") continue;
      nvme = true;
      // master weights (4 bytes) beside the two moments (8 bytes) of every shard element
      CHECK(d.at("category_peaks").at("optimizer_state") == moments * 3 / 2);
      CHECK(d.at("peak_bytes") == moments * 3 / 2);
    }
    CHECK(nvme);
    // The Memory tab's ZeRO line for the cpu, given the rank's series as the tab has them: the
    // parameters and gradients ZeRO-1 keeps there, 8 psi, equal to the report's bytes of the two
    // at the device's peak (the parameters' own peak, at start-up, also counts a 256 KiB weight
    // allocated while the model is built); without the series it still counts the moments,
    // 8 psi/N more: the plain run's.
    const int r = rank.at("rank").get<int>();
    namespace an = tracerun::trace::analysis;
    const auto series = an::memorySummary(reader, r).series;
    const auto forms = an::memoryClosedForms(reader, r, series);
    const auto on_device = an::memoryClosedForms(reader, r);
    REQUIRE(forms.size() == 1);
    REQUIRE(on_device.size() == 1);
    INFO(forms[0].label);
    CHECK(forms[0].formula == "8\u03a8");
    CHECK(forms[0].label.find("ZeRO-1 offload 8 psi = ") == 0);
    CHECK(forms[0].label.find("; on nvme: 12 psi/N") != std::string::npos);
    const auto& at_peak = rank.at("by_category");
    CHECK(forms[0].bytes == at_peak.at("parameter").get<double>() +
                                at_peak.at("gradient").get<double>() +
                                at_peak.at("optimizer_state").get<double>());
    CHECK(on_device[0].bytes - forms[0].bytes == double(moments));
    // The nvme chart's line, 12 psi/N, is the bytes the report puts there (checked above).
    int offload_lines = 0;
    for (const auto& s : series) {
      for (const auto& f : an::offloadClosedForms(reader, s)) {
        ++offload_lines;
        INFO(f.label);
        CHECK(s.rank == r);
        CHECK(f.formula == "12\u03a8/N");
        CHECK(f.bytes == double(moments * 3 / 2));
      }
    }
    CHECK(offload_lines == 1);
  }
  int overlapping = 0;  // over both ranks: whether a thread runs when it may is the machine's say
  for (int rank = 0; rank < 2; ++rank) {
    const auto reads = spansOf(db, rank, "offload_nvme_read");
    const auto writes = spansOf(db, rank, "offload_nvme_write");
    const auto updates = spansOf(db, rank, "offload_cpu_adamw");
    REQUIRE(!reads.empty());
    // per bucket: one read and one write a step (5 steps), and the initial write
    REQUIRE(reads.size() % 5 == 0);
    REQUIRE(writes.size() == reads.size() + reads.size() / 5);
    REQUIRE(reads.size() == updates.size());              // one of each per bucket and step
    CHECK(reads.front().track != updates.front().track);  // the I/O thread's own track
    CHECK(writes.front().track == reads.front().track);
    // The overlap by design, whatever the load: the training thread asks for bucket b+1's read
    // before it updates bucket b (the prefetch), so the I/O may run during the update. Read from
    // the order of its own spans: before each update of a bucket that has a next one, the last
    // request it made is that next bucket's read.
    const size_t buckets = reads.size() / 5;
    REQUIRE(buckets >= 2);
    struct Mark {
      int64_t start;
      bool update, write;
      int64_t bucket;
    };
    std::vector<Mark> marks;
    for (const auto& t : reader.tracks()) {
      if (t.rank != rank || t.id != updates.front().track) continue;
      reader.forEachSpan(t.id, [&](const tracerun::trace::SpanRow& sp) {
        const std::string name = reader.str(sp.name);
        if (name != "offload_cpu_adamw" && name != "offload_nvme_post") return;
        Mark m{sp.start_ns, name == "offload_cpu_adamw", false, -1};
        for (const auto& a : reader.args(sp.id)) {
          if (reader.str(a.key) == "bucket") m.bucket = a.value;
          if (reader.str(a.key) == "write") m.write = a.value != 0;
        }
        marks.push_back(m);
      });
    }
    std::sort(marks.begin(), marks.end(),
              [](const Mark& a, const Mark& b) { return a.start < b.start; });
    int prefetched = 0, prefetchable = 0;
    for (size_t i = 1; i < marks.size(); ++i) {
      if (!marks[i].update || marks[i].bucket + 1 >= static_cast<int64_t>(buckets)) continue;
      ++prefetchable;
      const Mark& asked = marks[i - 1];
      prefetched += !asked.update && !asked.write && asked.bucket == marks[i].bucket + 1;
    }
    CHECK(prefetchable == static_cast<int>((buckets - 1) * 5));
    CHECK(prefetched == prefetchable);
    // Overlap as it happened: some read or write ran while an update ran (the next bucket's
    // prefetch, the previous one's write-back), when the machine gave the I/O thread a core. Said,
    // not checked: on a loaded machine both threads of a rank may never run at once.
    for (const auto* io : {&reads, &writes}) {
      for (const Interval& a : *io) {
        for (const Interval& u : updates) overlapping += a.start < u.end && u.start < a.end;
      }
    }
    UNSCOPED_INFO("rank " << rank << ": " << reads.size() << " reads, " << overlapping
                          << " I/O spans overlapping an update so far");
  }
  WARN("I/O spans overlapping an update on the two ranks: " << overlapping);
}

TEST_CASE("offload's refused combinations exit 2 with one line", "[trainer][offload]") {
  const std::string dir = scratchDir("offload_refused");
  const std::vector<std::vector<std::string>> refused = {
      {"--offload-optimizer", "nvme:" + dir},           // --zero 0
      {"--zero", "1", "--offload-optimizer", "cpu"},    // the CPU device
      {"--zero", "1", "--offload-optimizer", "nvme:"},  // no directory
      {"--zero", "1", "--offload-optimizer", "disk"},   // no such place
  };
  for (const auto& extra : refused) {
    auto run = launchRanks(kGpttrain, tinyModelArgs() + extra, 0, dir);
    INFO(run.logs[0]);
    CHECK(run.exit_codes[0] == 2);
    const std::string& log = run.logs[0];
    CHECK(std::count(log.begin(), log.end(), '\n') == 1);
    CHECK(log.find("offload") != std::string::npos);
  }
  auto missing =
      launchRanks(kGpttrain,
                  tinyModelArgs() + std::vector<std::string>{"--zero", "1", "--offload-optimizer",
                                                             "nvme:" + dir + "/no/such/dir"},
                  0, dir + "/missing");
  CHECK(missing.exit_codes[0] != 0);
  CHECK(missing.logs[0].find(dir + "/no/such/dir") != std::string::npos);
}
