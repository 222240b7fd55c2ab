// The launcher's flags on the top-level app; the work is launcher::launch(). No libtorch.
#include "launch_command.h"

#include <cstdio>
#include <memory>

#include "launch.h"

namespace tracerun::tools {

Command addLaunchCommand(CLI::App& app) {
  auto o = std::make_shared<launcher::LaunchOptions>();
  app.add_option("-o,--output", o->output, "trace to write when running a PROGRAM (run.db)");
  app.add_option(
      "--capture", o->capture,
      "what to record, comma-separated: ops,scopes,memory,comm,cuda,tensors,cuda-sync (default "
      "ops,scopes,memory,comm; cuda-sync: cuda and its synchronization records)");
  app.add_flag(
      "--no-shapes", [o](int64_t) { o->shapes = false; },
      "do not record input shapes and dtypes of ops (cheaper)");
  app.add_option("--target", o->target,
                 "capture in this program (path or name) instead of PROGRAM: for wrappers and "
                 "scripts that start the real program");
  app.add_flag("--keep-shards", o->keep_shards, "keep OUTPUT.shards/ after merging");
  app.add_flag("-q,--quiet", o->quiet, "no summary after the run");
  app.add_option_function<std::string>(
         "--ranks", [o](const std::string& v) { o->ranks = v; },
         "trace only these ranks (RANK values, e.g. 0,8-15); the others run untraced")
      ->type_name("LIST");
  app.add_option("--nproc-per-node", o->nproc_per_node,
                 "ranks to start on this node, with the torchrun environment (RANK, WORLD_SIZE...)")
      ->check(CLI::Range(1, 4096));
  app.add_option_function<std::string>(
         "--nnodes",
         [o](const std::string& v) {
           int lo = 0, hi = 0;
           char extra = 0;
           if (std::sscanf(v.c_str(), "%d:%d%c", &lo, &hi, &extra) == 2) {
             if (lo < 1 || hi < lo || hi > 4096) {
               throw CLI::ValidationError("--nnodes", v + ": MIN:MAX needs 1 <= MIN <= MAX");
             }
             o->min_nodes = lo;
             o->nnodes = hi;
           } else if (std::sscanf(v.c_str(), "%d%c", &lo, &extra) == 1 && lo >= 1 && lo <= 4096) {
             o->nnodes = lo;
           } else {
             throw CLI::ValidationError("--nnodes", v + ": a node count N or MIN:MAX (elastic)");
           }
         },
         "nodes in the job (one tracerun per node); MIN:MAX: elastic, nodes may join and leave")
      ->type_name("N|MIN:MAX");
  app.add_option("--join-wait", o->join_wait_s,
                 "elastic: with MIN..MAX-1 nodes, seconds to wait for more before (re)starting "
                 "(default 3)")
      ->check(atLeast(0, false));
  app.add_option("--rdzv-timeout", o->rdzv_timeout_s,
                 "elastic: seconds to wait for MIN nodes before giving up (default 300)")
      ->check(atLeast(0, false));
  app.add_option("--node-rank", o->node_rank, "this node's index (0: the master node)")
      ->check(atLeast(0));
  app.add_option("--master-addr", o->master_addr,
                 "rendezvous host (default 127.0.0.1: the store stays on loopback)");
  app.add_option("--master-port", o->master_port,
                 "rendezvous port (default: a free one; port+1 is the agents' clock exchange)")
      ->check(CLI::Range(1, 65534));
  app.add_option("--job-token", o->job_token,
                 "secret naming the job to the node agents, the same on every node (needed with "
                 "--nnodes > 1; TRACERUN_JOB_TOKEN also works and is not shown by ps)");
  app.add_option("--max-restarts", o->max_restarts,
                 "restart the whole group this many times after a rank fails")
      ->check(atLeast(0));
  app.add_option("--stop-grace", o->grace_s,
                 "seconds between SIGTERM and SIGKILL when stopping the program or its ranks "
                 "(default 5)")
      ->check(atLeast(0, false));
  app.add_option("--status", o->status,
                 "status line: auto (in place on a terminal, plain lines otherwise), plain, off")
      ->check(CLI::IsMember({"auto", "plain", "off"}));
  app.add_option("program", o->program, "-- PROGRAM ARGS...: the program to run and trace");
  return {&app, [o] { return launcher::launch(*o); }};
}

}  // namespace tracerun::tools
