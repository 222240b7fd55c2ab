// tracerun-fixture: writes a small real multi-rank trace (see fixture_trace.h) for end-to-end tests
// and for trying the tools by hand. Not a benchmark and not a capture of a real program.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "fixture_trace.h"

int main(int argc, char** argv) {
  tracerun::fixture::Options o;
  CLI::App app{"Writes rank shards and a merged trace made through Session + ShardWriter + merge",
               "tracerun-fixture"};
  app.add_option("dir", o.dir, "output directory")->required();
  app.add_option("--ranks", o.ranks, "ranks (shards)")->check(CLI::Range(1, 64));
  app.add_option("--threads", o.threads, "producer threads per rank")->check(CLI::Range(1, 64));
  app.add_option("--roots", o.roots_per_thread, "root spans per thread")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--seed", o.seed, "random seed");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    const auto g = tracerun::fixture::writeFixture(o);
    std::printf("%s\n", g.merged.c_str());
    for (const auto& s : g.shards) std::printf("%s\n", s.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tracerun-fixture: %s\n", e.what());
    return 1;
  }
  return 0;
}
