// Named stats reported by a capture source through core::Session::setStat reach the shard's stats
// table with their severity, `tracerun info` lists them, and `tracerun report` treats an error row
// as lost data (exit 3, docs/report.md). No libtorch.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "../support/child_process.h"
#include "../support/temp_dir.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/shard_writer.h"

using namespace tracerun;

namespace {

// Writes a shard with one span (so the report has something to read) and the given stats.
void writeShard(const std::string& path,
                const std::map<std::string, std::pair<int64_t, int>>& stats,
                bool writerOverride = false) {
  core::Session session;
  for (const auto& [name, v] : stats) {
    session.setStat(name, v.first, static_cast<core::StatSeverity>(v.second));
  }
  trace::ShardOptions options;
  options.path = path;
  trace::ShardWriter writer(session, options);
  writer.start();
  core::ThreadBuffer& b = session.threadBuffer("main");
  core::SpanRecord s;
  s.name = session.strings().intern("aten::add");
  s.start_ns = 1000;
  s.end_ns = 2000;
  s.id = b.nextId();
  REQUIRE(b.ring.tryPush(core::Record::from(s)));
  if (writerOverride) writer.setStat("cupti_kernels", 99, trace::Severity::kWarning);
  writer.close();
}

std::map<std::string, trace::StatRow> statsOf(const std::string& path) {
  std::map<std::string, trace::StatRow> m;
  for (const auto& s : trace::TraceReader::open(path).stats()) m[s.name] = s;
  return m;
}

testing::ProcessResult runTracerun(const std::vector<std::string>& args, const std::string& dir) {
  std::vector<std::string> argv{TRACERUN_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  testing::Child child(argv, dir);
  return child.wait();
}

}  // namespace

TEST_CASE("session stats land in the stats table with their severity") {
  testing::TempDir dir("tracerun-stats");
  const std::string db = dir.file("shard.db");
  writeShard(db, {{"cupti_dropped_records", {12, 2}},
                  {"cupti_kernels", {5, 0}},
                  {"cupti_records_without_op", {3, 1}}});
  auto stats = statsOf(db);
  REQUIRE(stats.count("cupti_dropped_records") == 1);
  CHECK(stats["cupti_dropped_records"].value == 12);
  CHECK(stats["cupti_dropped_records"].severity == trace::Severity::kError);
  CHECK(stats["cupti_kernels"].value == 5);
  CHECK(stats["cupti_kernels"].severity == trace::Severity::kInfo);
  CHECK(stats["cupti_records_without_op"].severity == trace::Severity::kWarning);
  CHECK(stats.count("dropped_events") == 1);  // the writer's own rows are still there

  const auto info = runTracerun({"info", db}, dir.path.string());
  INFO(info.describe());
  CHECK(info.code == 0);
  CHECK(info.out.find("cupti_dropped_records") != std::string::npos);
  CHECK(info.out.find("cupti_kernels") != std::string::npos);

  const auto report = runTracerun({"report", db}, dir.path.string());
  INFO(report.describe());
  CHECK(report.code == 3);  // an error-severity stat: the capture lost data
  CHECK(report.err.find("cupti_dropped_records = 12") != std::string::npos);
}

TEST_CASE("session stats: info severity does not fail the report, the writer wins a name clash") {
  testing::TempDir dir("tracerun-stats");
  const std::string db = dir.file("shard.db");
  writeShard(db, {{"cupti_dropped_records", {0, 0}}, {"cupti_kernels", {5, 0}}},
             /*writerOverride=*/true);
  auto stats = statsOf(db);
  CHECK(stats["cupti_dropped_records"].value == 0);
  CHECK(stats["cupti_kernels"].value == 99);
  CHECK(stats["cupti_kernels"].severity == trace::Severity::kWarning);
  const auto report = runTracerun({"report", db}, dir.path.string());
  INFO(report.describe());
  CHECK(report.code == 0);
}
