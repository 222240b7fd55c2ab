// The trace-reading commands (info, export, merge, report) and the plumbing every program of the
// suite shares (tracerun, tracedot, traceview): CLI11 set-up, exit codes, the one-line error,
// --version, numeric checks (human-readable numbers are tracerun/trace/format.h's). Needs trace/
// only, never interpose/.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tracerun/trace/format.h"

namespace tracerun::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 1;  // the file is missing, damaged or not a trace
inline constexpr int kExitUsage = 2;     // unknown flag, missing argument
// report: printed, but the capture lost data; merge: written, but a raw file's records are not in
// it (they could not be converted)
inline constexpr int kExitLostData = 3;

// A registered command. `app` is its CLI11 (sub)app; run() is called after parsing succeeded and
// returns the exit code. Failures are thrown as trace::TraceError (whose text is "PATH: problem")
// or any std::exception; main prints them as one line.
//
// A command that runs without a subcommand name (the launcher: `tracerun [-o run.db] -- PROG`)
// adds its options to the top-level app and returns Command{&app, run}; main runs it when no
// subcommand was given.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command addInfoCommand(CLI::App& parent);
Command addExportCommand(CLI::App& parent);
Command addMergeCommand(CLI::App& parent);
Command addReportCommand(CLI::App& parent);

// info, export, merge and report, in the order --help lists them.
std::vector<Command> addTraceCommands(CLI::App& parent);

// "tracerun VERSION": what --version prints, on every program and every subcommand.
std::string versionText();

// A program's main(): builds the CLI11 app named `name` from the commands addCommands registers,
// gives every subcommand --version, parses, runs the chosen command and turns every failure into
// one line on stderr ("NAME: PATH: problem") and an exit code (kExit*: 2 for usage problems).
int runTool(int argc, char** argv, const std::string& name, const std::string& description,
            const std::function<std::vector<Command>(CLI::App&)>& addCommands);

// The program's name as runTool set it (the root app's: "tracerun", "tracedot"...), for the lines a
// command prints itself ("NAME: PATH: problem").
std::string programName(const CLI::App& app);

// info's short form: the launcher's end-of-run summary on `out` ("tracerun: trace written to PATH
// (N ranks, SIZE)", then spans, events, memory peak, dropped events). Throws trace::TraceError.
void printRunSummary(const std::string& path, std::FILE* out);

// Runs fn; any non-TraceError exception becomes a TraceError naming `path`, so every error line
// names the file it is about.
int withPath(const std::string& path, const std::function<int()>& fn);

// A CLI11 check that the value is a number of at least `min` (a whole number when `whole`), at most
// INT_MAX, with a message people can read ("--top: must be a whole number >= 1, not '-3'")
// where CLI11's own PositiveNumber / NonNegativeNumber print the largest double in 300 digits.
CLI::Validator atLeast(int min, bool whole = true);

// Durations, bytes and counts for people: the one implementation is trace/format.h's.
using trace::formatBytes;
using trace::formatCount;
using trace::formatDuration;

// Prints progress on stderr when it is a terminal ("label 42%"), throttled; done() clears it.
class Progress {
 public:
  explicit Progress(std::string label, bool enabled);
  ~Progress();
  void update(double fraction);
  void done();

 private:
  std::string label_;
  bool enabled_;
  bool shown_ = false;
  int64_t startNs_ = 0;
  int64_t lastNs_ = 0;
};

}  // namespace tracerun::tools
