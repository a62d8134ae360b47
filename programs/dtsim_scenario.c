/* dtsim_scenario.c: the simulated scenario built from --config and the
 * flags (dtsim_make_scenario), with the checks between flags and the
 * one-line errors, and the scenario's summary lines. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dt_file.h"
#include "dts_fit.h"
#include "dts_json.h"
#include "dtsim_prog.h"

/* The library's message without the "dtsim: " some of sim/'s messages
 * start with (the program prefixes its name itself), escaped for the
 * terminal: it may quote what an input file holds (dt_escape). */
const char *dtsim_last_error(void)
{
    static char esc[4 * 512 + 1]; /* dt_last_error's longest message, every byte escaped */
    const char *m = dt_last_error();
    return dt_escape(strncmp(m, PROG ": ", sizeof PROG + 1) == 0 ? m + sizeof PROG + 1 : m, esc, sizeof esc);
}

/* Exit status of a library failure on the inputs: 2 for what the user
 * gave (a bad value, a missing or malformed file), 1 otherwise. */
int dtsim_input_code(dt_status st)
{
    return st == DT_ERR_INVALID || st == DT_ERR_FORMAT || st == DT_ERR_IO || st == DT_ERR_UNSUPPORTED ? 2 : 1;
}

int dtsim_fail(dt_status st)
{
    fprintf(stderr, PROG ": %s\n", dtsim_last_error());
    return dtsim_input_code(st);
}

int dtsim_fail_scenario(dt_status st, const dtsim_opts *o)
{
    if (!o->config && !o->hw) return dtsim_fail(st);
    fprintf(stderr, PROG ": %s (the scenario of%s%s%s%s)\n", dtsim_last_error(), o->config ? " --config " : "",
            o->config ? o->config : "", o->hw ? " --hw " : "", o->hw ? o->hw : "");
    return dtsim_input_code(st);
}

/* Is path a dtrain trace: does its top-level object start with "otherData"
 * (the writer puts it first)? Looks at the first bytes only, of a regular
 * file only (a FIFO is not opened to block: the reader refuses it after). */
static int dtsim_is_trace(const char *path)
{
    int fd;
    if (dt_file_open_input(path, NULL, &fd, NULL) != DT_OK) return 0;
    char head[64];
    ssize_t n;
    do n = read(fd, head, sizeof head - 1);
    while (n < 0 && errno == EINTR);
    close(fd);
    head[n > 0 ? n : 0] = '\0';
    const char *p = head + strspn(head, " \t\r\n");
    if (*p++ != '{') return 0;
    p += strspn(p, " \t\r\n");
    return strncmp(p, "\"otherData\"", 11) == 0;
}

/* The scenario of a trace's header (otherData.config), read without its
 * events: a trace of 100 MB or more would otherwise be parsed whole for a
 * few KiB of configuration. */
static dt_status dtsim_config_from_trace(dts_scenario *sc, const char *path)
{
    dt_trace *t = NULL;
    DT_CHECK(dt_trace_read_header(path, &t));
    dt_status st = t->config_json ? dts_scenario_from_config(sc, t->config_json, path)
                                  : DT_FAIL(DT_ERR_FORMAT, "%s: the trace has no otherData.config", path);
    dt_trace_free(t);
    return st;
}

/* A dtsim config file's string `key` ("profile", "hardware": a path),
 * copied into out ("" if none). */
static void dtsim_config_path(const char *text, const char *key, char *out, size_t cap)
{
    out[0] = '\0';
    json_t *root = json_loads(text, 0, NULL);
    const json_t *p = root ? json_object_get(root, key) : NULL;
    if (json_is_string(p)) snprintf(out, cap, "%s", json_string_value(p));
    json_decref(root);
}

/* An output (--trace, --summary) that is one of the inputs would overwrite
 * it: refused before the run, comparing device and inode (dt_file.h). 0 or
 * 2 after the message. */
static int dtsim_check_outputs(const dtsim_opts *o, const dts_scenario *sc, const char *profile, const char *cfg_hw)
{
    const char *outs[2][2] = {{o->job.trace, "--trace"}, {o->job.summary, "--summary"}};
    const char *ins[6][2] = {{o->config, "--config"},
                             {o->profile ? o->profile : profile, o->profile ? "--profile" : "the --config's profile"},
                             {o->hw, "--hw"},
                             {cfg_hw, "the --config's hardware"},
                             {sc->grad_trace, o->grad_trace ? "--grad-trace" : "the --config's grad_trace"},
                             {NULL, NULL}};
    const char *co[DTS_HW_MAX_CONTENTION];
    int n_co = 0;
    char *co_buf = NULL;
    if (o->colocated && (o->job.trace || o->job.summary) &&
        dtsim_colocated_split(o->colocated, co, &n_co, &co_buf) != 0)
        return 2;
    dt_status st = DT_OK;
    for (int k = 0; k < 2 && st == DT_OK; k++) {
        if (!outs[k][0]) continue;
        for (int i = 0; i < 6 && st == DT_OK; i++)
            if (ins[i][0] && ins[i][0][0]) st = dt_file_check_not_input(outs[k][0], outs[k][1], ins[i][0], ins[i][1]);
        for (int i = 0; i < n_co && st == DT_OK; i++)
            st = dt_file_check_not_input(outs[k][0], outs[k][1], co[i], "--colocated");
    }
    free(co_buf);
    return st == DT_OK ? 0 : dtsim_fail(st);
}

/* Parse --pipeline-split into sc; 0 or 2 (after the message). */
static int dtsim_parse_split(const char *text, dts_scenario *sc)
{
    const char *q = text;
    for (int i = 0;; i++) {
        char *end = NULL;
        errno = 0;
        long v = strtol(q, &end, 10);
        if (i >= DTS_MAX_STAGES || end == q || errno || v < 1 || v > 100000 || (*end && *end != ',')) {
            fprintf(stderr,
                    PROG ": --pipeline-split '%s': expected positive block counts separated by commas, e.g. "
                         "3,5\n",
                    text);
            return 2;
        }
        sc->split[i] = (int)v;
        sc->n_split = i + 1;
        if (!*end) break;
        q = end + 1;
    }
    for (int i = sc->n_split; i < DTS_MAX_STAGES; i++) sc->split[i] = 0;
    return 0;
}

#define GIVEN(flag) dt_args_given(args, n_args, flag)

/* The model: the preset, then the sizes (a changed size: "custom"). */
static int dtsim_scenario_model(const dtsim_opts *o, dt_arg *args, int n_args, dts_scenario *sc)
{
    /* the model: the preset, then the sizes */
    if (GIVEN("--model")) {
        dt_gpt_config pre;
        if (dt_gpt_config_preset(o->job.model, &pre) != DT_OK) return dtsim_fail(DT_ERR_INVALID);
        sc->model = pre; /* the preset's vocabulary too (GPT-2's 50257): dtrain's rule */
        snprintf(sc->model_name, sizeof sc->model_name, "%s", o->job.model);
        if (!GIVEN("--seq-length") && sc->T > sc->model.seq_len) sc->T = sc->model.seq_len;
    }
    int custom = 0;
#define DTSIM_SIZE(flag, field, value)                   \
    do {                                                 \
        if (GIVEN(flag) && (value) != sc->model.field) { \
            sc->model.field = (value);                   \
            custom = 1;                                  \
        }                                                \
    } while (0)
    DTSIM_SIZE("--num-layers", num_layers, o->job.num_layers);
    DTSIM_SIZE("--hidden-size", hidden_size, o->job.hidden_size);
    DTSIM_SIZE("--num-attention-heads", num_heads, o->job.num_heads);
    DTSIM_SIZE("--max-position-embeddings", seq_len, o->job.max_pos);
#undef DTSIM_SIZE
    if (custom) snprintf(sc->model_name, sizeof sc->model_name, "custom");
    if (GIVEN("--vocab-size")) sc->model.vocab_size = o->vocab;
    const int tie = job_tie_embeddings(&o->job, PROG, sc->model.tie_embeddings);
    if (tie < 0) return 2;
    sc->model.tie_embeddings = tie;
    if (GIVEN("--seq-length")) sc->T = o->job.seq_length;
    return 0;
}

/* The batch (--global-batch-size or --micro-batches: m) and the layout. */
static int dtsim_scenario_batch(const dtsim_opts *o, dt_arg *args, int n_args, dts_scenario *sc)
{
    /* batch and layout */
    if (GIVEN("--micro-batch-size")) sc->B = o->job.micro_batch;
    if (GIVEN("--data-parallel-size")) sc->d = o->data_size;
    if (GIVEN("--tensor-model-parallel-size")) sc->t = o->job.tensor_size;
    if (o->job.no_vocab_parallel) sc->vocab_parallel = 0;
    if (o->job.no_scatter_gather) sc->scatter_gather = 0;
    if (o->job.sequence_parallel) sc->sequence_parallel = 1;
    if (GIVEN("--context-parallel-size")) sc->c = o->job.context_size;
    if (GIVEN("--cp-comm-type") && dt_cp_comm_parse(o->job.cp_comm_type, &sc->cp_comm) != DT_OK)
        return dtsim_fail(DT_ERR_INVALID);
    if (GIVEN("--pipeline-model-parallel-size")) sc->p = o->job.pipeline_size;
    const int64_t per_micro = (int64_t)sc->B * sc->d;
    if (GIVEN("--global-batch-size")) {
        if (o->job.global_batch % per_micro != 0) {
            if (sc->d == 1)
                fprintf(stderr, PROG ": --global-batch-size %d is not a multiple of --micro-batch-size %d\n",
                        o->job.global_batch, sc->B);
            else
                fprintf(stderr,
                        PROG ": --global-batch-size %d is not a multiple of --micro-batch-size %d x "
                             "--data-parallel-size %d\n",
                        o->job.global_batch, sc->B, sc->d);
            return 2;
        }
        if (GIVEN("--micro-batches") && (int64_t)o->micro_batches * per_micro != o->job.global_batch) {
            fprintf(stderr,
                    PROG ": --micro-batches %d x --micro-batch-size %d x --data-parallel-size %d is not "
                         "--global-batch-size %d\n",
                    o->micro_batches, sc->B, sc->d, o->job.global_batch);
            return 2;
        }
        if (o->job.global_batch / per_micro > DTS_MAX_MICRO) {
            fprintf(stderr,
                    PROG ": --global-batch-size %d gives %lld micro-batches per step and pipeline, more than the %d "
                         "the simulator holds (a larger --micro-batch-size, or more data parallelism)\n",
                    o->job.global_batch, (long long)(o->job.global_batch / per_micro), DTS_MAX_MICRO);
            return 2;
        }
        sc->m = (int)(o->job.global_batch / per_micro);
    }
    if (GIVEN("--micro-batches")) sc->m = o->micro_batches;
    if (GIVEN("--train-iters")) sc->steps = o->job.train_iters;
    if (GIVEN("--seed")) sc->seed = o->job.seed;
    if (GIVEN("--optimizer")) {
        dt_optim_kind kind;
        if (dt_optim_kind_parse(o->job.optimizer, &kind) != DT_OK) return dtsim_fail(DT_ERR_INVALID);
        sc->optimizer_states = kind == DT_OPTIM_ADAMW || kind == DT_OPTIM_LAMB ? 2 : 1;
    }
    return 0;
}

/* Precision and the loss scaler. */
static int dtsim_scenario_precision(const dtsim_opts *o, dt_arg *args, int n_args, dts_scenario *sc)
{
    /* precision */
    if (o->job.fp16 && o->job.bf16) {
        fprintf(stderr, PROG ": --fp16 and --bf16: choose one\n");
        return 2;
    }
    if (o->job.fp16) snprintf(sc->precision, sizeof sc->precision, "fp16");
    if (o->job.bf16) snprintf(sc->precision, sizeof sc->precision, "bf16");
    if (GIVEN("--loss-scale")) sc->scaler.static_scale = o->job.loss_scale;
    if (GIVEN("--initial-loss-scale")) sc->scaler.initial_scale = o->job.initial_loss_scale;
    if (GIVEN("--loss-scale-window")) sc->scaler.window = o->job.loss_scale_window;
    if (GIVEN("--hysteresis")) sc->scaler.hysteresis = o->job.hysteresis;
    if (GIVEN("--min-loss-scale")) sc->scaler.min_scale = o->job.min_loss_scale;
    sc->use_loss_scaling = !strcmp(sc->precision, "fp16") || sc->scaler.static_scale > 0;
    static const char *const scaler_flags[] = {"--initial-loss-scale", "--loss-scale-window", "--hysteresis",
                                               "--min-loss-scale", NULL};
    for (const char *const *f = scaler_flags; *f; f++)
        if (GIVEN(*f) && (strcmp(sc->precision, "fp16") != 0 || sc->scaler.static_scale > 0)) {
            fprintf(stderr, PROG ": %s needs dynamic loss scaling (--fp16 without --loss-scale)\n", *f);
            return 2;
        }
    return 0;
}

/* Recomputation (Megatron-LM's rule, as dtrain) and the parallelism. */
static int dtsim_scenario_parallel(const dtsim_opts *o, dt_arg *args, int n_args, dts_scenario *sc)
{
    /* memory: Megatron-LM's rule, as dtrain */
    if (o->job.recompute_on || GIVEN("--recompute-granularity"))
        sc->recompute = !strcmp(o->job.recompute_granularity, "full") ? 1 : 2;
    if (GIVEN("--recompute-num-layers")) {
        if (sc->recompute != 1) { /* given here, or by --config */
            fprintf(stderr, PROG ": --recompute-num-layers needs --recompute-granularity full\n");
            return 2;
        }
        sc->recompute_num_layers = o->job.recompute_num_layers;
    }

    /* parallelism */
    if (GIVEN("--pipeline-schedule") && dt_sched_kind_parse(o->job.pipeline_schedule, &sc->schedule) != DT_OK)
        return dtsim_fail(DT_ERR_INVALID);
    if (o->job.pipeline_split && dtsim_parse_split(o->job.pipeline_split, sc) != 0) return 2;
    if (GIVEN("--virtual-pipeline-model-parallel-size")) sc->vpp = o->job.virtual_pipeline_size;
    if (GIVEN("--num-layers-per-virtual-pipeline-stage")) sc->vpp_layers = o->job.layers_per_virtual_stage;
    if (GIVEN("--allreduce")) {
        const int ps = !strcmp(o->job.allreduce, "ps-sync") || !strcmp(o->job.allreduce, "ps-async");
        snprintf(sc->exchange_name, sizeof sc->exchange_name, "%s", o->job.allreduce);
        sc->exchange = !strcmp(o->job.allreduce, "tree")       ? DTS_EX_TREE
                       : !strcmp(o->job.allreduce, "naive")    ? DTS_EX_NAIVE
                       : !strcmp(o->job.allreduce, "ps-sync")  ? DTS_EX_PS_SYNC
                       : !strcmp(o->job.allreduce, "ps-async") ? DTS_EX_PS_ASYNC
                                                               : DTS_EX_RING;
        sc->num_ps_servers = ps ? (sc->num_ps_servers > 0 ? sc->num_ps_servers : 1) : 0;
    }
    if (GIVEN("--num-ps-servers")) {
        if (sc->exchange != DTS_EX_PS_SYNC && sc->exchange != DTS_EX_PS_ASYNC) {
            fprintf(stderr, PROG ": --num-ps-servers needs --allreduce ps-sync or ps-async\n");
            return 2;
        }
        sc->num_ps_servers = o->job.num_ps_servers;
    }
    if (o->job.distributed_optimizer && o->job.zero_stage >= 2) {
        fprintf(stderr,
                PROG ": --use-distributed-optimizer is ZeRO stage 1 and --zero-stage is %d: give one of the two\n",
                o->job.zero_stage);
        return 2;
    }
    if (o->job.distributed_optimizer) sc->zero = 1;
    if (GIVEN("--zero-stage")) sc->zero = o->job.zero_stage;
    if (o->job.zero_prefetch) sc->zero_prefetch = 1;
    if (GIVEN("--bucket-size-mb")) sc->bucket_bytes = (int64_t)(o->job.bucket_mb * (1 << 20));
    if (GIVEN("--allreduce-chunk-bytes")) sc->chunk_bytes = o->job.allreduce_chunk_bytes;
    if (o->job.slow_rank) {
        int r, ms;
        if (dt_args_parse_rank_ms(PROG, "--slow-rank", o->job.slow_rank, &r, &ms) != DT_ARGS_OK) return 2;
        sc->slow_rank = r;
        sc->slow_ns = (int64_t)ms * 1000000;
    }
    return 0;
}

/* The machine (--hw, the node flags) and the numerics inputs. */
static int dtsim_scenario_machine(const dtsim_opts *o, dt_arg *args, int n_args, dts_scenario *sc)
{
    /* machine and numerics inputs */
    if (o->hw) {
        dts_hw hw;
        dt_status st = dts_hw_load(o->hw, &hw);
        if (st != DT_OK) return dtsim_fail(st);
        sc->hw = hw;
    }
    if (o->devices_per_node > 0) sc->hw.devices_per_node = o->devices_per_node;
    if (o->cores_per_node > 0) sc->hw.cores_per_node = o->cores_per_node;
    if (o->collectives) sc->hw.collectives = (dts_hw_coll)dts_hw_coll_parse(o->collectives); /* a choice: valid */
    if (sc->hw.cores_per_node > 0 && sc->t > 1 && sc->hw.devices_per_node % sc->t != 0) {
        fprintf(stderr,
                PROG ": --cores-per-node with --tensor-model-parallel-size %d: expected the devices per node (%d) "
                     "to be a multiple of it (a tensor-parallel group shares one node's cores)\n",
                sc->t, sc->hw.devices_per_node);
        return 2;
    }
    if (o->grad_trace) {
        if (strlen(o->grad_trace) >= sizeof sc->grad_trace) {
            fprintf(stderr, PROG ": --grad-trace: a file name of at most %zu bytes expected\n",
                    sizeof sc->grad_trace - 1);
            return 2;
        }
        snprintf(sc->grad_trace, sizeof sc->grad_trace, "%s", o->grad_trace);
    }
    if (sc->grad_trace[0]) { /* an input: missing or not a regular file is the user's error (2), found before the run */
        int fd;
        dt_status st =
            dt_file_open_input(sc->grad_trace, o->grad_trace ? "--grad-trace" : "the --config's grad_trace", &fd, NULL);
        if (st != DT_OK) return dtsim_fail(st);
        close(fd);
    }
    return 0;
}

int dtsim_colocated_split(const char *list, const char **out, int *n, char **buf)
{
    *n = 0;
    *buf = strdup(list);
    if (!*buf) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    for (char *save = NULL, *tok = strtok_r(*buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n == DTS_HW_MAX_CONTENTION) {
            ++*n;
            break;
        }
        out[(*n)++] = tok;
    }
    if (*n >= 2 && *n <= DTS_HW_MAX_CONTENTION) return 0;
    fprintf(stderr, PROG ": --colocated %s: expected 2 to %d trace files separated by commas\n", list,
            DTS_HW_MAX_CONTENTION);
    free(*buf);
    *buf = NULL;
    return 2;
}

int dtsim_colocated_fit(const char *list, const char *profile, int skip, dts_hw *hw)
{
    if (!profile || !profile[0]) {
        fprintf(stderr,
                PROG ": --colocated: expected --profile FILE too (the lone run the copies are compared with)\n");
        return 2;
    }
    const char *co[DTS_HW_MAX_CONTENTION];
    int n = 0;
    char *buf = NULL;
    if (dtsim_colocated_split(list, co, &n, &buf) != 0) return 2;
    dt_status st = dts_fit_contention_files(profile, co, n, skip > 0 ? skip : 1, hw, NULL, NULL);
    free(buf);
    return st == DT_OK ? 0 : dtsim_fail(st);
}

/* The scenario: --config first, then the flags over it (dtsim_prog.h). */
int dtsim_make_scenario(const dtsim_opts *o, dt_arg *args, int n_args, dts_scenario *sc, char *profile,
                        size_t profile_cap, int check)
{
    dts_scenario_default(sc);
    profile[0] = '\0';
    char cfg_hw[1024] = "";
    if (o->config && dtsim_is_trace(o->config)) {
        dt_status st = dtsim_config_from_trace(sc, o->config);
        if (st != DT_OK) return dtsim_fail(st);
    } else if (o->config) {
        char *text; /* a regular file only (a FIFO would block, /dev/zero never ends) */
        dt_status st = dt_file_read_whole(o->config, NULL, DTS_JSON_FILE_MAX, &text, NULL);
        if (st != DT_OK) return dtsim_fail(st);
        st = dts_scenario_from_config(sc, text, o->config);
        if (st == DT_OK) {
            dtsim_config_path(text, "profile", profile, profile_cap);
            dtsim_config_path(text, "hardware", cfg_hw, sizeof cfg_hw);
        }
        free(text);
        if (st != DT_OK) return dtsim_fail(st);
    }
    if (o->profile) snprintf(profile, profile_cap, "%s", o->profile);
    int rc = dtsim_scenario_model(o, args, n_args, sc);
    if (rc == 0) rc = dtsim_scenario_batch(o, args, n_args, sc);
    if (rc == 0) rc = dtsim_scenario_precision(o, args, n_args, sc);
    if (rc == 0) rc = dtsim_scenario_parallel(o, args, n_args, sc);
    if (rc == 0) rc = dtsim_scenario_machine(o, args, n_args, sc);
    if (rc == 0) rc = dtsim_check_outputs(o, sc, profile, cfg_hw);
    if (rc == 0 && o->colocated) rc = dtsim_colocated_fit(o->colocated, profile, o->skip, &sc->hw);
    if (rc != 0) return rc;
    if (check) {
        dt_status st = dts_scenario_check(sc);
        if (st != DT_OK) return dtsim_fail_scenario(st, o);
    }
    return 0;
}

#undef GIVEN

void dtsim_print_scenario(FILE *f, const dts_scenario *sc)
{
    fprintf(f,
            "scenario: %s (%d layers, width %d, %d heads, vocab %d), B=%d T=%d m=%d (global batch %lld), "
            "%lld step%s\n",
            sc->model_name, sc->model.num_layers, sc->model.hidden_size, sc->model.num_heads, sc->model.vocab_size,
            sc->B, sc->T, sc->m, (long long)sc->m * sc->B * sc->d, (long long)sc->steps, sc->steps == 1 ? "" : "s");
    char rc[64] = "";
    if (sc->recompute == 1 && sc->recompute_num_layers > 1)
        snprintf(rc, sizeof rc, ", full recomputation (groups of %d blocks)", sc->recompute_num_layers);
    else if (sc->recompute) snprintf(rc, sizeof rc, ", %s recomputation", sc->recompute == 1 ? "full" : "selective");
    fprintf(f, "layout:   t=%d p=%d d=%d", sc->t, sc->p, sc->d);
    if (sc->c > 1) fprintf(f, " c=%d", sc->c);
    char cp[64] = "";
    if (sc->c > 1) snprintf(cp, sizeof cp, ", context parallelism (%s)", dt_cp_comm_name(sc->cp_comm));
    if (sc->exchange == DTS_EX_PS_SYNC || sc->exchange == DTS_EX_PS_ASYNC)
        fprintf(f, " + %d parameter server%s", sc->num_ps_servers, sc->num_ps_servers == 1 ? "" : "s");
    fprintf(f, " (%d rank%s), schedule %s, exchange %s%s, %s%s%s%s\n", dts_scenario_world(sc),
            dts_scenario_world(sc) == 1 ? "" : "s", dt_sched_kind_name(sc->schedule), sc->exchange_name,
            sc->zero == 1   ? " + ZeRO-1"
            : sc->zero == 2 ? " + ZeRO-2"
            : sc->zero == 3 ? " + ZeRO-3"
                            : "",
            sc->precision, rc, sc->sequence_parallel ? ", sequence parallelism" : "", cp);
    if (sc->slow_rank >= 0 && sc->slow_ns > 0)
        fprintf(f, "straggler: rank %d sleeps %g ms before each exchange (--slow-rank)\n", sc->slow_rank,
                (double)sc->slow_ns / 1e6);
    char hw_name[4 * sizeof sc->hw.name], source[4 * sizeof sc->cost.source]; /* from files: escaped */
    fprintf(f, "machine:  %s; cost: %s\n", dt_escape(sc->hw.name, hw_name, sizeof hw_name),
            dt_escape(sc->have_cost ? sc->cost.source : "none", source, sizeof source));
}

void dtsim_warn_unmodelled(const dtsim_opts *o, const dts_scenario *sc)
{
    char what[1024];
    if (dts_scenario_unmodelled(sc, o->hw != NULL, what, sizeof what) == 0) return;
    fflush(stdout);
    char esc[4 * sizeof what]; /* it quotes the run's cluster description: escaped (dt_escape) */
    fprintf(stderr, PROG ": warning: %s records what dtsim does not model, left out of the prediction: %s\n",
            o->config ? o->config : "the configuration", dt_escape(what, esc, sizeof esc));
}
