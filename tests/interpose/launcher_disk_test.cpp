// End-to-end: the launcher on a full disk. The output's file system is a small tmpfs the test
// mounts in a mount namespace of its own when it may, and in any case a file-size limit
// (RLIMIT_FSIZE, SIGXFSZ ignored) that makes every write past it fail; each with both trace
// writers (TRACERUN_WRITER raw, the default, and sqlite). Either way the run must fail with one
// line that names the room and how to merge later, and keep the shards, which `tracerun merge`
// then merges with every row they hold. No libtorch in this test binary.
#include <sched.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "../support/child_process.h"
#include "tracerun/trace/reader.h"

namespace fs = std::filesystem;
using namespace tracerun;

namespace {

using Result = testing::ProcessResult;

const std::string& scratch() {
  static const std::string dir = [] {
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    return testing::processScratchDir("tracerun_launcher_disk");
  }();
  return dir;
}

Result run(const std::vector<std::string>& argv) {
  return testing::Child(argv, scratch()).wait();
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// The lines of `text` that contain `what`.
int linesWith(const std::string& text, const std::string& what) {
  int n = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    n += text.substr(start, end - start).find(what) != std::string::npos;
    start = end + 1;
  }
  return n;
}

// 2 ranks of the worker for about 6 s with the trace writer `writer` (TRACERUN_WRITER): the raw
// writer's file (the default) or the SQLite writer's -wal (it commits every second) grows until
// the limit or the tmpfs stops it.
std::vector<std::string> job(const std::string& output, const std::string& writer) {
  return {"/usr/bin/env",
          "TRACERUN_WRITER=" + writer,
          TRACERUN_BIN,
          "-o",
          output,
          "--nproc-per-node",
          "2",
          "--status",
          "off",
          "--",
          WORKER_BIN,
          "--steps",
          "300",
          "--sleep-ms",
          "20"};
}

// What every full-disk run must end with: a failure, one line saying where the shards are and
// how to merge them, the shards there, and `tracerun merge` recovering both ranks from them.
void checkKeptAndMergeable(const Result& r, const std::string& output) {
  INFO(r.describe());
  CHECK(r.code != 0);
  const std::string shards = output + ".shards";
  CHECK(linesWith(r.err, "the shards are kept in") == 1);
  CHECK(linesWith(r.err, "`tracerun merge --allow-incomplete -o " + output) == 1);
  CHECK(contains(r.err, " free"));
  std::vector<std::string> kept;
  for (const auto& e : fs::recursive_directory_iterator(shards)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("rank", 0) == 0 && name.size() > 3 && name.substr(name.size() - 3) == ".db") {
      kept.push_back(e.path().string());
    }
  }
  REQUIRE(kept.size() == 2);

  // Once there is room: the same shards, copied to a roomy place, merge.
  const std::string roomy = scratch() + "/roomy";
  fs::remove_all(roomy);
  fs::create_directories(roomy);
  std::vector<std::string> merge = {TRACERUN_BIN, "merge", "--allow-incomplete",
                                    "-q",         "-o",    roomy + "/run.db"};
  for (const auto& k : kept) {
    const std::string to = roomy + "/" + fs::path(k).filename().string();
    fs::copy_file(k, to);
    if (fs::exists(k + "-wal")) fs::copy_file(k + "-wal", to + "-wal");
    merge.push_back(to);
  }
  // What plain SQLite reads from further copies (it replays each -wal itself).
  int64_t committed = 0;
  for (const auto& k : kept) {
    const std::string plain = scratch() + "/plain.db";
    fs::remove(plain + "-wal");
    fs::copy_file(k, plain, fs::copy_options::overwrite_existing);
    if (fs::exists(k + "-wal")) fs::copy_file(k + "-wal", plain + "-wal");
    sqlite3* db = nullptr;
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_open_v2(plain.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM spans", -1, &st, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    committed += sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
  }
  const Result m = run(merge);
  INFO(m.describe());
  REQUIRE(m.code == 0);
  const auto reader = trace::TraceReader::open(roomy + "/run.db");
  CHECK(reader.ranks().size() == 2);
  CHECK(committed > 0);
  CHECK(reader.counts().spans == committed);
}

// A tmpfs of `size` at `dir`, in a mount namespace private to this test process (and its
// children); unmounted at the end. False when this process may not (not root, no namespaces).
class SmallTmpfs {
 public:
  SmallTmpfs(const std::string& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      why_ = std::string("no private mount namespace: ") + std::strerror(errno);
      return;
    }
    const std::string options = "size=" + size;
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      why_ = std::string("mount -t tmpfs refused: ") + std::strerror(errno);
      return;
    }
    mounted_ = true;
  }
  ~SmallTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }

 private:
  std::string dir_;
  std::string why_;
  bool mounted_ = false;
};

}  // namespace

TEST_CASE("a file-size limit the shards outgrow: the run fails, the shards stay for merge",
          "[launcher_disk]") {
  const std::string output = scratch() + "/limited/run.db";
  fs::remove_all(scratch() + "/limited");
  fs::create_directories(scratch() + "/limited");
  // The limit is inherited by the launcher and its ranks; an ignored SIGXFSZ stays ignored
  // across exec, so a write past it fails with EFBIG instead of killing the writer.
  const std::string writer = GENERATE(as<std::string>{}, "raw", "sqlite");
  INFO("TRACERUN_WRITER=" << writer);
  std::vector<std::string> argv = {
      "/bin/sh", "-c", "trap '' XFSZ; exec /usr/bin/prlimit --fsize=196608 -- \"$@\"", "sh"};
  const auto rest = job(output, writer);
  argv.insert(argv.end(), rest.begin(), rest.end());
  const Result r = run(argv);
  INFO(r.describe());
  REQUIRE(contains(r.err, "failed"));  // the ranks' writers said their close failed
  checkKeptAndMergeable(r, output);
}

TEST_CASE("a 512 KiB tmpfs as the output's file system: the run fails, the shards stay for merge",
          "[launcher_disk]") {
  const std::string dir = scratch() + "/tmpfs";
  SmallTmpfs tmpfs(dir, "512k");
  if (!tmpfs.mounted()) {
    WARN("skipped: " << tmpfs.why() << " (the file-size limit test covers the same path)");
    return;
  }
  const std::string writer = GENERATE(as<std::string>{}, "raw", "sqlite");
  INFO("TRACERUN_WRITER=" << writer);
  const std::string output = dir + "/run.db";
  const Result r = run(job(output, writer));
  INFO(r.describe());
  // SQLite's words, or the raw writer's: ENOSPC's, for the raw file or for its conversion's room.
  CHECK(contains(r.err, writer == "raw" ? "No space left on device" : "database or disk is full"));
  checkKeptAndMergeable(r, output);
}
