/* eval.c: evaluation on the validation split (dt_trainer_evaluate).
 *
 * Evaluation covers eval_iters global batches of the validation split,
 * whatever the micro-batch size and the number of ranks: n_val micro-batches
 * of B rows, split into one contiguous share per rank, with the sums
 * (loss over counted targets, targets, examples, correct) added over the
 * ranks. So a serial run and a data-parallel one evaluate the same rows.
 *
 * Invariants: evaluation never changes the parameters, the gradients or
 * the data position; its forwards stay out of the trace's layer spans;
 * BatchNorm normalises with its running statistics meanwhile. */
#define _POSIX_C_SOURCE 200809L
#include "dt_time.h"
#include "trainer_internal.h"

static dt_status dt__evaluate_share(dt_trainer *tr, dt__eval_sums *sum)
{
    if (tr->strategy->evaluate) return tr->strategy->evaluate(tr, sum); /* its own way (the stages) */
    const int n_val = tr->cfg.eval_iters * tr->n_micro * tr->dp_size;
    const int lo = (int)((int64_t)n_val * tr->dp_rank / tr->dp_size);
    const int hi = (int)((int64_t)n_val * (tr->dp_rank + 1) / tr->dp_size);
    for (int i = lo; i < hi; i++) DT_CHECK(tr->kind->eval_batch(tr, i, sum));
    if (tr->dp_size > 1) { /* in double, as one process adds them */
        double v[4] = {sum->loss, sum->counted, sum->examples, sum->correct};
        DT_CHECK(dt_comm_sum_doubles(tr->dp_comm, v, 4));
        sum->loss = v[0], sum->counted = v[1], sum->examples = v[2], sum->correct = v[3];
    }
    return DT_OK;
}

dt_status dt_trainer_evaluate(dt_trainer *tr, dt_eval_result *out)
{
    if (tr->ps.rt && dt__ps_is_server(tr->ps.rt))
        return DT_FAIL(DT_ERR_INVALID, "rank %d is a parameter server: the workers evaluate", tr->rank);
    if (tr->ps.rt) DT_CHECK(dt__tr_ps_ensure_pulled(tr));
    const int64_t t0 = dt_time_ns();
    const int has_acc = tr->kind->has_accuracy(tr);
    dt__eval_sums sum = {0, 0, 0, 0};
    if (tr->trace.writer) dt__tr_set_hook(tr, 0);
    if (tr->kind->set_training) tr->kind->set_training(tr, 0);
    dt__fp8_train_freeze(tr, 1); /* FP8: evaluation's conversions are not the step's */
    dt_status st = dt__evaluate_share(tr, &sum);
    dt__fp8_train_freeze(tr, 0);
    if (tr->kind->set_training) tr->kind->set_training(tr, 1);
    if (tr->trace.writer) dt__tr_set_hook(tr, 1);
    if (st != DT_OK) return st;
    out->loss = sum.counted > 0 ? (float)(sum.loss / sum.counted) : 0.0f;
    out->n_examples = (int)sum.examples;
    out->accuracy = (has_acc && sum.examples > 0) ? sum.correct / sum.examples : -1.0;
    if (tr->trace.writer) {
        const int64_t t1 = dt_time_ns();
        dt_trace_event e;
        dt_trace_event_init(&e, DT_TRACE_COMPLETE, "evaluate", "compute", tr->rank, DT_LANE_COMPUTE,
                            t0 - tr->t_start_ns, t1 - t0);
        e.iter = tr->iter;
        DT_CHECK(dt__trace_write(tr, &e));
        DT_CHECK(dt__trace_counter(tr, "val_loss", t1 - tr->t_start_ns, out->loss));
    }
    return DT_OK;
}
