/* dts_fit.h: least squares for the α-β cost of communication (sim/fit.c):
 * from `dtbench allreduce --json` tables or from a trace's collective steps;
 * and the compute slowdown of ranks sharing a node (sim/fit_contention.c).
 *
 * Model: ns ≈ α·x_latency + x_bytes/β (α in ns per latency term, β in
 * bytes per ns). Relative RMS error of a fit: sqrt(mean((pred/ns - 1)^2))
 * over its points, so a 4 KiB and a 64 MiB point weigh alike in it. */
#ifndef DTS_FIT_H
#define DTS_FIT_H

#include "dt_status.h"
#include "dt_trace.h"
#include "dts_hw.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dts_fit_point {
    double x_latency; /* latency terms (messages in sequence) */
    double x_bytes;   /* bytes that cross the link in sequence */
    double ns;        /* measured time */
} dts_fit_point;

/* Ordinary least squares of ns on (x_latency, x_bytes), no intercept, with
 * α >= 0 and β > 0: if the unconstrained solution has α < 0 it is refitted
 * with α = 0; if it cannot give β > 0 (or the points cannot separate α
 * from β, or n < 2, or a point has ns <= 0 or a negative x), DT_ERR_INVALID
 * naming `what`. rel_rms (may be NULL): the relative RMS error above. */
dt_status dts_fit_link(const dts_fit_point *pts, int n, const char *what, dts_link *out, double *rel_rms);
/* The same with each point weighted by 1/ns^2: minimises the relative
 * error itself, so the small messages that determine α are not drowned by
 * the large ones (which dominate the absolute residuals of OLS). */
dt_status dts_fit_link_relative(const dts_fit_point *pts, int n, const char *what, dts_link *out, double *rel_rms);

/* Points from the rows of one algorithm ("ring") of a
 * `dtbench allreduce --json FILE` table:
 * time = 2(n-1)·α + 2(n-1)/n·S/β (n ranks, S bytes), fitted by
 * dts_fit_link_relative: the sizes span 4 KiB to 64 MiB, and plain OLS
 * lets the largest rows decide alone (on this machine's default table, 2
 * ranks, OLS gave α = 0, β = 6.9 GB/s at 57% relative RMS error; the
 * relative fit α = 1.8 µs, β = 10.8 GB/s at 19%, against 3.2 µs measured
 * for the 2-step 4 KiB ring). Errors name the file and the field. */
dt_status dts_fit_allreduce_json(const char *path, const char *algo, dts_link *out, double *rel_rms);

/* Points from a trace's communication step spans (cat "comm", name `name`:
 * "reduce-scatter", "all-gather", "reduce", "broadcast" or "allreduce";
 * NULL: all of them), each one message: dur = α + bytes/β, bytes = the
 * span's `bytes` arg (sent by this rank in the step), fitted by
 * dts_fit_link_relative as above; steps of a single size cannot separate
 * α from β (an error: use several bucket sizes). Spans without bytes
 * are skipped, and so is iteration 0 (warm-up) when later iterations have
 * spans. Pipeline send/recv and parameter-server push/pull spans are not
 * used (they include waiting for the peer's compute), nor tp allreduces. */
dt_status dts_fit_trace_comm(const dt_trace *t, const char *name, dts_link *out, double *rel_rms);

/* The compute slowdown of k ranks computing at once on one node
 * (sim/fit_contention.c): co[0..k-1] are k copies of one single-rank
 * profile run at the same time, solo the same run alone; *slowdown = the
 * mean over the copies of their mean compute time per step (forward,
 * backward, recompute; the first `skip` steps left out) over solo's, and
 * *spread (may be NULL) the copies' range of that ratio. The configs must
 * be equal but for "trace" (DT_ERR_INVALID naming the file otherwise).
 * For dts_hw.contention[k-1]. */
dt_status dts_fit_contention(const dt_trace *solo, const char *solo_name, const dt_trace *const *co,
                             const char *const *co_names, int k, int skip, double *slowdown, double *spread);
/* The same from files: reads solo_path and paths[0..k-1] (2 <= k <=
 * DTS_HW_MAX_CONTENTION), fits, and writes hw->contention[k-1] (a slowdown
 * below 1 is noise: 1); entries between the last one hw already has and k
 * are interpolated linearly in the ranks computing at once, and
 * n_contention grows to k. *slowdown, *spread (may be NULL): the fit. */
dt_status dts_fit_contention_files(const char *solo_path, const char *const *paths, int k, int skip, dts_hw *hw,
                                   double *slowdown, double *spread);

#ifdef __cplusplus
}
#endif
#endif
