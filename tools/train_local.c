/* train_local - plain minibatch SGD on one process, straight through the
 * workload API: for each step, grad -> apply; evaluate once per epoch.
 *
 *   train_local key=value ...    (keys of `sgdlab help config`, workload part)
 *   e.g. train_local model=softmax lr=0.1 batch=64 epochs=5
 *
 * Prints one line per epoch: epoch, step, mean training loss of the epoch,
 * test loss and accuracy, training seconds so far and samples/s (training
 * only; evaluation time excluded).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "opts.h"
#include "settings.h"
#include "workload.h"

int main(int argc, char **argv) {
  int rc = SG_OK;
  sg_opts_t *o = sg_opts_new();
  sg_workload_t *w = NULL;
  sg_optim_t *opt = NULL;
  float *params = NULL, *grad = NULL;
  if (!o) return 1;
  for (int i = 1; i < argc; i++) {
    char *eq = strchr(argv[i], '=');
    if (!eq || !strcmp(argv[i], "--help")) {
      fprintf(stderr, "usage: %s key=value ...  (e.g. model=softmax lr=0.1 epochs=5)\n", argv[0]);
      sg_opts_destroy(&o);
      return 2;
    }
    *eq = '\0';
    const sg_setting_t *s = sg_setting_find(sg_settings, argv[i]);
    char why[256];
    if (!s) {
      fprintf(stderr, "%s: unknown setting\n", argv[i]);
      sg_opts_destroy(&o);
      return 2;
    }
    if (sg_setting_check(s, eq + 1, why, sizeof why) < 0) {
      fprintf(stderr, "%s: %s\n", argv[i], why);
      sg_opts_destroy(&o);
      return 2;
    }
    SG_TRY(sg_opts_set(o, argv[i], eq + 1));
  }
  SG_TRY(sg_settings_defaults(sg_settings, o));

  double t_load = sg_now();
  SG_TRY(sg_workload_new(&w, o, 0, 1, SG_WL_ALL));
  SG_TRY(sg_workload_optim_new(w, o, &opt));
  t_load = sg_now() - t_load;
  const size_t np = sg_workload_nparams(w);
  const int64_t spe = sg_workload_steps_per_epoch(w), total = sg_workload_total_steps(w);
  const int b = sg_workload_batch(w);
  params = malloc(np * sizeof *params);
  grad = malloc(np * sizeof *grad);
  if (!params || !grad) {
    rc = SG_ENOMEM;
    goto fail;
  }
  SG_TRY(sg_workload_init_params(w, params));
  printf("# %s\n# %s\n# load %.2f s, %lld steps/epoch, %lld steps\n", sg_workload_describe(w),
         sg_blas_info(), t_load, (long long)spe, (long long)total);
  printf("# %5s %8s %10s %10s %8s %8s %10s\n", "epoch", "step", "train_loss", "test_loss",
         "test_acc", "train_s", "samples/s");
  double train_s = 0, loss_sum = 0;
  int64_t nloss = 0;
  sg_eval_t ev = {0};
  for (int64_t step = 0; step < total; step++) {
    double t0 = sg_now(), loss;
    SG_TRY(sg_workload_grad(w, params, grad, step, &loss));
    sg_optim_apply(opt, params, grad, step);
    train_s += sg_now() - t0;
    loss_sum += loss;
    nloss++;
    if ((step + 1) % spe == 0 || step + 1 == total) {
      SG_TRY(sg_workload_evaluate(w, params, &ev));
      printf("  %5.2f %8lld %10.4f %10.4f %8.4f %8.2f %10.0f\n", (double)(step + 1) / spe,
             (long long)(step + 1), loss_sum / nloss, ev.test_loss, ev.test_acc, train_s,
             (double)(step + 1) * b / train_s);
      fflush(stdout);
      loss_sum = 0;
      nloss = 0;
    }
  }
fail:
  if (rc < 0) fprintf(stderr, "train_local: %s: %s\n", sg_strerror(rc), sg_err_msg());
  free(params);
  free(grad);
  sg_optim_destroy(&opt);
  sg_workload_destroy(&w);
  sg_opts_destroy(&o);
  return rc < 0 ? 1 : 0;
}
