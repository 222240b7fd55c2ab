// Tests of the capture words (capture_words.h): parse, print, defaults, the environment, and that
// libtracerun's configuration and the launcher's check agree with them. No libtorch, no files.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "capture.h"
#include "capture_words.h"

using namespace tracerun::interpose;

namespace {
struct CaptureEnv {
  explicit CaptureEnv(const char* value) {
    if (value != nullptr) {
      ::setenv("TRACERUN_CAPTURE", value, 1);
    } else {
      ::unsetenv("TRACERUN_CAPTURE");
    }
  }
  ~CaptureEnv() { ::unsetenv("TRACERUN_CAPTURE"); }
};
}  // namespace

TEST_CASE("capture words parse into a typed set and print in canonical order") {
  std::string problem = "stale";
  const CaptureSet s = CaptureSet::parse("tensors,ops,memory,ops", &problem);
  CHECK(problem.empty());
  CHECK(s.has(CaptureWord::kOps));
  CHECK(s.has(CaptureWord::kMemory));
  CHECK(s.has(CaptureWord::kTensors));
  CHECK_FALSE(s.has(CaptureWord::kScopes));
  CHECK_FALSE(s.has(CaptureWord::kComm));
  CHECK_FALSE(s.has(CaptureWord::kCuda));
  CHECK(s.text() == "ops,memory,tensors");
  CHECK(CaptureSet::parse(s.text(), &problem) == s);

  const char* all = "ops,scopes,memory,comm,cuda,tensors,cuda-sync";
  CHECK(CaptureSet::parse(all, &problem).text() == all);
  CHECK(problem.empty());
  CHECK(CaptureSet::defaults().text() == "ops,scopes,memory,comm");
  CHECK(CaptureSet::parse("ops,", &problem).text() == "ops");  // a trailing comma is harmless
  CHECK(problem.empty());
  CHECK(CaptureSet{}.text().empty());
  CHECK(CaptureSet{}.set(CaptureWord::kCuda).set(CaptureWord::kCuda, false).empty());
}

TEST_CASE("cuda-sync brings cuda with it, and cuda alone records no synchronizations") {
  std::string problem;
  const CaptureSet sync = CaptureSet::parse("ops,cuda-sync", &problem);
  CHECK(problem.empty());
  CHECK(sync.has(CaptureWord::kCudaSync));
  CHECK(sync.has(CaptureWord::kCuda));
  CHECK(sync.text() == "ops,cuda,cuda-sync");
  CHECK(CaptureSet::parse(sync.text(), &problem) == sync);
  CHECK_FALSE(CaptureSet::parse("ops,cuda", &problem).has(CaptureWord::kCudaSync));
  CHECK_FALSE(CaptureSet::defaults().has(CaptureWord::kCudaSync));
  CHECK(CaptureSet{CaptureWord::kCudaSync}.text() == "cuda,cuda-sync");  // set() too
  for (const char* w : {"sync", "cuda-", "cuda_sync", "cudasync"}) {
    INFO(w);
    CHECK(CaptureSet::parse(w, &problem).empty());
  }
}

TEST_CASE("an unknown capture word is named with the valid ones and first letters do not count") {
  std::string problem;
  const CaptureSet s = CaptureSet::parse("ops,bogus,memory", &problem);
  CHECK(problem ==
        "unknown word 'bogus' (words: ops, scopes, memory, comm, cuda, tensors, cuda-sync)");
  CHECK(s.text() == "ops,memory");  // the known words, for a caller that goes on
  // Words sharing a first letter with a real one are not that word.
  for (const char* w : {"o", "opsx", "sc", "mem", "t", "Ops", "comms", " ops"}) {
    INFO(w);
    CHECK(CaptureSet::parse(w, &problem).empty());
    CHECK(problem.find("unknown word") == 0);
  }
  CaptureSet::parse("", &problem);
  CHECK(problem.find("no words") == 0);
  CaptureSet::parse(",", &problem);
  CHECK(problem.find("no words") == 0);
}

TEST_CASE(
    "TRACERUN_CAPTURE unset or empty means the defaults and otherwise exactly the words listed") {
  std::string problem;
  {
    const CaptureEnv env(nullptr);
    CHECK(captureWordsFromEnvironment(&problem) == CaptureSet::defaults());
    CHECK(problem.empty());
  }
  {
    const CaptureEnv env("");
    CHECK(captureWordsFromEnvironment(&problem) == CaptureSet::defaults());
  }
  {
    const CaptureEnv env("scopes,cuda");
    CHECK(captureWordsFromEnvironment(&problem).text() == "scopes,cuda");
    CHECK(problem.empty());
  }
  {
    const CaptureEnv env("tensors,nope");
    CHECK(captureWordsFromEnvironment(&problem).text() == "tensors");
    CHECK(problem.find("'nope'") != std::string::npos);
  }
}

TEST_CASE("libtracerun's configuration takes its capture words from the one parser") {
  ::setenv("TRACERUN_OUTPUT", "/tmp/x/rank%r.db", 1);
  std::string why;
  {
    const CaptureEnv env("tensors,scopes,comm");
    const auto c = configFromEnvironment(&why);
    REQUIRE(c);
    CHECK_FALSE(c->ops);
    CHECK(c->scopes);
    CHECK_FALSE(c->memory);
    CHECK(c->tensors);
    CHECK(c->comm);
    CHECK_FALSE(c->cuda);
    CHECK_FALSE(c->cuda_sync);
    CHECK(captureWordsOf(*c).text() == "scopes,comm,tensors");  // what the shard's meta says
  }
  {
    const CaptureEnv env("cuda-sync");
    const auto c = configFromEnvironment(&why);
    REQUIRE(c);
    CHECK(c->cuda);
    CHECK(c->cuda_sync);
    CHECK(captureWordsOf(*c).text() == "cuda,cuda-sync");
  }
  {
    const CaptureEnv env(nullptr);
    const auto c = configFromEnvironment(&why);
    REQUIRE(c);
    CHECK(captureWordsOf(*c) == CaptureSet::defaults());
  }
  ::unsetenv("TRACERUN_OUTPUT");
}
