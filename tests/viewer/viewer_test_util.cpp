// traceview test helpers (see viewer_test_util.h).
#include "viewer_test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

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

}  // namespace tracerun::viewertest
