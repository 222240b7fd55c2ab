// traceview test helpers (see viewer_test_util.h).
#include "viewer_test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "e2e_common.h"
#include "tracerun/core/clock.h"
#include "tracerun/core/records.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/shard_writer.h"

extern "C" {
unsigned char* stbi_load(const char* filename, int* x, int* y, int* comp, int req_comp);
void stbi_image_free(void* retval_from_stbi_load);
}

namespace tracerun::viewertest {

namespace fs = std::filesystem;

uint32_t Png::rgb(int x, int y) const {
  if (x < 0 || y < 0 || x >= w || y >= h) return 0xFFFFFFFFu;
  const unsigned char* p = &rgba[(static_cast<size_t>(y) * w + x) * 4];
  return static_cast<uint32_t>(p[0]) << 16 | static_cast<uint32_t>(p[1]) << 8 | p[2];
}

bool Png::outlineAt(int x, int y) const {
  for (int xx = x - 3; xx <= x + 1; ++xx) {
    const uint32_t c = rgb(xx, y);
    if (c != 0xFFFFFFFFu && (c >> 16) >= 200 && ((c >> 8) & 0xFF) >= 200 && (c & 0xFF) >= 200)
      return true;
  }
  return false;
}

size_t Png::distinctColours() const {
  std::set<uint32_t> s;
  for (int y = 0; y < h; y += 2)
    for (int x = 0; x < w; x += 2) s.insert(rgb(x, y));
  return s.size();
}

Png loadPng(const std::string& path) {
  Png png;
  int comp = 0;
  unsigned char* data = stbi_load(path.c_str(), &png.w, &png.h, &comp, 4);
  INFO(path);
  REQUIRE(data != nullptr);
  png.rgba.assign(data, data + static_cast<size_t>(png.w) * png.h * 4);
  stbi_image_free(data);
  return png;
}

Layout readLayout(const std::string& path) {
  std::ifstream in(path);
  INFO(path);
  REQUIRE(in.good());
  Layout l;
  std::string line;
  bool area = false;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string kind;
    s >> kind;
    if (kind == "area") {
      s >> l.area_x >> l.area_w >> l.t0 >> l.t1 >> l.row_h >> l.origin;
      area = true;
    } else if (kind == "track") {
      int64_t id = 0;
      Layout::Row r;
      s >> id >> r.rank >> r.y >> r.h;
      l.rows[id] = r;
    } else if (kind == "tab") {
      std::string word;
      Layout::Tab t;
      s >> word >> t.x >> t.y >> t.w >> t.h;
      l.tabs[word] = t;
    }
  }
  REQUIRE(area);
  return l;
}

uint32_t paletteRgb(uint32_t c) {
  return (c & 0xFF) << 16 | ((c >> 8) & 0xFF) << 8 | ((c >> 16) & 0xFF);
}

e2e::ProcessResult runTraceviewXvfb(const std::vector<std::string>& args, const std::string& dir) {
  // A private server per run (XServer), not xvfb-run -a: two of those started at once under
  // ctest -j2 can pick the same display number and one fails.
  const XServer x;
  std::vector<std::string> all = {"DISPLAY=" + x.display(), TRACEVIEW_BIN};
  all.insert(all.end(), args.begin(), args.end());
  return e2e::runProcess("/usr/bin/env", all, dir);
}

e2e::ProcessResult runTraceviewOk(const std::vector<std::string>& args, const std::string& dir) {
  auto r = runTraceviewXvfb(args, dir);
  INFO(r.describe());
  REQUIRE(r.exited);
  REQUIRE(r.exit_code == 0);
  return r;
}

e2e::ProcessResult runScript(const std::vector<std::string>& args,
                             const std::vector<std::string>& lines, const std::string& dir,
                             const std::string& file) {
  const std::string path = dir + "/" + file;
  {
    std::ofstream out(path);
    for (const auto& l : lines) out << l << "\n";
    REQUIRE(out.good());
  }
  std::vector<std::string> all = args;
  all.insert(all.end(), {"--log-actions", "--script", path});
  return runTraceviewOk(all, dir);
}

nlohmann::json reportJson(const std::string& db, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"report", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(db);
  const auto r = e2e::runTracerun(args);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

fixture::Generated makeFixture(const std::string& dir, int ranks, int threads, int roots) {
  fixture::Options o;
  o.dir = dir;
  o.ranks = ranks;
  o.threads = threads;
  o.roots_per_thread = roots;
  return fixture::writeFixture(o);
}

#ifdef GPTTRAIN_BIN
e2e::ProcessResult traceGpttrain(const std::string& db, const std::vector<std::string>& launcher,
                                 const std::vector<std::string>& gpt) {
  std::vector<std::string> args = launcher;
  args.insert(args.end(), {"--status", "off", "-o", db});
  auto run = e2e::runGpttrain(args, GPTTRAIN_BIN, gpt);
  INFO(run.describe());
  REQUIRE(run.exit_code == 0);
  return run;
}

std::string scratchGpttrain(const std::string& name, const std::vector<std::string>& launcher,
                            const std::vector<std::string>& gpt) {
  const std::string db = e2e::scratch().file(name + ".db");
  if (!std::ifstream(db).good()) traceGpttrain(db, launcher, gpt);
  return db;
}
#endif

void writeSmallTrace(const std::string& path, int spans) {
  core::Session session(4096);
  trace::ShardOptions so;
  so.path = path;
  so.host = "test-host";
  so.pid = 4242;
  trace::ShardWriter writer(session, so);
  writer.start();
  if (spans > 0) {
    core::ThreadBuffer& buf = session.threadBuffer("main");
    const core::StringId name = session.strings().intern("aten::mm");
    for (int i = 0; i < spans; ++i) {
      core::SpanRecord r;
      r.category = core::Category::kOp;
      r.name = name;
      r.id = buf.nextId();
      r.start_ns = core::nowNs() + 1000 + i * 20000;
      r.end_ns = r.start_ns + 15000;
      REQUIRE(buf.ring.tryPush(core::Record::from(r)));
    }
  }
  writer.close();
}

XServer::XServer() {
  // Xvfb picks a free display itself and writes its number to the pipe (-displayfd): no race with
  // another test's server or with xvfb-run -a, which a "free number" guess had under ctest -j2.
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    const int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    const std::string fd = std::to_string(fds[1]);
    execl(XVFB_BIN, XVFB_BIN, "-displayfd", fd.c_str(), "-screen", "0", "1920x1080x24", "-nolisten",
          "tcp", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string digits;
  char c = 0;
  while (read(fds[0], &c, 1) == 1 && c != '\n') digits += c;
  close(fds[0]);
  if (digits.empty()) {
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
    FAIL("could not start Xvfb (it wrote no display number)");
  }
  number_ = std::stoi(digits);
  pid_ = pid;
}

XServer::~XServer() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
}

Background::Background(const std::string& display, const std::string& dir,
                       const std::vector<std::string>& argv) {
  outPath_ = dir + "/bg.out";
  errPath_ = dir + "/bg.err";
  pid_ = fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    if (chdir(dir.c_str()) != 0) _exit(126);
    const int out = open(outPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open(errPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, 1);
    dup2(err, 2);
    setenv("DISPLAY", display.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
}

Background::~Background() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
}

bool Background::running() const {
  int status = 0;
  return waitpid(pid_, &status, WNOHANG) == 0;
}

static std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Background::out() const {
  return slurp(outPath_);
}
std::string Background::err() const {
  return slurp(errPath_);
}

size_t Background::waitFor(const std::string& text, double seconds, size_t from) const {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    const std::string o = out();
    const size_t at = o.find(text, from);
    if (at != std::string::npos) return at + text.size();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::string::npos;
}

ViewerWindow::ViewerWindow(const std::string& dir, const std::vector<std::string>& args)
    : dir_(dir), view_(x_.display(), dir, [&] {
        std::vector<std::string> argv = {TRACEVIEW_BIN};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.push_back("--log-actions");
        return argv;
      }()) {
  opened_ = view_.waitFor("first complete frame", 60);
  INFO(logs());
  REQUIRE(opened_ != std::string::npos);
}

std::string ViewerWindow::logs() const {
  return "stdout:\n" + view_.out() + "\nstderr:\n" + view_.err();
}

void ViewerWindow::xdotool(const std::vector<std::string>& args) const {
  std::vector<std::string> all = {"DISPLAY=" + x_.display(), XDOTOOL_BIN};
  all.insert(all.end(), args.begin(), args.end());
  const auto r = e2e::runProcess("/usr/bin/env", all, dir_);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
}

void ViewerWindow::press(const std::string& key) const {
  // Held until a frame has seen every key of the chord ("key down N" per key, --log-actions):
  // ImGui 1.86 has no key queue, so a press released before the next frame would be lost, and a
  // frame can take hundreds of milliseconds on a loaded machine. Then released, and returns once
  // a frame has seen every key up ("key up N"): a release and the next press of the same key
  // between two frames would leave the key down to ImGui, the second press never seen as one
  // (and auto-repeated while held: the likely cause of a 60 s stall in one loaded loop run).
  // The bounds are for a hung viewer only.
  const auto keys = std::count(key.begin(), key.end(), '+') + 1;
  // One `what` line per key of the chord, logged after `from`.
  const auto awaitEveryKey = [&](const char* what, size_t from) {
    for (auto k = keys; k > 0 && from != std::string::npos; --k)
      from = view_.waitFor(what, 60, from);
  };
  const size_t pressed = view_.out().size();
  xdotool({"keydown", key});
  awaitEveryKey("key down ", pressed);
  const size_t released = view_.out().size();
  xdotool({"keyup", key});
  awaitEveryKey("key up ", released);
}

std::vector<MemoryStep> replayLevels(const trace::TraceReader& reader, int rank, int type,
                                     int index, const std::vector<core::MemoryCategory>& cats) {
  namespace an = trace::analysis;
  std::map<uint64_t, std::pair<int64_t, int>> live;  // ptr -> bytes, stack index
  std::vector<MemoryStep> out;
  an::Levels l{};
  size_t ordinal = 0;
  const auto add = [&](int64_t ts, int64_t d, int k) {
    for (int j = k; j < an::kStackCount; ++j) l[static_cast<size_t>(j)] += d;
    out.push_back(MemoryStep{ts, l});
  };
  for (const auto& r : reader.memory(rank, INT64_MIN, INT64_MAX)) {
    if (r.bytes > 0) {
      const int k = an::stackIndex(cats.at(ordinal++));
      if (r.device_type != type || r.device_index != index) continue;
      auto it = live.find(r.ptr);
      if (it != live.end()) add(r.ts_ns, -it->second.first, it->second.second);
      live[r.ptr] = {r.bytes, k};
      add(r.ts_ns, r.bytes, k);
    } else if (r.bytes < 0 && r.device_type == type && r.device_index == index) {
      auto it = live.find(r.ptr);
      if (it == live.end()) continue;
      add(r.ts_ns, -it->second.first, it->second.second);
      live.erase(it);
    }
  }
  return out;
}

void checkMemoryColumns(const trace::analysis::MemorySeries& s,
                        const std::vector<MemoryStep>& steps, double t0, double t1, size_t w) {
  INFO("window " << t0 << " .. " << t1 << " in " << w << " columns");
  std::vector<trace::analysis::MemorySeries::Column> cols;
  s.reduce(t0, t1, w, cols);
  REQUIRE(cols.size() == w);
  const double dt = (t1 - t0) / double(w);
  size_t j = 0;
  trace::analysis::Levels carry{};
  for (size_t c = 0; c < w; ++c) {
    const double c0 = t0 + dt * double(c), c1 = c + 1 == w ? t1 : t0 + dt * double(c + 1);
    while (j < steps.size() && double(steps[j].ts) < c0) carry = steps[j++].levels;
    trace::analysis::Levels lo = carry, hi = carry;
    bool any = false;
    while (j < steps.size() && double(steps[j].ts) < c1) {
      any = true;
      for (size_t k = 0; k < lo.size(); ++k) {
        lo[k] = std::min(lo[k], steps[j].levels[k]);
        hi[k] = std::max(hi[k], steps[j].levels[k]);
      }
      carry = steps[j++].levels;
    }
    INFO("column " << c);
    CHECK(cols[c].events == any);
    CHECK(cols[c].lo == lo);
    CHECK(cols[c].hi == hi);
    if (cols[c].lo != lo || cols[c].hi != hi) return;
  }
}

}  // namespace tracerun::viewertest
