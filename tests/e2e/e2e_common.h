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

}  // namespace tracerun::e2e
