/* dtbench.h: what dtbench's files share (not a library header): the
 * helpers every benchmark uses (dtbench.c) and each family's commands:
 * bench_kernels.c (gemm, gelu), bench_train.c (train, recompute,
 * largebatch, amp), bench_parallel.c (allreduce, bubbles, pipeline, tp),
 * bench_compose.c (compose), bench_threads.c (threads), bench_zero.c (zero),
 * bench_longseq.c (longseq), bench_interop.c (interop),
 * simval.c (simval), simspeed.c (simspeed), vizbench.c (viz). */
#ifndef DTBENCH_H
#define DTBENCH_H

#include <stdint.h>

#include "dt_cuda.h"
#include "dtrain.h"
#include "../programs/args.h"

/* dtbench.c: a failure's message (with the library's) and exit 1. */
void dtbench_die(const char *what) __attribute__((noreturn));
/* Exit status when CUDA or a device is missing: 1, or 77 with --skip-no-device. */
extern int dtbench_no_device_status;
dt_backend *dtbench_gpu_backend(const char *cmd);
void dtbench_check(dt_status st, const char *what);
void dtbench_goal_line(const char *key, double value, double goal, const char *note);

/* bench_kernels.c */
/* How the GPU runs a GEMM (see bench_kernels.c). */
typedef enum dtbench_gemm_kind { GEMM_FP32 = 0, GEMM_TF32, GEMM_BF16, GEMM_FP16 } dtbench_gemm_kind;
extern const char *const dtbench_gemm_kind_name[];
double dtbench_sgemm_peak(int threads, int verbose);
/* GFLOP/s of the CPU backend's be->gemm at one shape (best of 3 rounds),
 * FP32 or bf16 inputs (bench_kernels.c), and its bf16 peak on squares. */
double dtbench_cpu_gemm_rate(dt_backend *be, int M, int N, int K, int transb, dt_dtype inputs);
double dtbench_cpu_bf16_peak(dt_backend *be, int verbose);
/* ns per element of one bf16 pass (a be->round, a be->cast of 1M floats), best of 3 */
double dtbench_cpu_bf16_pass_ns(dt_backend *be);
double dtbench_gpu_gemm_peak(dt_backend *be, dtbench_gemm_kind k, int verbose);
int dtbench_cmd_gemm(int threads);
int dtbench_cmd_gemm_gpu(void);
int dtbench_cmd_gelu(int64_t n64, int iters);

/* bench_train.c */
int dtbench_cmd_train(const char *device, int threads, const char *model, int B, int T, int steps, int warmup,
                      dt_dtype precision, int compare);
int dtbench_cmd_recompute(int threads, const char *model, int B, int T, int steps, int warmup);
int dtbench_cmd_largebatch(int threads, int base_iters, int base_batch);
int dtbench_cmd_amp(int threads, int trained);

/* bench_parallel.c */
int dtbench_cmd_allreduce(int64_t chunk_bytes, int64_t min_bytes, int64_t max_bytes, int iters_flag,
                          const char *json_path);
int dtbench_cmd_bubbles(int argc, char **argv);
int dtbench_cmd_flows(int argc, char **argv);
int dtbench_cmd_tp(int threads, int B, int T, int L, int C, int steps);
int dtbench_cmd_pipeline(int p, int threads, int B, int T, int L, int C, const int *split, int steps, const char *keep);

/* bench_zero.c */
int dtbench_cmd_zero(int threads, int B, int T, int L, int C, int steps, int repeats, dt_dtype precision, int t, int p);

/* bench_interop.c: its own flags (argv from the command on) */
int dtbench_cmd_interop(int argc, char **argv);

/* bench_longseq.c */
int dtbench_cmd_longseq(int threads, int steps);
/* bench_fp8.c */
int dtbench_cmd_fp8(const char *device, int threads, const char *model, int B, int T, int steps);

/* bench_compose.c */
int dtbench_cmd_compose(int repeats, int steps, int threads);
/* bench_threads.c */
int dtbench_cmd_threads(const char *model, int steps, int repeats);

int dt_bench_simval(int argc, char **argv);   /* bench/simval.c */
int dt_bench_simspeed(int argc, char **argv); /* bench/simspeed.c */
int dt_bench_viz(int argc, char **argv);      /* bench/vizbench.c (vizbench_none.c without SDL2) */

#endif
