/* dtrain_mpi.c: dtrain under a launcher (mpirun): whether it is one, the
 * Open MPI settings a pipeline needs before MPI_Init, one rank reporting a
 * bad command line, every rank checked to run the same job
 * (dtrain_ranks_agree), and ending a multi-rank job after a failure. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtrain_prog.h"

/* Open MPI's shared memory sends a message above its eager limit (4 KiB)
 * only when the sender calls MPI again, i.e. after its next compute: the
 * stages would run one after the other. Raise the limit above an
 * activation and give the segment room for several in flight, unless the
 * user set them (read by MPI_Init). */
void dtrain_mpi_pipeline_env(const dt_train_config *cfg)
{
    char eager[32];
    const long long act = (long long)cfg->micro_batch_size * cfg->seq_length * cfg->model.hidden_size * 4;
    snprintf(eager, sizeof eager, "%lld", act + 4096);
    setenv("OMPI_MCA_btl_vader_eager_limit", eager, 0);
    setenv("OMPI_MCA_btl_vader_segment_size", "33554432", 0);
}

/* Exit status of a multi-rank job ended by dtrain_abort_job (mpirun passes
 * it on): a rank failed, or timed out waiting for a dead or hung one. */
#define DTRAIN_EXIT_ABORT 3

/* After a failure once the ranks work together, other ranks may be waiting
 * for this one (or this one timed out waiting for a dead or hung rank):
 * with more than one rank, end the whole job now (MPI_Abort through
 * dt_comm_abort) rather than wait in MPI_Finalize. The message is printed
 * first. Returns only for a single process. */
void dtrain_abort_job(dt_comm *comm)
{
    if (!comm || comm->size < 2) return;
    fflush(stdout);
    fflush(stderr);
    /* MPI_Abort ends this process without returning to free the trainer:
     * the hidden temporaries of its outputs (a trace that failed on a full
     * disk) go now; the other ranks, ended by SIGTERM, remove theirs in
     * dtrain_on_signal */
    dt_file_out_remove_temporaries();
    dt_comm_abort(comm, DTRAIN_EXIT_ABORT);
}

void dtrain_comm_end(dt_comm *comm)
{
    if (!comm) return;
    dt_comm_free(comm);
    if (dt_comm_finalize() != DT_OK) fprintf(stderr, PROG ": %s\n", dt_last_error());
}

/* Under mpirun every rank parses the same command line before MPI starts:
 * only rank 0 (by the launcher's environment) reports what is wrong with it,
 * so a bad flag is one line rather than one per rank. Returns the saved
 * stderr to give back to dtrain_restore_stderr, or -1 (nothing silenced). */
int dtrain_quiet_other_ranks(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    if (!r) r = getenv("PMIX_RANK");
    if (!r || atoi(r) == 0) return -1;
    fflush(stderr);
    int saved = dup(STDERR_FILENO), nul = open("/dev/null", O_WRONLY);
    if (saved >= 0 && nul >= 0 && dup2(nul, STDERR_FILENO) >= 0) {
        close(nul);
        return saved;
    }
    if (saved >= 0) close(saved);
    if (nul >= 0) close(nul);
    return -1;
}

/* A bad command line, seen before MPI starts: rank 0 prints it and exits,
 * and mpirun then ends the job. A silenced rank that exited first would end
 * it before rank 0's line got through (Open MPI kills the rest of the job at
 * the first non-zero exit, and their output with it): so a silenced rank
 * lingers until mpirun ends it, for a bounded time in case rank 0 somehow
 * saw no error. Returns status for rank 0 or a plain process. */
int dtrain_bad_command_line(int saved, int status)
{
    if (saved < 0) return status;
    struct timespec t = {10, 0}; /* at most; a signal ends it early */
    nanosleep(&t, NULL);
    return status;
}

void dtrain_restore_stderr(int saved)
{
    if (saved < 0) return;
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
}

/* ---- every rank launched with the same flags ----
 * Each rank parses its own command line: an MPMD launch (mpirun -np 1
 * dtrain --seed 1 : -np 1 dtrain --seed 2) or a --data file that differs
 * between hosts would train replicas the docs say are equal, or end in a
 * message of the wrong size deep in MPI. So at the start, before any other
 * collective, every rank's record goes to every rank (one all-gather): the
 * CRC-32C and length of the job's configuration as JSON (the object trace
 * headers, summaries and manifests carry, with what may differ per rank
 * left out, dtrain_agree_json) and of --data's bytes. On a difference, the
 * first rank that differs from rank 0 sends it its JSON and rank 0 prints
 * one line naming the first key that differs; every rank exits 2. */

/* 32-bit words of a rank's record; each travels as two floats of 16 bits,
 * which a float holds exactly (a float's 24-bit significand). */
enum {
    DTRAIN_AGREE_CFG_CRC,
    DTRAIN_AGREE_CFG_LEN,
    DTRAIN_AGREE_DATA_STATE, /* DTRAIN_DATA_* */
    DTRAIN_AGREE_DATA_CRC,
    DTRAIN_AGREE_DATA_LEN_LO,
    DTRAIN_AGREE_DATA_LEN_HI,
    DTRAIN_AGREE_WORDS
};
enum { DTRAIN_DATA_NONE, DTRAIN_DATA_READ, DTRAIN_DATA_UNREADABLE };
/* below trace_gather.c's 31100 and the checkpoint's 31000 */
enum { DTRAIN_AGREE_TAG = 30900 };
/* the longest configuration text rank 0 takes to name the key (a real one is about 2 KB) */
#define DTRAIN_AGREE_JSON_MAX (1u << 20)

/* JSON for a flag's presence where only that must agree. */
static json_t *dtrain_given(const char *s) { return json_string(s ? "(given)" : "(not given)"); }

/* The configuration every rank must share, as compact JSON (malloc'd;
 * NULL: out of memory, or a value JSON cannot hold, such as a path that is
 * not UTF-8). Left out, because they may differ per rank: "threads" (from
 * the cores of the rank's host), "log_interval" (only rank 0 prints), and
 * the paths of --data (its bytes are compared instead), --trace, --save,
 * --load, --load-hf and --tokenizer (each rank writes and reads its own files; a host may mount them
 * elsewhere), of which only the presence counts. Added: the checkpoint
 * flags the configuration leaves to the program. */
static char *dtrain_agree_json(const dtrain_opts *o, const dt_train_config *cfg)
{
    char *s = dt_train_config_json(cfg);
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    free(s);
    if (!j) return NULL;
    json_object_del(j, "threads");
    json_object_del(j, "log_interval");
    int bad = json_object_set_new(j, "data", dtrain_given(cfg->data.path)) != 0;
    bad |= json_object_set_new(j, "trace", dtrain_given(cfg->trace_path)) != 0;
    bad |= json_object_set_new(j, "save", dtrain_given(o->save)) != 0;
    bad |= json_object_set_new(j, "save_interval", json_integer(o->save_interval)) != 0;
    bad |= json_object_set_new(j, "save_keep", json_integer(o->save_keep)) != 0;
    bad |= json_object_set_new(j, "load", dtrain_given(o->load)) != 0;
    if (cfg->load_hf) bad |= json_object_set_new(j, "load_hf", dtrain_given(cfg->load_hf)) != 0;
    if (cfg->data.tokenizer) bad |= json_object_set_new(j, "tokenizer", dtrain_given(cfg->data.tokenizer)) != 0;
    bad |= json_object_set_new(j, "allow_data_change", json_boolean(o->allow_data_change)) != 0;
    bad |= json_object_set_new(j, "min_loss_scale_patience", json_integer(o->min_scale_patience)) != 0;
    s = bad ? NULL : json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(j);
    return s;
}

/* --data's CRC-32C and length; DTRAIN_DATA_UNREADABLE leaves the message
 * to the trainer, which reads it next. */
static int dtrain_data_crc(const char *path, uint32_t *crc, uint64_t *len)
{
    *crc = 0;
    *len = 0;
    if (!path) return DTRAIN_DATA_NONE;
    int fd;
    if (dt_file_open_input(path, "--data", &fd, NULL) != DT_OK) return DTRAIN_DATA_UNREADABLE;
    enum { CHUNK = 1 << 16 };
    char *buf = malloc(CHUNK);
    ssize_t got = buf ? 0 : -1;
    while (buf && (got = read(fd, buf, CHUNK)) != 0) {
        if (got < 0) break;
        *crc = dt_crc32c_update(*crc, buf, (size_t)got);
        *len += (uint64_t)got;
    }
    free(buf);
    close(fd);
    return got == 0 ? DTRAIN_DATA_READ : DTRAIN_DATA_UNREADABLE;
}

static uint32_t dtrain_word(const float *rec, int w) { return (uint32_t)rec[2 * w] << 16 | (uint32_t)rec[2 * w + 1]; }

/* A value as the message shows it: a string bare, null as "none". */
static void dtrain_value_text(const json_t *v, char *out, size_t cap)
{
    char *t = NULL;
    if (!v) snprintf(out, cap, "(absent)");
    else if (json_is_string(v)) snprintf(out, cap, "%s", json_string_value(v));
    else if (json_is_null(v)) snprintf(out, cap, "none");
    else snprintf(out, cap, "%s", (t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT)) ? t : "?");
    free(t);
}

/* 1 if --KEY (its underscores as dashes, in flag) is one of dtrain's flags. */
static int dtrain_flag_of(const char *key, dt_arg *args, int n_args, char *flag, size_t cap)
{
    snprintf(flag, cap, "--%s", key);
    for (char *p = flag; *p; p++)
        if (*p == '_') *p = '-';
    return dt_args_find(args, n_args, flag) != NULL;
}

/* Rank 0's line for rank r's configuration text, which differs from its own. */
static void dtrain_say_config(const char *mine, const char *theirs, int r, dt_arg *args, int n_args)
{
    /* keys that are not "--" + the key with dashes: the flags that set them */
    static const char *const from[][2] = {
        {"mlp_hidden_size", "--hidden-size"}, {"mlp_num_layers", "--num-layers"},
        {"batchnorm", "--no-batchnorm"},      {"precision", "--fp16/--bf16"},
        {"bucket_bytes", "--bucket-size-mb"}, {"slow_rank", "--slow-rank"},
        {"slow_ms", "--slow-rank"},           {"hang_rank", "--hang-rank"},
        {"hang_iter", "--hang-rank"},         {"data_seed", "--seed"},
        {"vocab_size", "--task/--data"},      {"sgd_nesterov", "--optimizer"},
    };
    static const char tail[] = "; every rank must be launched with the same flags";
    json_t *a = mine ? json_loads(mine, 0, NULL) : NULL, *b = theirs ? json_loads(theirs, 0, NULL) : NULL;
    const char *key = NULL;
    json_t *va = NULL, *vb = NULL;
    char flag[128];
    /* The key to name: the first, in rank 0's order, that is a flag's own
     * (--seed rather than data_seed, which follows from it), else the
     * first that differs. "model" is "custom" once a size flag is given:
     * then the size is named, not the model. */
    for (int pass = 0; a && b && !key && pass < 2; pass++) {
        const char *k;
        json_t *v;
        json_object_foreach(a, k, v)
        {
            json_t *w = json_object_get(b, k);
            if (key || json_equal(v, w)) continue;
            if (pass == 0 && dtrain_flag_of(k, args, n_args, flag, sizeof flag)) {
                const int custom =
                    !strcmp(k, "model") && (!json_is_string(w) || !strcmp(json_string_value(v), "custom") ||
                                            !strcmp(json_string_value(w), "custom"));
                if (!custom) key = k;
            }
            if (pass == 1) key = k;
        }
        json_object_foreach(b, k, v) if (pass == 1 && !key && !json_object_get(a, k)) key = k;
    }
    if (key) va = json_object_get(a, key), vb = json_object_get(b, key);
    if (!key) {
        fprintf(stderr, PROG ": rank %d's flags differ from rank 0's%s\n", r, tail);
    } else {
        char see[160] = "", ta[256], tb[256];
        if (!dtrain_flag_of(key, args, n_args, flag, sizeof flag)) {
            snprintf(flag, sizeof flag, "%s", key);
            for (size_t i = 0; i < sizeof from / sizeof from[0]; i++)
                if (!strcmp(from[i][0], key)) snprintf(see, sizeof see, " (%s)", from[i][1]);
        }
        dtrain_value_text(vb, tb, sizeof tb);
        dtrain_value_text(va, ta, sizeof ta);
        fprintf(stderr, PROG ": rank %d's %s %s differs from rank 0's %s %s%s%s\n", r, flag, tb, flag, ta, see, tail);
    }
    json_decref(a);
    json_decref(b);
}

/* Rank r (the first that differs from rank 0) sends rank 0 its text of n
 * bytes; rank 0 prints the line. Other ranks have nothing to do. */
static void dtrain_name_difference(dt_comm *comm, const char *json, size_t n, int r, dt_arg *args, int n_args)
{
    if (comm->rank == r) {
        dt_comm_request *q = NULL;
        if (json && n <= DTRAIN_AGREE_JSON_MAX && comm->ops->isend(comm, json, n, 0, DTRAIN_AGREE_TAG, &q) == DT_OK)
            (void)comm->ops->wait(comm, q);
        return;
    }
    if (comm->rank != 0) return;
    char *theirs = n && n <= DTRAIN_AGREE_JSON_MAX ? calloc(n + 1, 1) : NULL;
    dt_comm_request *q = NULL;
    int got = 0;
    if (theirs && comm->ops->irecv(comm, theirs, n, r, DTRAIN_AGREE_TAG, &q) == DT_OK)
        got = comm->ops->wait(comm, q) == DT_OK;
    dtrain_say_config(json, got ? theirs : NULL, r, args, n_args);
    free(theirs);
}

int dtrain_ranks_agree(const dtrain_opts *o, const dt_train_config *cfg, dt_comm *comm, dt_arg *args, int n_args)
{
    if (!comm || comm->size < 2) return 0;
    char *json = dtrain_agree_json(o, cfg);
    const size_t json_len = json ? strlen(json) : 0;
    uint32_t mine[DTRAIN_AGREE_WORDS] = {0};
    mine[DTRAIN_AGREE_CFG_CRC] = json ? dt_crc32c(json, json_len) : 0;
    mine[DTRAIN_AGREE_CFG_LEN] = json_len <= UINT32_MAX ? (uint32_t)json_len : UINT32_MAX;
    uint64_t data_len;
    mine[DTRAIN_AGREE_DATA_STATE] = (uint32_t)dtrain_data_crc(o->data, &mine[DTRAIN_AGREE_DATA_CRC], &data_len);
    mine[DTRAIN_AGREE_DATA_LEN_LO] = (uint32_t)data_len;
    mine[DTRAIN_AGREE_DATA_LEN_HI] = (uint32_t)(data_len >> 32);
    const size_t per = 2 * DTRAIN_AGREE_WORDS, count = per * (size_t)comm->size;
    float *all = calloc(count, sizeof *all);
    if (!all) {
        fprintf(stderr, PROG ": rank %d: out of memory comparing the ranks' flags\n", comm->rank);
        free(json);
        return 1;
    }
    float *own = all + per * (size_t)comm->rank; /* this rank's segment of the all-gather */
    for (int w = 0; w < DTRAIN_AGREE_WORDS; w++) {
        own[2 * w] = (float)(mine[w] >> 16);
        own[2 * w + 1] = (float)(mine[w] & 0xffffu);
    }
    if (dt_comm_all_gather(comm, all, count, NULL) != DT_OK) {
        fprintf(stderr, PROG ": rank %d: %s\n", comm->rank, dt_last_error());
        free(all);
        free(json);
        return 1;
    }
    /* the first rank whose configuration, else whose --data bytes, differ from rank 0's */
    const float *r0 = all;
    int cfg_r = -1, data_r = -1;
    for (int r = 1; r < comm->size; r++) {
        const float *rec = all + per * (size_t)r;
        if (cfg_r < 0 && (dtrain_word(rec, DTRAIN_AGREE_CFG_CRC) != dtrain_word(r0, DTRAIN_AGREE_CFG_CRC) ||
                          dtrain_word(rec, DTRAIN_AGREE_CFG_LEN) != dtrain_word(r0, DTRAIN_AGREE_CFG_LEN)))
            cfg_r = r;
        int same_data = 1;
        for (int w = DTRAIN_AGREE_DATA_CRC; w <= DTRAIN_AGREE_DATA_LEN_HI; w++)
            same_data &= dtrain_word(rec, w) == dtrain_word(r0, w);
        if (data_r < 0 && dtrain_word(rec, DTRAIN_AGREE_DATA_STATE) == DTRAIN_DATA_READ &&
            dtrain_word(r0, DTRAIN_AGREE_DATA_STATE) == DTRAIN_DATA_READ && !same_data)
            data_r = r;
    }
    int status = 0;
    if (cfg_r > 0) {
        dtrain_name_difference(comm, json, dtrain_word(all + per * (size_t)cfg_r, DTRAIN_AGREE_CFG_LEN), cfg_r, args,
                               n_args);
        status = 2;
    } else if (data_r > 0) {
        const float *rec = all + per * (size_t)data_r;
        if (comm->rank == 0)
            fprintf(stderr,
                    PROG ": --data %s: rank %d's file (%llu bytes, CRC-32C %08x) differs from rank 0's (%llu bytes, "
                         "CRC-32C %08x); every rank must train on the same bytes\n",
                    o->data, data_r,
                    (unsigned long long)dtrain_word(rec, DTRAIN_AGREE_DATA_LEN_HI) << 32 |
                        dtrain_word(rec, DTRAIN_AGREE_DATA_LEN_LO),
                    dtrain_word(rec, DTRAIN_AGREE_DATA_CRC),
                    (unsigned long long)dtrain_word(r0, DTRAIN_AGREE_DATA_LEN_HI) << 32 |
                        dtrain_word(r0, DTRAIN_AGREE_DATA_LEN_LO),
                    dtrain_word(r0, DTRAIN_AGREE_DATA_CRC));
        status = 2;
    }
    free(all);
    free(json);
    return status;
}
