// TRACERUN_CRASH_BACKTRACE=1: a fatal signal's backtrace on stderr (see crash_backtrace.h).
#include "crash_backtrace.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tracerun::interpose {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

// Only async-signal-safe calls, apart from backtrace(), which is warmed up at install (its first
// call loads libgcc_s and may allocate).
void onFatalSignal(int sig) {
  char line[96];
  const int n =
      std::snprintf(line, sizeof line, "tracerun: pid %d got signal %d (%s); backtrace:\n",
                    static_cast<int>(::getpid()), sig, sig == SIGSEGV ? "SIGSEGV" : "");
  if (n > 0) (void)!::write(STDERR_FILENO, line, static_cast<size_t>(n));
  void* frames[64];
  const int depth = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  ::signal(sig, SIG_DFL);  // SA_RESETHAND did this already; kept for clarity
  ::raise(sig);
}

}  // namespace

void installCrashBacktraceFromEnvironment() noexcept {
  const char* want = std::getenv("TRACERUN_CRASH_BACKTRACE");
  if (want == nullptr || std::strcmp(want, "1") != 0) return;
  void* warm[1];
  (void)::backtrace(warm, 1);
  struct sigaction action {};
  action.sa_handler = onFatalSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND | SA_NODEFER;
  for (int sig : kSignals) ::sigaction(sig, &action, nullptr);
}

}  // namespace tracerun::interpose
