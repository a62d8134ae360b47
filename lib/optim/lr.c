/* lr.c: the learning-rate schedule (see dt_optim.h).
 *
 * For iteration it (0-based), W = warmup_iters, D = decay_iters:
 *   it < W:        max_lr * (it + 1) / W        (reaches max_lr at it = W-1)
 *   constant:      max_lr for every it >= W      (min_lr and D unused)
 *   it >= D:       min_lr
 *   W <= it < D:   r = (it - W) / (D - W) in [0, 1);
 *                  linear: max_lr - r * (max_lr - min_lr)
 *                  cosine: min_lr + (1 + cos(pi r)) / 2 * (max_lr - min_lr)
 * so both decays start at max_lr right after warm-up and reach min_lr at D.
 * Computed in double; the schedule is a pure function of (s, it). */
#include <math.h>
#include <string.h>

#include "dt_optim.h"

dt_status dt_lr_decay_parse(const char *s, dt_lr_decay *out)
{
    static const struct {
        const char *name;
        dt_lr_decay style;
    } styles[] = {{"constant", DT_LR_CONSTANT}, {"linear", DT_LR_LINEAR}, {"cosine", DT_LR_COSINE}};
    for (size_t i = 0; s && i < sizeof styles / sizeof styles[0]; i++)
        if (strcmp(s, styles[i].name) == 0) {
            *out = styles[i].style;
            return DT_OK;
        }
    return DT_FAIL(DT_ERR_INVALID, "--lr-decay-style '%s': unknown schedule (expected constant, linear or cosine)",
                   s ? s : "(null)");
}

float dt_lr_at(const dt_lr_schedule *s, int64_t it)
{
    double max_lr = s->max_lr, min_lr = s->min_lr;
    int64_t w = s->warmup_iters > 0 ? s->warmup_iters : 0;
    if (it < 0) it = 0;
    if (it < w) return (float)(max_lr * (double)(it + 1) / (double)w);
    if (s->style == DT_LR_CONSTANT) return (float)max_lr;
    if (it >= s->decay_iters) return (float)min_lr;
    double r = (double)(it - w) / (double)(s->decay_iters - w); /* decay_iters > it >= w */
    if (s->style == DT_LR_LINEAR) return (float)(max_lr - r * (max_lr - min_lr));
    return (float)(min_lr + 0.5 * (1.0 + cos(M_PI * r)) * (max_lr - min_lr));
}
