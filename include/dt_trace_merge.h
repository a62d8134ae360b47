/* dt_trace_merge.h: one trace for a whole multi-rank run (lib/trace/
 * trace_merge.c; docs/trace-format.md "Merged files").
 *
 * Under mpirun each rank writes its own file (run.rank<r>.json), its
 * times counted from its own start. A rank's file says in otherData.clock
 * where its time 0 lies on rank 0's clock (dt_comm_clock_sync); the
 * merged file holds every rank's events on one clock, each rank's times
 * moved by its offset, with a flow event after each message span
 * (dt_trace_flow_of), and says in otherData.merge how it was aligned.
 *
 * Alignment methods, best first:
 *   ping-pong  every file has otherData.clock of one synchronisation:
 *              offset = start_ns - the smallest start_ns, error bounded
 *              by the file's error_ns;
 *   step0      files without clocks (written before them): the ends of
 *              step 0 (the last span with iter 0 that is not an
 *              evaluation) are put together, as the ranks leave step 0's
 *              final allreduce together; the error is unknown;
 *   none       a file without step 0: each file keeps its own time 0.
 *
 * Invariants: offsets are >= 0, so merged times stay >= 0; a merged file
 * is written through dt_trace_writer (whole or not at all); each file
 * holds one rank (pid), and no two files the same one. */
#ifndef DT_TRACE_MERGE_H
#define DT_TRACE_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "dt_status.h"
#include "dt_trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How one rank file goes into the merged one. */
typedef struct dt_trace_merge_file {
    int pid;           /* the rank whose events the file holds */
    int64_t offset_ns; /* added to each of its times, >= 0 */
    int64_t error_ns;  /* bound on the offset's error; -1 unknown */
} dt_trace_merge_file;

/* The "clock" key for a rank file's otherData (dt_trace_writer_open_ext):
 * a malloc'd JSON object text, or NULL when out of memory. */
DT_API char *dt_trace_clock_json(const dt_trace_clock *c);

/* Offsets for the n rank files t[0..n-1] (names for messages): out(n) in
 * the files' order and *method ("ping-pong", "step0" or "none", see
 * above). A file with several pids or none, two files of one pid, or
 * clocks of different runs (sync_id) or only on some files are
 * DT_ERR_INVALID naming the files. */
DT_API dt_status dt_trace_align(const dt_trace *const *t, const char *const *names, int n, dt_trace_merge_file *out,
                                char method[16]);
/* The same from the files' clocks alone (every one with method set). */
DT_API dt_status dt_trace_align_clocks(const dt_trace_clock *c, const char *const *names, int n,
                                       dt_trace_merge_file *out);

typedef struct dt_trace_merger dt_trace_merger;

typedef struct dt_trace_merge_stats {
    size_t events; /* written, flows included */
    size_t flows;  /* flow events written */
    int files;
    int64_t max_error_ns; /* the largest offset error (-1: unknown) */
} dt_trace_merge_stats;

/* Start the merged file at path: tool and config_json for its header (a
 * rank file's), method and sync_id, files(n) in ascending pid; their
 * alignment goes into otherData.merge. Then add each file's events once
 * (dt_trace_merge_add), in any order, and close (or abort on a failure). */
DT_API dt_status dt_trace_merge_open(const char *path, const char *tool, const char *config_json, const char *method,
                                     int64_t sync_id, const dt_trace_merge_file *files, int n, dt_trace_merger **out);
/* File i's events, each moved by its offset and followed by its flow
 * (name names the file in messages). An event of another pid, a time
 * past INT64_MAX ns once moved, or a damaged "flow" extra is
 * DT_ERR_FORMAT naming the file and the event. */
DT_API dt_status dt_trace_merge_add(dt_trace_merger *m, int i, const dt_trace *t, const char *name);
/* Finish the file (every file must have been added) and fill *stats (may
 * be NULL). Always frees m; on failure no file is left. */
DT_API dt_status dt_trace_merge_close(dt_trace_merger *m, dt_trace_merge_stats *stats);
DT_API void dt_trace_merge_abort(dt_trace_merger *m);

/* Merge the rank files paths(n) into out_path (dtsim merge): read, align
 * (dt_trace_align), write in ascending pid. */
DT_API dt_status dt_trace_merge_files(const char *out_path, const char *const *paths, int n,
                                      dt_trace_merge_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
