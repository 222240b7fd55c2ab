/* The C ABI between communication tracers (the c10d decorator in traced_group.h, the NCCL
 * interposer) and libtracerun.so, which defines the entry points. Declared weak: they are null
 * when libtracerun is not loaded. No libtorch, no C++: one declaration for every side. */
#pragma once

#include <stdint.h>

/* libtracerun.so, which defines the entry points, sets this to nothing before including. */
#ifndef TRACERUN_COMM_WEAK
#define TRACERUN_COMM_WEAK __attribute__((weak))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* One completed communication. Strings need to live only during the call. Fields < 0 are absent
 * (except bytes, always recorded). */
struct tracerun_comm_event {
  const char* op;     /* span name: "c10d:allreduce", "nccl:AllReduce" */
  const char* group;  /* group name (the span's detail) */
  const char* track;  /* track name; null: the process's async track */
  int64_t start_ns;   /* issue, CLOCK_MONOTONIC */
  int64_t end_ns;     /* completion (or the host call's return) */
  int64_t bytes;
  int64_t peer;       /* send/recv's other side: global rank (c10d), communicator rank (nccl) */
  int64_t root;       /* root of broadcast/reduce/gather/scatter, numbered as peer */
  int64_t group_size;
  int64_t group_rank;
  int64_t seq;        /* call index within the group (per process) */
  int64_t dtype;      /* c10::ScalarType value (c10d) or ncclDataType_t (nccl) */
  int64_t tag;        /* send/recv tag */
};

/* Records e as a span on its track; returns 1 when recorded (0: not capturing). */
TRACERUN_COMM_WEAK int tracerun_comm_record(const struct tracerun_comm_event* e);
/* Non-zero while tracerun captures communication in this process. */
TRACERUN_COMM_WEAK int tracerun_comm_capturing(void);

#ifdef __cplusplus
}
#endif
