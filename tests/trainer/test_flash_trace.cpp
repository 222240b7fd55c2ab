// --attention flash in the trace (issue 32 point 1): the activation bytes a layer keeps for
// backward drop, against the standard path, by exactly the attention matrix less the
// log-sum-exp, 4 (a s^2 b - a s b) bytes in fp32 (docs/trainer.md, "Flash attention"), at two
// sequence lengths. Read as the activation closed-form tests read them
// (tests/e2e/activation_closed_form_test.cpp): activation-tagged bytes live on rank 0 when the last
// step's backward starts, per layer = (reading at 6 layers - reading at 2 layers) / 4.
#include "trainer_test_util.h"

#include "../support/held_for_backward.h"

#include <sqlite3.h>
#include <catch2/catch.hpp>

#include "tracerun/trace/analysis/activation_form.h"
#include "tracerun/trace/analysis/memory_live.h"
#include "tracerun/trace/reader.h"

using namespace gpttrain::testing;

namespace {

using tracerun::testing::heldForBackward;  // ../support/held_for_backward.h

constexpr int64_t kBatch = 2, kHidden = 64, kHeads = 4;

std::string dbName(const std::string& dir, int64_t s, int layers, bool flash) {
  return dir + "/" + (flash ? "flash_s" : "standard_s") + std::to_string(s) + "_l" +
         std::to_string(layers) + ".db";
}

// One traced single-process run's held activation bytes.
int64_t held(const std::string& dir, int64_t s, int layers, bool flash) {
  const std::string db = dbName(dir, s, layers, flash);
  const std::string name = db.substr(dir.size() + 1, db.size() - dir.size() - 4);
  std::vector<std::string> args{"-o",
                                db,
                                "-q",
                                "--",
                                kGpttrain,
                                "--layers",
                                std::to_string(layers),
                                "--hidden",
                                std::to_string(kHidden),
                                "--heads",
                                std::to_string(kHeads),
                                "--seq-len",
                                std::to_string(s),
                                "--vocab",
                                "64",
                                "--micro-batch-size",
                                std::to_string(kBatch),
                                "--global-batch",
                                std::to_string(kBatch),
                                "--dropout",
                                "0",
                                "--steps",
                                "2",
                                "--quiet"};
  if (flash) args.insert(args.end(), {"--attention", "flash", "--flash-block-q", "16"});
  auto run = launchRanks(TRACERUN_EXE, args, 0, dir + "/" + name);
  INFO(name << ":\n" << run.summary() << run.logs[0]);
  REQUIRE(run.ok());
  return heldForBackward(db);
}

}  // namespace

TEST_CASE("gpttrain --attention flash keeps 4 (a s^2 b - a s b) bytes less per layer than standard",
          "[trainer][flash][trace]") {
  const std::string dir = scratchDir("flash_trace");
  for (int64_t s : {32, 64}) {
    const int64_t standard = (held(dir, s, 6, false) - held(dir, s, 2, false)) / 4;
    const int64_t flash = (held(dir, s, 6, true) - held(dir, s, 2, true)) / 4;
    const int64_t form = 4 * (kHeads * s * s * kBatch - kHeads * s * kBatch);
    INFO("s " << s << ": per layer standard " << standard << " B, flash " << flash
              << " B, closed form of the difference " << form << " B");
    CHECK(standard - flash == form);
  }
}

// The memory view's activation lines (trace/analysis/activation_form.h) on the same runs: model
// states + L x the layer's closed form for the attention kind the run used, computed here from
// the flags alone, and the other kind's line L x 4(a s^2 b - a s b) away; the per-layer form
// equals the per-layer bytes the trace holds ((6 layers - 2 layers) / 4), as the test above reads.
TEST_CASE("the memory view's activation lines equal the closed form and the measured bytes",
          "[trainer][flash][trace]") {
  namespace an = tracerun::trace::analysis;
  const std::string dir = scratchDir("flash_lines");
  const int64_t s = 48, a = kHeads, b = kBatch, h = kHidden;
  for (bool flash : {false, true}) {
    const int64_t perLayer = (held(dir, s, 6, flash) - held(dir, s, 2, flash)) / 4;
    const int64_t x = flash ? a * s * b : a * s * s * b;
    const int64_t form = 4 * (16 * s * b * h + x + 4 * s * b);
    const int64_t matrix = 4 * (a * s * s * b - a * s * b);
    for (int layers : {2, 6}) {
      const auto reader = tracerun::trace::TraceReader::open(dbName(dir, s, layers, flash));
      const auto states = an::memoryClosedForms(reader, 0);
      REQUIRE(states.size() == 1);
      const auto lines = an::activationClosedForms(reader, 0, states);
      REQUIRE(lines.size() == 2);
      INFO((flash ? "flash" : "standard")
           << " L " << layers << ": " << lines[0].label << " | " << lines[1].label
           << "; measured per layer " << perLayer << " B, closed form " << form << " B");
      const auto shape = an::activationShape(reader, 0);
      REQUIRE(shape.has_value());
      CHECK(shape->flash == flash);
      CHECK(an::activationBytesPerLayer(*shape, flash) == double(form));
      CHECK(lines[0].bytes - states[0].bytes == double(layers * form));
      CHECK(lines[1].bytes - lines[0].bytes == double(flash ? layers * matrix : -layers * matrix));
      CHECK(perLayer == form);
    }
  }
  // Not recorded where the closed form does not hold: dropout > 0 gives no lines.
  const std::string db = dir + "/dropout.db";
  auto run = launchRanks(TRACERUN_EXE, {"-o",      db,
                                        "-q",      "--",
                                        kGpttrain, "--layers",
                                        "2",       "--hidden",
                                        "64",      "--heads",
                                        "4",       "--seq-len",
                                        "16",      "--vocab",
                                        "64",      "--micro-batch-size",
                                        "2",       "--global-batch",
                                        "2",       "--dropout",
                                        "0.1",     "--steps",
                                        "1",       "--quiet"},
                         0, dir + "/dropout");
  INFO(run.summary() << run.logs[0]);
  REQUIRE(run.ok());
  const auto reader = tracerun::trace::TraceReader::open(db);
  CHECK_FALSE(an::activationShape(reader, 0).has_value());
  CHECK(an::activationClosedForms(reader, 0, an::memoryClosedForms(reader, 0)).empty());
}
