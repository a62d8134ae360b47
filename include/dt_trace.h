/* dt_trace.h: dtrain's one trace format, Chrome Trace Event JSON (opens in
 * Perfetto / chrome://tracing), written by real runs and by the simulator,
 * read back by the simulator's calibration and the viewer. The schema is in
 * docs/trace-format.md; DT_TRACE_VERSION is written into every file.
 *
 * File shape:
 *   {"otherData": {"format": "dtrain-trace", "version": 1,
 *                  "minor_version": 1, "tool": ..., "config": {...}},
 *    "displayTimeUnit": "ns",
 *    "traceEvents": [ {event}, {event}, ... ]}
 * Times are integer nanoseconds in memory; in the file "ts"/"dur" are
 * microseconds with three decimals (exact nanoseconds). pid = rank,
 * tid = lane (DT_LANE_*). Flow events ('s', 'f') join a send span to the
 * receive span it fed, across ranks (minor version 1).
 *
 * Invariants: the writer streams one event per line and never holds the
 * whole trace; a file cut short (a crash) is rejected by the reader with its
 * position; reading what was written gives back equal events. */
#ifndef DT_TRACE_H
#define DT_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DT_TRACE_VERSION 1
/* Additions within version 1 (docs/trace-format.md "Compatibility"): 1 =
 * flow events and the merged file's header (issue 23). Written into every file
 * as otherData.minor_version; a reader reads every minor of its version. */
#define DT_TRACE_VERSION_MINOR 1
#define DT_TRACE_NAME_MAX 48
#define DT_TRACE_MAX_EXTRA 8
/* Value of a well-known integer arg that is absent (left out of the file). */
#define DT_TRACE_NONE (-2147483647 - 1)

/* Lanes (tid): one row per lane per rank in Perfetto. */
enum { DT_LANE_COMPUTE = 0, DT_LANE_COMM = 1, DT_LANE_OPTIM = 2, DT_LANE_DATA = 3 };

/* Phases used by dtrain (Chrome's "ph"). */
typedef enum dt_trace_phase {
    DT_TRACE_COMPLETE = 'X',   /* a span: ts + dur */
    DT_TRACE_COUNTER = 'C',    /* a value over time: name + value */
    DT_TRACE_INSTANT = 'i',    /* a point event */
    DT_TRACE_METADATA = 'M',   /* process_name / thread_name: label */
    DT_TRACE_FLOW_START = 's', /* a flow leaves the span enclosing ts on (pid, tid): flow_id */
    DT_TRACE_FLOW_END = 'f'    /* the flow arrives in the span enclosing ts ("bp":"e"): flow_id */
} dt_trace_phase;

/* The largest flow id a span's "flow" extra (a double) holds exactly: 2^53 - 1. */
#define DT_TRACE_FLOW_ID_MAX 9007199254740991LL

/* An extra numeric argument (key -> value) beyond the well-known ones. */
typedef struct dt_trace_arg {
    char key[24];
    double value;
} dt_trace_arg;

typedef struct dt_trace_event {
    char ph;                      /* dt_trace_phase */
    char name[DT_TRACE_NAME_MAX]; /* e.g. "forward", "backward", "optimizer", "loss" */
    char cat[24];                 /* category: "compute", "comm", "optim", "counter", "meta" */
    int pid;                      /* rank */
    int tid;                      /* lane */
    int64_t ts_ns;
    int64_t dur_ns; /* 'X' only */
    /* well-known args; DT_TRACE_NONE means absent */
    int64_t iter;
    int micro_batch;
    int layer; /* -1 embedding, 0..L-1 blocks, L head + loss */
    int64_t bytes;
    double value;                  /* 'C': the counter's value (written as args.value) */
    char label[DT_TRACE_NAME_MAX]; /* 'M': args.name */
    int64_t flow_id;               /* 's'/'f': the flow's "id", 0..INT64_MAX, equal on its two ends; else 0 */
    int n_extra;
    dt_trace_arg extra[DT_TRACE_MAX_EXTRA];
} dt_trace_event;

/* An event with every well-known arg absent. */
DT_API void dt_trace_event_init(dt_trace_event *e, char ph, const char *name, const char *cat, int pid, int tid,
                                int64_t ts_ns, int64_t dur_ns);
DT_API dt_status dt_trace_event_add_arg(dt_trace_event *e, const char *key, double value);
/* The extra arg `key` of e, or NULL when it has none. */
DT_API const dt_trace_arg *dt_trace_event_find_arg(const dt_trace_event *e, const char *key);
/* Its value, or dflt when e has no such extra. */
DT_API double dt_trace_event_arg(const dt_trace_event *e, const char *key, double dflt);
/* The flow event a message span starts or ends (docs/trace-format.md "Flow
 * events"): span is a complete event with a "flow" extra (the message's id)
 * named send* (the flow's start, 's' at the span's start) or recv* (its end,
 * 'f' at the span's end); the flow has the span's pid and tid, cat "flow"
 * and the name after the span's first '_' ("act" for send_act/recv_act).
 * Returns 1 and fills *flow; 0 when span is no such event; -1 when its
 * "flow" is not an integer in 0..DT_TRACE_FLOW_ID_MAX (a damaged file). */
DT_API int dt_trace_flow_of(const dt_trace_event *span, dt_trace_event *flow);

typedef struct dt_trace_writer dt_trace_writer;

/* Open path for writing; tool is "dtrain" or "dtsim"; config_json (may be
 * NULL) is a JSON object text stored under otherData.config. */
DT_API dt_status dt_trace_writer_open(const char *path, const char *tool, const char *config_json,
                                      dt_trace_writer **out);
/* The same with more keys in otherData: other_json (may be NULL) is a JSON
 * object text whose members follow "config" ("clock" in a rank's file,
 * "merge" in a merged one); the keys the writer sets itself are refused. */
DT_API dt_status dt_trace_writer_open_ext(const char *path, const char *tool, const char *config_json,
                                          const char *other_json, dt_trace_writer **out);
DT_API dt_status dt_trace_write(dt_trace_writer *w, const dt_trace_event *e);
/* Finish the JSON and close; always frees w. When an earlier write failed
 * the file is incomplete: it is removed (a regular file only) and the
 * failure returned. */
DT_API dt_status dt_trace_writer_close(dt_trace_writer *w);
/* The run that wrote it failed: close without finishing and remove the file
 * (a regular file only: not /dev/stdout, a pipe, ...), so that a failed run
 * leaves no partial trace behind. Always frees w. */
DT_API void dt_trace_writer_abort(dt_trace_writer *w);

/* otherData.clock: the file of one rank of a multi-rank run, which puts
 * its times on the run's one clock (docs/trace-format.md "Merged files"). */
typedef struct dt_trace_clock {
    char method[16];  /* "ping-pong" (dt_comm_clock_sync); "" when the file has no clock */
    int64_t sync_id;  /* the synchronisation's number, the same in every file of the run */
    int rank, ranks;  /* the file's rank (its events' pid) of the run's ranks */
    int64_t start_ns; /* the file's time 0 on rank 0's monotonic clock */
    int64_t error_ns; /* bound on start_ns's error (half the shortest ping-pong) */
} dt_trace_clock;

/* otherData.merge: how a merged file put its ranks on one clock. */
typedef struct dt_trace_merge_info {
    char method[16];    /* "ping-pong", "step0" or "none"; "" when the file is not merged */
    int64_t sync_id;    /* ping-pong: the run's synchronisation; else 0 */
    int n;              /* ranks merged */
    int *pid;           /* (n) ascending */
    int64_t *offset_ns; /* (n) added to each time of that rank's file, >= 0 */
    int64_t *error_ns;  /* (n) bound on the offset's error; -1 unknown (step0, none) */
} dt_trace_merge_info;

typedef struct dt_trace {
    int version;
    int minor_version; /* otherData.minor_version (0 when absent: files written before it) */
    char tool[32];
    char *config_json; /* otherData.config re-serialised compactly, or NULL */
    dt_trace_clock clock;      /* otherData.clock (method "" when absent) */
    dt_trace_merge_info merge; /* otherData.merge (method "" when absent); freed by dt_trace_free */
    dt_trace_event *events;
    size_t n_events;
} dt_trace;

/* Read a trace file. A truncated or malformed file, a missing field or a
 * wrong version gives DT_ERR_FORMAT with a message naming the file and the
 * position (line, column, or event index). */
DT_API dt_status dt_trace_read(const char *path, dt_trace **out);
/* The same from the len bytes at buf (a whole file's contents, not
 * NUL-terminated); name stands for the file in messages (NULL: "(memory)").
 * Used by the fuzzer (fuzz/trace_read.c). */
DT_API dt_status dt_trace_read_mem(const char *name, const void *buf, size_t len, dt_trace **out);
/* The header only (otherData: version, tool, config_json), with no events
 * (n_events 0): reads the file up to the end of otherData, so its cost does
 * not depend on the events, and a damaged event tail is not seen. Errors
 * as dt_trace_read's for the header. Used by dtsim run --config. */
DT_API dt_status dt_trace_read_header(const char *path, dt_trace **out);
DT_API void dt_trace_free(dt_trace *t);

#ifdef __cplusplus
}
#endif
#endif
