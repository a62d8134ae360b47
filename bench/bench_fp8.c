/* bench_fp8.c: `dtbench fp8`: FP8 training's speed and loss against bf16
 * on the same model, in one run (issue 39). Four trainers of the same
 * model, data and seed train the same steps: --bf16, then --fp8-format
 * hybrid with each recipe (delayed, tensorwise, blockwise). Each prints
 * its tokens/s over steps 2..S, the ratio to bf16's measured in this run,
 * its final training loss and the share of values saturated and flushed.
 *
 * On the CPU the FP8 GEMMs are the bf16 GEMMs (every FP8 value is a
 * bf16: lib/backend/cpu/cpu_fp8.c), so FP8 adds the conversions and gains
 * nothing: the ratio measures what the numerics cost here. On a GPU with
 * FP8 tensor cores (sm_89+) the ratio is the point (tests/gpu/device-check.sh). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtbench.h"

/* the summary's "fp8" figure key, or -1 */
static double fp8_figure(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    int in = 0;
    double v = -1;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "\"fp8\": {")) in = 1;
        char pat[64];
        snprintf(pat, sizeof pat, "\"%s\": ", key);
        const char *p = in ? strstr(line, pat) : NULL;
        if (p) {
            v = atof(p + strlen(pat));
            break;
        }
    }
    fclose(f);
    return v;
}

int dtbench_cmd_fp8(const char *device, int threads, const char *model, int B, int T, int steps)
{
    static const char *const names[4] = {"bf16", "delayed", "tensorwise", "blockwise"};
    char path[] = "/tmp/dtbench-fp8-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) dtbench_die("fp8: temporary summary");
    close(fd);
    printf("# dtbench fp8: --model %s, micro-batch %d, T %d, %d steps (tokens/s over steps 2..%d), %d thread(s), "
           "device %s\n",
           model, B, T, steps, steps, threads, device);
    printf("# fp8: --fp8-format hybrid (E4M3 forward, E5M2 gradients), FP8 GEMMs in the blocks' linear layers; "
           "vs_bf16: tokens/s over the bf16 run's, same run\n");
    printf("# %-10s %12s %8s %12s %12s %12s\n", "run", "tokens/s", "vs_bf16", "train_loss", "saturated", "flushed");
    double base = 0;
    for (int k = 0; k < 4; k++) {
        dt_train_config cfg;
        dt_train_config_default(&cfg);
        if (dt_gpt_config_preset(model, &cfg.model) != DT_OK) dtbench_die("fp8: --model");
        snprintf(cfg.model_name, sizeof cfg.model_name, "%s", model);
        cfg.seq_length = T > 0 ? T : cfg.model.seq_len;
        cfg.micro_batch_size = B;
        cfg.global_batch_size = B;
        cfg.train_iters = steps;
        cfg.lr.warmup_iters = 1;
        cfg.lr.decay_iters = steps;
        cfg.eval_iters = 1;
        cfg.threads = threads;
        cfg.device = device;
        cfg.precision = DT_BF16;
        if (k > 0) {
            cfg.fp8 = DT_FP8_MODE_HYBRID;
            cfg.fp8_recipe = k == 1 ? DT_FP8_DELAYED : k == 2 ? DT_FP8_TENSORWISE : DT_FP8_BLOCKWISE;
        }
        dt_trainer *tr;
        if (dt_trainer_create(&cfg, &tr) != DT_OK) dtbench_die("fp8: trainer");
        double secs = 0, loss = 0;
        for (int s = 0; s < steps; s++) {
            dt_train_stats st;
            if (dt_trainer_step(tr, &st) != DT_OK) dtbench_die("fp8: step");
            if (s >= 1) secs += st.step_seconds;
            loss = st.loss;
        }
        const double tps = (double)B * cfg.seq_length * (steps - 1) / secs;
        if (k == 0) base = tps;
        if (dt_trainer_write_summary(tr, path, NULL, NULL) != DT_OK) dtbench_die("fp8: summary");
        dt_trainer_free(tr);
        const double vals = k ? fp8_figure(path, "values") : 0;
        if (k == 0) printf("  %-10s %12.0f %7.2fx %12.4f %12s %12s\n", names[k], tps, 1.0, loss, "-", "-");
        else
            printf("  %-10s %12.0f %7.2fx %12.4f %12.3g %12.3g\n", names[k], tps, tps / base, loss,
                   vals > 0 ? fp8_figure(path, "saturated") / vals : 0, vals > 0 ? fp8_figure(path, "flushed") / vals : 0);
        fflush(stdout);
    }
    const char *engine = dt_backend_cpu_bf16_engine();
    printf("gemm_engine %s\n", strcmp(device, "cpu") ? device : engine ? engine : "none (FP32 GEMMs)");
    unlink(path);
    return 0;
}
