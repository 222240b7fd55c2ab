// Shared pieces of the end-to-end tests: a scratch directory, the fixture trace (made once per test
// process through the real writer and merge), and running the built tracerun binary.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "fixture_trace.h"
#include "run_process.h"

namespace tracerun::e2e {

// A fresh directory under $TMPDIR, removed when destroyed.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const noexcept { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The fixture trace: 3 ranks with clock offsets, 3 threads each, merged into run.db.
const fixture::Generated& fixtureTrace();
// A directory for this test process's scratch files (removed at exit).
const ScratchDir& scratch();

// Runs the built tracerun with args.
ProcessResult runTracerun(const std::vector<std::string>& args);

// `tracerun LAUNCHER_ARGS -- GPTTRAIN GPT_ARGS --threads 1`, with one intra-op and one BLAS
// thread per rank: quick and repeatable on a small machine.
ProcessResult runGpttrain(const std::vector<std::string>& launcher_args,
                          const std::string& gpttrain, const std::vector<std::string>& gpt_args);

// Copies a file byte for byte.
void copyFile(const std::string& from, const std::string& to);
std::string readFile(const std::string& path);
void writeFile(const std::string& path, const std::string& bytes);

// One pipeline action of a traced run, read straight from the file with SQL (not through trace/'s
// reader or analyses), as docs/report.md "Pipeline" defines them: a forward/backward/
// backward_input/backward_weight phase span with a `stage` argument, or a send_*/recv_* user span
// with a `peer` argument, lying inside a `step` phase span of its rank (on a thread track).
struct TracedAction {
  int rank = 0;
  std::string name;
  int64_t id = 0, start = 0, end = 0;
  int step = 0;  // the enclosing step span's `step` argument
  int64_t stage = -1, chunk = 0, microbatch = 0, peer = -1;
  bool compute() const { return name.rfind("send_", 0) != 0 && name.rfind("recv_", 0) != 0; }
};

// Every such action of the trace, in (rank, start, id) order; throws on an unreadable file.
inline std::vector<TracedAction> tracedPipelineActions(const std::string& db) {
  sqlite3* handle = nullptr;
  if (sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(handle);
    throw std::runtime_error("cannot open " + db);
  }
  const char* sql =
      "SELECT k.rank, s.id, s.start_ns, s.start_ns + s.dur_ns, n.value, "
      "(SELECT a.value FROM args a JOIN strings x ON x.id = a.key WHERE a.span = s.id AND x.value "
      "= 'stage'), (SELECT a.value FROM args a JOIN strings x ON x.id = a.key WHERE a.span = s.id "
      "AND x.value = 'chunk'), (SELECT a.value FROM args a JOIN strings x ON x.id = a.key WHERE "
      "a.span = s.id AND x.value = 'microbatch'), (SELECT a.value FROM args a JOIN strings x ON "
      "x.id = a.key WHERE a.span = s.id AND x.value = 'peer'), (SELECT a.value FROM args a JOIN "
      "strings x ON x.id = a.key WHERE a.span = s.id AND x.value = 'step') FROM spans s JOIN "
      "tracks k ON k.id = s.track JOIN strings n ON n.id = s.name WHERE k.kind = 0 AND "
      "((s.category "
      "= 5 AND n.value IN ('step', 'forward', 'backward', 'backward_input', 'backward_weight')) OR "
      "(s.category = 2 AND n.value IN ('send_forward', 'send_backward', 'recv_forward', "
      "'recv_backward'))) ORDER BY k.rank, s.start_ns, s.id";
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(handle, sql, -1, &stmt, nullptr) != SQLITE_OK) {
    const std::string why = sqlite3_errmsg(handle);
    sqlite3_close(handle);
    throw std::runtime_error(db + ": " + why);
  }
  auto intOr = [&](int col, int64_t fallback) {
    return sqlite3_column_type(stmt, col) == SQLITE_NULL ? fallback
                                                         : sqlite3_column_int64(stmt, col);
  };
  std::vector<TracedAction> all, steps;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    TracedAction a;
    a.rank = static_cast<int>(sqlite3_column_int64(stmt, 0));
    a.id = sqlite3_column_int64(stmt, 1);
    a.start = sqlite3_column_int64(stmt, 2);
    a.end = sqlite3_column_int64(stmt, 3);
    a.name = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 4));
    a.stage = intOr(5, -1);
    a.chunk = intOr(6, 0);
    a.microbatch = intOr(7, 0);
    a.peer = intOr(8, -1);
    a.step = static_cast<int>(intOr(9, -1));
    (a.name == "step" ? steps : all).push_back(a);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
  std::vector<TracedAction> out;
  for (TracedAction& a : all) {
    if (a.compute() ? a.stage < 0 : a.peer < 0) continue;
    for (const TracedAction& s : steps) {  // steps of one rank do not overlap
      if (s.rank == a.rank && s.start <= a.start && a.end <= s.end) a.step = s.step;
    }
    if (a.step >= 0) out.push_back(a);
  }
  return out;
}

// The length of the longest dependency chain through one step's actions (docs/report.md,
// "critical_path"), by brute force: `step` holds the actions of one step of one pipeline in
// (rank, start, id) order, ranks in pipeline order. Each action follows the previous one of its
// rank, and a receive the send it received (the k-th send from src to dst per direction and
// microbatch pairs with the k-th such receive). An action weighs the part of it after the
// effective end of what it follows (its own end, or later when what it follows ended later; a
// send later in this order counts its recorded end, as trace/analysis/critical_path.cpp does).
// Longest paths by relaxing every action until nothing changes (at most one round per action).
inline int64_t criticalPathLength(const std::vector<TracedAction>& step) {
  const size_t n = step.size();
  auto key = [](const TracedAction& a, bool send) {
    const bool forward = a.name.size() >= 7 && a.name.compare(a.name.size() - 7, 7, "forward") == 0;
    return std::vector<int64_t>{send ? a.rank : a.peer, send ? a.peer : a.rank, forward ? 0 : 1,
                                a.microbatch};
  };
  std::map<std::vector<int64_t>, std::vector<size_t>> sends, recvs;
  for (size_t i = 0; i < n; ++i) {
    if (step[i].name.rfind("send_", 0) == 0) sends[key(step[i], true)].push_back(i);
    if (step[i].name.rfind("recv_", 0) == 0) recvs[key(step[i], false)].push_back(i);
  }
  std::vector<long> match(n, -1), previous(n, -1);
  for (const auto& [k, list] : recvs) {
    const auto it = sends.find(k);
    for (size_t j = 0; it != sends.end() && j < list.size() && j < it->second.size(); ++j) {
      match[list[j]] = static_cast<long>(it->second[j]);
    }
  }
  std::vector<int64_t> weight(n), effectiveEnd(n);
  std::map<int, size_t> last;  // rank -> its latest action so far
  for (size_t i = 0; i < n; ++i) {
    int64_t from = step[i].start;
    const auto prev = last.find(step[i].rank);
    if (prev != last.end()) {
      previous[i] = static_cast<long>(prev->second);
      from = std::max(from, effectiveEnd[prev->second]);
    }
    if (match[i] >= 0) {
      const size_t s = static_cast<size_t>(match[i]);
      from = std::max(from, s < i ? effectiveEnd[s] : step[s].end);
    }
    weight[i] = std::max<int64_t>(0, step[i].end - from);
    effectiveEnd[i] = std::max(step[i].end, from);
    last[step[i].rank] = i;
  }
  std::vector<int64_t> longest = weight;
  bool changed = true;
  for (size_t round = 0; changed && round <= n; ++round) {
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      int64_t before = 0;
      if (previous[i] >= 0) before = longest[static_cast<size_t>(previous[i])];
      if (match[i] >= 0) before = std::max(before, longest[static_cast<size_t>(match[i])]);
      if (weight[i] + before > longest[i]) {
        longest[i] = weight[i] + before;
        changed = true;
      }
    }
  }
  return n == 0 ? 0 : *std::max_element(longest.begin(), longest.end());
}

}  // namespace tracerun::e2e
