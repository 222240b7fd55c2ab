// Issue 12 point 8: readable messages for out-of-range numeric flags (not CLI11's 300-digit bound)
// and error lines that quote a damaged file with its control bytes escaped (\xNN), never raw.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "e2e_common.h"

using namespace tracerun::e2e;

namespace {

void sqlite(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  INFO(msg);
  REQUIRE(rc == SQLITE_OK);
}

// No byte that a terminal would act on, other than the line ends.
bool noControlBytes(const std::string& s) {
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\n') || c == 0x7f) return false;
  }
  return true;
}

void requireUsageError(const std::vector<std::string>& args, const std::string& line) {
  const auto r = runTracerun(args);
  std::string cmd = "tracerun";
  for (const auto& a : args) cmd += " " + a;
  INFO(cmd << "\n" << r.describe());
  REQUIRE(r.exited);
  CHECK(r.exit_code == 2);
  REQUIRE(r.errLines().size() == 1);
  CHECK(r.errLines()[0] == line);
  CHECK(r.out.empty());
}

}  // namespace

TEST_CASE("numeric flags out of range: one readable line, exit code 2") {
  const std::string trace = fixtureTrace().merged;
  const std::string report = " (see tracerun report --help)";
  requireUsageError({"report", "--top", "-3", trace},
                    "tracerun: --top: must be a whole number >= 1, not '-3'" + report);
  requireUsageError({"report", "--top", "0", trace},
                    "tracerun: --top: must be a whole number >= 1, not '0'" + report);
  requireUsageError({"report", "--top", "2.5", trace},
                    "tracerun: --top: must be a whole number >= 1, not '2.5'" + report);
  requireUsageError({"report", "--top", "many", trace},
                    "tracerun: --top: must be a whole number >= 1, not 'many'" + report);
  requireUsageError({"report", "--top", "99999999999", trace},
                    "tracerun: --top: must be a whole number from 1 to 2147483647, not "
                    "'99999999999'" +
                        report);

  const std::string top = " (see tracerun --help)";
  requireUsageError({"--max-restarts", "-1", "--", "true"},
                    "tracerun: --max-restarts: must be a whole number >= 0, not '-1'" + top);
  requireUsageError({"--stop-grace", "-2", "--", "true"},
                    "tracerun: --stop-grace: must be a number >= 0, not '-2'" + top);
  requireUsageError({"--stop-grace", "nan", "--", "true"},
                    "tracerun: --stop-grace: must be a number >= 0, not 'nan'" + top);
  requireUsageError({"--node-rank", "-1", "--", "true"},
                    "tracerun: --node-rank: must be a whole number >= 0, not '-1'" + top);
}

TEST_CASE("error lines escape the control bytes of a damaged file") {
  ScratchDir dir("escape");
  const std::string path = dir.file("evil-magic.db");
  copyFile(fixtureTrace().merged, path);
  // ESC [31m (red), BEL, a newline, DEL and an invalid UTF-8 byte in the magic; ü stays.
  sqlite(path,
         "UPDATE meta SET value = 'evil' || char(27) || '[31m' || char(7) || char(10) || 'x' || "
         "char(127) || CAST(x'ff' AS TEXT) || 'ü' WHERE key = 'magic'");
  const std::string expected = "tracerun: " + path +
                               ": not a tracerun trace (meta magic is "
                               "'evil\\x1b[31m\\x07\\x0ax\\x7f\\xffü')";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"info", path},
        {"report", path},
        {"report", "--json", path},
        {"export", path, "--chrome", dir.file("out.json")}}) {
    const auto r = runTracerun(args);
    INFO(args[0] << "\n" << r.describe());
    REQUIRE(r.exited);
    CHECK(r.exit_code == 1);
    REQUIRE(r.errLines().size() == 1);
    CHECK(r.errLines()[0] == expected);
    CHECK(noControlBytes(r.err));
  }
}

TEST_CASE("report's lost-data line escapes a stat name from the file") {
  ScratchDir dir("escape");
  const std::string path = dir.file("evil-stat.db");
  copyFile(fixtureTrace().merged, path);
  sqlite(path,
         "INSERT INTO stats (rank, name, value, severity) VALUES (0, 'lost' || char(27) || "
         "']0;owned' || char(7), 3, 2)");
  const auto r = runTracerun({"report", path});
  INFO(r.describe());
  REQUIRE(r.exited);
  CHECK(r.exit_code == 3);
  REQUIRE(r.errLines().size() == 1);
  CHECK(r.errLines()[0] == "tracerun: " + path +
                               ": the capture lost data (rank 0: lost\\x1b]0;owned\\x07 = 3): the "
                               "report is incomplete");
  CHECK(noControlBytes(r.err));
}
