/* run_load.c: a run's load from load.csv (run_load.h). */
#include "analysis/run_load.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/rundir.h"
#include "core/results/results.h"
#include "core/util/common.h"

void vb_run_load_read(const char *run_dir, const char *trial_type, const char *who, vb_run_load *out) {
    *out = (vb_run_load){false, 0, NAN, NAN, NAN, NAN, NAN};
    vb_csv t;
    char err[VB_PATH_MAX + 256];
    int rc = vb_dir_read_csv(run_dir, VB_LOAD_CSV, &t, err, sizeof err);
    if (rc == -1) return; /* not recorded */
    if (rc != 0) vb_die_input("%s: %s", who, err);
    const int ct = vb_csv_col(&t, VB_COL_TRIAL_TYPE), ci = vb_csv_col(&t, VB_COL_TRIAL_INDEX), cw = vb_csv_col(&t, VB_COL_WARMUP);
    const int cr = vb_csv_col(&t, VB_COL_RANK), cs = vb_csv_col(&t, VB_COL_SECONDS), cc = vb_csv_col(&t, VB_COL_ONLINE_CPUS);
    const int cl = vb_csv_col(&t, VB_COL_LOADAVG_BEFORE), cst = vb_csv_col(&t, VB_COL_STEAL_SHARE);
    const int cq = vb_csv_col(&t, VB_COL_CPU_WAIT_SHARE), cn = vb_csv_col(&t, VB_COL_NIVCSW);
    if (ct < 0 || ci < 0 || cw < 0 || cq < 0)
        vb_die_input("%s: %s/%s: no trial_type, trial_index, warmup or cpu_wait_share column", who, run_dir,
                     VB_LOAD_CSV);
    /* per timed trial: the largest rank's share; rank 0's rate of switches */
    double sum = 0, big = NAN, la = 0, cpus = NAN, ivc = 0, secs = 0;
    int n = 0, nla = 0;
    for (int i = 0; i < t.nrows; i++) {
        if (trial_type && strcmp(vb_csv_get(&t, i, ct), trial_type) != 0) continue;
        double w;
        if (!vb_csv_num(&t, i, cw, &w) || w != 0) continue;
        /* first row of this trial: gather its ranks */
        bool first = true;
        for (int j = 0; j < i && first; j++)
            first = !(strcmp(vb_csv_get(&t, j, ct), vb_csv_get(&t, i, ct)) == 0 &&
                      strcmp(vb_csv_get(&t, j, ci), vb_csv_get(&t, i, ci)) == 0 &&
                      strcmp(vb_csv_get(&t, j, cw), vb_csv_get(&t, i, cw)) == 0);
        if (!first) continue;
        double worst = NAN;
        for (int j = i; j < t.nrows; j++) {
            if (strcmp(vb_csv_get(&t, j, ct), vb_csv_get(&t, i, ct)) != 0 ||
                strcmp(vb_csv_get(&t, j, ci), vb_csv_get(&t, i, ci)) != 0 ||
                strcmp(vb_csv_get(&t, j, cw), vb_csv_get(&t, i, cw)) != 0)
                continue;
            double q, st = 0, rk = 0;
            if (!vb_csv_num(&t, j, cq, &q)) continue;
            if (cst >= 0 && !vb_csv_num(&t, j, cst, &st)) st = 0;
            if (q + st > worst || isnan(worst)) worst = q + st;
            if (cr >= 0 && (!vb_csv_num(&t, j, cr, &rk) || rk != 0)) continue;
            double v;
            if (cl >= 0 && vb_csv_num(&t, j, cl, &v)) la += v, nla++;
            if (cc >= 0 && vb_csv_num(&t, j, cc, &v)) cpus = v;
            double s;
            if (cn >= 0 && cs >= 0 && vb_csv_num(&t, j, cn, &v) && vb_csv_num(&t, j, cs, &s)) ivc += v, secs += s;
        }
        if (isnan(worst)) continue;
        sum += worst;
        if (isnan(big) || worst > big) big = worst;
        n++;
    }
    vb_csv_free(&t);
    if (n == 0) return;
    out->recorded = true;
    out->trials = n;
    out->share = sum / n;
    out->max_share = big;
    out->loadavg = nla ? la / nla : NAN;
    out->cpus = cpus;
    out->nivcsw_per_s = secs > 0 ? ivc / secs : NAN;
}

double vb_run_load_mean(const vb_run_load *loads, int n) {
    double s = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (loads[i].recorded && isfinite(loads[i].share)) s += loads[i].share, k++;
    return k ? s / k : NAN;
}

const char *vb_run_load_describe(const vb_run_load *l, char *buf, int n) {
    if (!l->recorded) {
        snprintf(buf, (size_t)n, "load not recorded");
        return buf;
    }
    char avg[64] = "";
    if (isfinite(l->loadavg)) {
        if (isfinite(l->cpus))
            snprintf(avg, sizeof avg, "load average %.2g on %.0f CPUs, ", l->loadavg, l->cpus);
        else
            snprintf(avg, sizeof avg, "load average %.2g, ", l->loadavg);
    }
    snprintf(buf, (size_t)n, "%s%.3g%% of thread time lost to other work", avg, 100 * l->share);
    return buf;
}
