/* summary.c: the --summary JSON of a run (dt_trainer_write_summary):
 * results, throughput, memory, the loss scaler's counts, the weights'
 * fingerprint (param_probe), the strategy's own object (parameter_server,
 * pipeline) and the configuration.
 *
 * Invariants: the file is written whole or not at all (dt_file_write_whole:
 * a temporary file renamed into place); key order is fixed; a value that
 * is not finite is null. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt_file.h"
#include "trainer_internal.h"

/* A fingerprint of the weights for comparing runs (serial against data
 * parallel, ...): sum of w_i * u(i) with u(i) in [-1, 1) a hash of the
 * element index (dt__probe_u), in double. Any change of the weights changes
 * it to first order; a split model adds its parts (dt__pipe_probe). */
static double dt__param_probe(dt_trainer *tr)
{
    if (tr->strategy->probe) return tr->strategy->probe(tr); /* a split model's: added over its parts */
    if (tr->zero_probed) return tr->zero_probe; /* ZeRO's sharded FP32 masters, after the last step */
    if (!tr->kind->params(tr)) return NAN;      /* no whole buffer (ZeRO-2/3 before their last step) */
    size_t n = tr->kind->layout(tr)->numel;
    float *w = malloc(n * sizeof *w);
    if (!w || tr->be->copy(tr->be, w, tr->kind->params(tr), n * sizeof *w, DT_COPY_D2H) != DT_OK) {
        free(w);
        return NAN;
    }
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)w[i] * dt__probe_u(i);
    free(w);
    return s;
}

/* This rank's bytes of weights, gradients and optimizer state (FP32
 * masters included), kept between steps, and of the working buffers of
 * ZeRO-2/3, as docs/zero.md defines them: measured from the buffers at
 * ZeRO-2/3 (lib/parallel/zero_gpt.c); for one process, data parallelism
 * and ZeRO-1 on the GPT, the buffers lib/model/gpt.c allocates (FP32: the
 * weights and gradients, numel floats each; --fp16/--bf16: the 16-bit
 * compute copy and its FP32 widening for the GEMMs, or at ZeRO-1 the
 * buffer of 16-bit values in FP32, and the FP32 gradients plus one
 * micro-batch's); for a pipeline (tensor) rank, its stage's buffers
 * (lib/parallel/pipeline.h's dt__pipe_state_bytes). null for the other
 * strategies and models. */
static json_t *dt__model_state_bytes(const dt_trainer *tr)
{
    dt__zgpt_bytes b = {0};
    if (tr->zgpt) {
        dt__zgpt_bytes_of(tr->zgpt, &b);
    } else if (tr->kind == &dt__model_gpt && tr->strategy->gpt_state_bytes) {
        const size_t N = tr->kind->layout(tr)->numel, f = sizeof(float);
        const int mixed = tr->cfg.precision != DT_F32;
        b.weights = !mixed ? N * f : tr->zero ? N * f : N * (dt_dtype_size(tr->cfg.precision) + f);
        b.gradients = N * f * (mixed ? 2 : 1);
        b.optimizer = tr->zero ? dt__zero_master_bytes(tr->zero) + dt__zero_state_bytes(tr->zero)
                               : (mixed ? N * f : 0) + (tr->opt_ready ? dt_optim_state_bytes(&tr->opt) : 0);
    } else if (tr->strategy->state_bytes && tr->pipe.rt) { /* a stage's: with its flat buffer's elements */
        size_t numel = 0;
        tr->strategy->state_bytes(tr, &b.weights, &b.gradients, &b.optimizer, &b.working, &numel);
        return json_pack("{s:I, s:I, s:I, s:I, s:I}", "weights", (json_int_t)b.weights, "gradients",
                         (json_int_t)b.gradients, "optimizer", (json_int_t)b.optimizer, "working",
                         (json_int_t)b.working, "numel", (json_int_t)numel);
    } else {
        return json_null();
    }
    return json_pack("{s:I, s:I, s:I, s:I}", "weights", (json_int_t)b.weights, "gradients", (json_int_t)b.gradients,
                     "optimizer", (json_int_t)b.optimizer, "working", (json_int_t)b.working);
}


dt_status dt_trainer_write_summary(dt_trainer *tr, const char *path, const dt_train_stats *last,
                                   const dt_eval_result *eval)
{
    if (!path || !path[0]) return DT_FAIL(DT_ERR_INVALID, "--summary: expected a file name");
    json_t *o = json_object();
    json_t *cfg = dt__run_config_object(tr);
    int bad = !o || !cfg;
    if (!bad) {
        const int has_acc = eval && eval->accuracy >= 0;
        dt__jset(o, "train_loss", last ? dt__jreal_or_null(last->loss) : json_null(), &bad);
        dt__jset(o, "val_loss", eval ? dt__jreal_or_null(eval->loss) : json_null(), &bad);
        dt__jset(o, "accuracy", has_acc ? json_real(eval->accuracy) : json_null(), &bad);
        dt__jset(o, "val_examples", json_integer(eval ? eval->n_examples : 0), &bad);
        dt__jset(o, "tokens_per_second", dt__jreal_or_null(dt_trainer_tokens_per_second(tr)), &bad);
        dt__jset(o, "peak_activation_bytes", json_integer((json_int_t)dt__tr_peak_act(tr)), &bad);
        dt__jset(o, "iterations", json_integer(tr->iter), &bad);
        dt__jset(o, "param_probe", dt__jreal_or_null(dt__param_probe(tr)), &bad);
        const int ls = tr->cfg.use_loss_scaling;
        dt__jset(o, "loss_scale", ls ? json_real(dt_loss_scaler_scale(&tr->scaler)) : json_null(), &bad);
        dt__jset(o, "skipped_steps", json_integer(ls ? tr->scaler.skipped : 0), &bad);
        dt__jset(o, "nonfinite_skipped_steps", json_integer(tr->nf.skipped), &bad);
        dt__jset(o, "loss_scale_backoffs", json_integer(ls ? tr->scaler.backoffs : 0), &bad);
        dt__jset(o, "loss_scale_at_min_overflows", json_integer(ls ? tr->scaler.min_overflows : 0), &bad);
        dt__jset(o, "num_params", json_integer((json_int_t)tr->num_params), &bad);
        /* this rank's FP32 master weights and optimizer state: the model's, its stage's or tensor shard's
         * (pipeline, tensor parallelism), or its ZeRO-1 shard's (--use-distributed-optimizer) */
        dt__strategy_state ss;
        tr->strategy->state(tr, &ss);
        const dt__zero *z = ss.zero;
        const size_t whole = ss.layout->numel;
        dt__jset(o, "master_weight_bytes",
                 json_integer(
                     (json_int_t)(z && dt__zero_master_bytes(z) ? dt__zero_master_bytes(z) : whole * sizeof(float))),
                 &bad);
        dt__jset(o, "optimizer_state_bytes",
                 json_integer((json_int_t)(z ? dt__zero_state_bytes(z) : ss.optim ? dt_optim_state_bytes(ss.optim) : 0)),
                 &bad);
        dt__jset(o, "model_state_bytes", dt__model_state_bytes(tr), &bad);
        /* each strategy's own object under its key, null under the others' */
        static const char *const keys[] = {"zero", "parameter_server", "pipeline"};
        for (int k = 0; k < 3; k++) {
            const char *own = tr->strategy->summary_key;
            dt__jset(o, keys[k], own && !strcmp(own, keys[k]) ? tr->strategy->summary(tr) : json_null(), &bad);
        }
        dt__jset(o, "fp8", tr->fp8 ? dt__fp8_train_summary(tr) : json_null(), &bad);
        dt__jset(o, "elapsed_seconds", json_real(dt_trainer_elapsed_seconds(tr)), &bad);
        dt__jset(o, "config", cfg, &bad);
        cfg = NULL; /* owned by o now, even on failure */
    }
    json_decref(cfg);
    if (bad) {
        json_decref(o);
        return DT_FAIL(DT_ERR_NOMEM, "--summary %s: out of memory building the summary", path);
    }
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | DT__JSON_PRECISION);
    json_decref(o);
    if (!text) return DT_FAIL(DT_ERR_NOMEM, "--summary %s: out of memory writing the summary", path);
    dt_status st = dt_file_write_whole(path, "--summary", text, strlen(text));
    free(text);
    return st;
}
