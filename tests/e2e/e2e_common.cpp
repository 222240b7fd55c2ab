// ScratchDir, the once-per-process fixture trace and the tracerun runner for the e2e tests.
#include "e2e_common.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace tracerun::e2e {

namespace fs = std::filesystem;

ScratchDir::ScratchDir(const std::string& tag) {
  std::string tmpl = (fs::temp_directory_path() / ("tracerun-" + tag + "-XXXXXX")).string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

const ScratchDir& scratch() {
  static const ScratchDir dir("e2e");
  return dir;
}

const fixture::Generated& fixtureTrace() {
  static const fixture::Generated g = [] {
    fixture::Options o;
    o.dir = scratch().file("fixture");
    o.ranks = 3;
    o.threads = 3;
    o.roots_per_thread = 30;
    return fixture::writeFixture(o);
  }();
  return g;
}

ProcessResult runTracerun(const std::vector<std::string>& args) {
  return runProcess(TRACERUN_BIN, args, scratch().path());
}

ProcessResult runGpttrain(const std::vector<std::string>& launcher_args,
                          const std::string& gpttrain, const std::vector<std::string>& gpt_args) {
  ::setenv("OMP_NUM_THREADS", "1", 1);
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  std::vector<std::string> args = launcher_args;
  args.push_back("--");
  args.push_back(gpttrain);
  args.insert(args.end(), gpt_args.begin(), gpt_args.end());
  args.push_back("--threads");
  args.push_back("1");
  return runTracerun(args);
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

void copyFile(const std::string& from, const std::string& to) {
  writeFile(to, readFile(from));
}

}  // namespace tracerun::e2e
