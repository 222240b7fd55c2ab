// Prints what an installed tracerun::trace reads from a trace: "spans N" and, for each name given,
// "NAME N" (its span count from the reader's per-name aggregates). Nothing else.
#include <cstdio>
#include <exception>
#include <string>

#include "tracerun/trace/reader.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: span_census TRACE [NAME...]\n");
    return 2;
  }
  try {
    const auto reader = tracerun::trace::TraceReader::open(argv[1]);
    std::printf("spans %lld\n", static_cast<long long>(reader.counts().spans));
    const auto rows = reader.aggregates();
    for (int i = 2; i < argc; ++i) {
      long long n = 0;
      for (const auto& row : rows) {
        if (reader.str(row.name) == argv[i]) n += row.count;
      }
      std::printf("%s %lld\n", argv[i], n);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "span_census: %s\n", e.what());
    return 1;
  }
  return 0;
}
