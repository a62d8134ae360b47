/* dtrain_prog.h: what the training program's files share (not a library
 * header): the parsed flags (dtrain_opts), turning them into a
 * dt_train_config (dtrain_config.c), the output (dtrain_report.c), the
 * launcher's environment (dtrain_mpi.c) and sampling from a checkpoint
 * (dtrain_generate.c). main and the training loop are in dtrain.c. */
#ifndef DTRAIN_PROG_H
#define DTRAIN_PROG_H

#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "dtrain.h"
#include "job_flags.h"

#define PROG "dtrain"

/* The flags' values; the destinations hold the defaults before parsing. */
typedef struct dtrain_opts {
    job_opts job; /* the flags dtrain shares with dtsim (job_flags.h) */
    /* data */
    const char *task, *data;
    int task_digits, task_max_len;
    float blobs_separation;
    int blobs_classes, blobs_dims;
    /* mlp-bn */
    float bn_momentum;
    int bn_momentum_adjust, no_batchnorm;
    /* optimizer */
    float lr, min_lr;
    int64_t warmup_iters, decay_iters;
    const char *decay_style;
    float weight_decay, beta1, beta2, adam_eps, momentum, clip_grad;
    float lars_eta, lamb_gamma_l, lamb_gamma_u;
    const char *lr_scaling;
    int base_batch;
    /* parallelism and faults */
    int max_staleness;
    int print_schedule;
    const char *hang_rank;
    double comm_timeout;
    /* run */
    const char *device;
    int threads;
    int64_t log_interval, eval_interval;
    int eval_iters;
    int skip_nonfinite;
    int min_scale_patience; /* --min-loss-scale-patience */
    int allow_data_change; /* --load may resume on a changed --data file */
    /* checkpoints */
    const char *save, *load;
    const char *load_hf; /* --load-hf DIR: a Hugging Face GPT-2 as the model and its initial weights */
    int64_t save_interval;
    int save_keep;
    /* generation (--generate: dtrain_generate.c) */
    int generate, top_k;
    const char *prompt;
    const char *logits;    /* --logits FILE: the prompt's logits */
    const char *tokenizer; /* --tokenizer DIR: GPT-2 BPE for --data and --generate */
    float temperature;
    const char *export_hf; /* --export-hf OUT: the checkpoint as a Hugging Face GPT-2 directory */
} dtrain_opts;

/* dtrain_config.c: the flags as a configuration. Returns 0, or 2 after
 * printing the one-line error. */
int dtrain_make_config(dtrain_opts *o, dt_arg *args, int n_args, dt_train_config *cfg);
const char *dtrain_decay_name(dt_lr_decay s);

/* dtrain_generate.c: --generate's flags checked (0, or 2 after the
 * one-line error; also when its flags come without --generate), and the
 * generation itself (returns the exit status). */
int dtrain_generate_flags(const dtrain_opts *o, dt_arg *args, int n_args);
int dtrain_generate(const dtrain_opts *o);
/* --export-hf: --load's checkpoint written as OUT (returns the exit status). */
int dtrain_export_hf(const dtrain_opts *o);

/* dtrain_report.c: what the run prints. */
typedef struct dtrain_out {
    int live;       /* progress line on stderr (a terminal) */
    int line_shown; /* the progress line is on screen */
    int64_t last_draw_ns;
} dtrain_out;

void dtrain_clear_live(dtrain_out *out);
void dtrain_print_setup(const dt_trainer *tr);
/* The overflow / non-finite notes and the progress or log line of a step;
 * tps: the trainer's tokens per second. */
void dtrain_print_step(dtrain_out *out, const dt_train_config *cfg, const dt_train_stats *st, double tps);
void dtrain_print_eval(dtrain_out *out, int64_t iter, const dt_eval_result *ev);

/* dtrain_mpi.c: the launcher's environment and ending a multi-rank job. */
/* dtrain_outputs.c: --summary and --save checked, the save lock taken (0), or 1 after the message */
int dtrain_prepare_outputs(const dtrain_opts *o, dt_comm *comm, int *lock_fd);
/* dtrain_outputs.c: no output (--trace and its rank files, --summary, what
 * --save replaces) is an input (--data, --load's files): 0, or 2 after the
 * message. Before MPI, on every rank. */
int dtrain_check_not_inputs(const dtrain_opts *o);

/* dtrain_mpi.c: every rank has the same configuration and --data bytes
 * (collective, before any other): 0, or the exit status (2 a difference,
 * 1 a failure) after rank 0's one line. */
int dtrain_ranks_agree(const dtrain_opts *o, const dt_train_config *cfg, dt_comm *comm, dt_arg *args, int n_args);
void dtrain_abort_job(dt_comm *comm);
void dtrain_comm_end(dt_comm *comm);
int dtrain_quiet_other_ranks(void);
void dtrain_restore_stderr(int saved);
int dtrain_bad_command_line(int saved, int status);
/* Before MPI_Init: Open MPI's shared-memory limits for a pipeline. */
void dtrain_mpi_pipeline_env(const dt_train_config *cfg);

#endif
