// launch_probe: launch_bench's tiny rank program. Reads CLOCK_MONOTONIC first thing in main and
// writes it to $PROBE_DIR/rank$RANK, then exits. Built twice: launch_probe without libtorch
// (libtracerun, when preloaded, brings libtorch with it), and launch_probe_torch (PROBE_TORCH)
// linked to libtorch like a real rank program, so that its loading is in the baseline too.
#ifdef PROBE_TORCH
#include <ATen/Parallel.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

int main() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const long long now = static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
  const char* dir = std::getenv("PROBE_DIR");
  const char* rank = std::getenv("RANK");
  if (dir == nullptr || rank == nullptr) return 2;
  const std::string path = std::string(dir) + "/rank" + rank;
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return 1;
  std::fprintf(f, "%lld\n", now);
#ifdef PROBE_TORCH
  if (at::get_num_threads() < 1) return 1;  // a use of libtorch, so the link keeps it
#endif
  return std::fclose(f) == 0 ? 0 : 1;
}
