// An opt-in crash report for the traced process: with TRACERUN_CRASH_BACKTRACE=1, a fatal signal
// (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) prints one line naming it and the native backtrace of
// the crashing thread to stderr, then the signal takes its default action (the exit status is the
// same). For crashes seen only on machines without a debugger (the GPU machine). Not a crash
// handler that recovers anything: the trace of a crashed process is what the launcher salvages.
#pragma once

namespace tracerun::interpose {

// Installs the handlers when TRACERUN_CRASH_BACKTRACE=1; otherwise does nothing.
void installCrashBacktraceFromEnvironment() noexcept;

}  // namespace tracerun::interpose
