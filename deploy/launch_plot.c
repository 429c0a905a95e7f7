/* deploy/launch_plot.c - the launcher's progress series, CSV and PNG. */
#include "deploy/launch_plot.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "deploy/plot.h"
#include "deploy/status.h"

#define S_PROG "shardps-launch"
#define S_PERIOD 0.5       /* seconds between questions */
#define S_ANSWER_WAIT 0.2  /* the most one question holds up the launcher's loop */
#define S_MAX_EPOCHS 1000

typedef struct {
    double seconds;       /* since the first answer */
    long long step;       /* worker 0's steps done */
    double loss;          /* worker 0's mean loss since its previous report */
    double samples_per_s; /* summed over the workers */
} s_row_t;

struct ps_launch_plot {
    char dir[PATH_MAX];
    ps_status_client_t *client;
    double last, t0;
    s_row_t *rows;
    int n, cap;
};

int ps_launch_plot_new(const char *dir, ps_launch_plot_t **out)
{
    ps_launch_plot_t *p = calloc(1, sizeof *p);
    *out = p;
    if (!p) {
        return PS_ENOMEM;
    }
    snprintf(p->dir, sizeof p->dir, "%s", dir);
    return 0;
}

void ps_launch_plot_destroy(ps_launch_plot_t **pp)
{
    ps_launch_plot_t *p = *pp;
    if (p) {
        ps_status_client_destroy(&p->client);
        free(p->rows);
        free(p);
        *pp = NULL;
    }
}

void ps_launch_plot_poll(ps_launch_plot_t *p, const char *endpoint, const char *keys,
                         double now)
{
    char err[256];
    if (now - p->last < S_PERIOD ||
        (!p->client && ps_status_client_new(endpoint, keys, &p->client, err, sizeof err) != 0)) {
        return;
    }
    p->last = now;
    Shardps__StatusReply *st;
    if (ps_status_client_query(p->client, S_ANSWER_WAIT, &st, err, sizeof err) != 0) {
        return; /* busy or gone: the next turn asks again */
    }
    s_row_t r = {0};
    int have = 0;
    for (size_t i = 0; i < st->n_nodes; i++) {
        const Shardps__StatusNode *n = st->nodes[i];
        if (n->role != PS_ROLE_WORKER) {
            continue;
        }
        r.samples_per_s += n->samples_per_second;
        if (n->rank == 0 && n->report && n->report->step > 0) {
            r.step = n->report->step;
            r.loss = n->report->loss;
            have = 1;
        }
    }
    shardps__status_reply__free_unpacked(st, NULL);
    if (!have || (p->n > 0 && p->rows[p->n - 1].step == r.step)) {
        return; /* nothing new from worker 0 */
    }
    if (p->n == 0) {
        p->t0 = now;
    }
    r.seconds = now - p->t0;
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 256;
        s_row_t *rows = realloc(p->rows, (size_t)cap * sizeof *rows);
        if (!rows) {
            return;
        }
        p->rows = rows;
        p->cap = cap;
    }
    p->rows[p->n++] = r;
}

/* The summary's "test_accuracy_per_epoch": [a, b, ...] into acc; returns the count. */
static int s_accuracies(const char *summary, double *acc, int cap)
{
    FILE *f = summary ? fopen(summary, "r") : NULL;
    if (!f) {
        return 0;
    }
    char buf[65536];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    const char *at = strstr(buf, "\"test_accuracy_per_epoch\": [");
    int n = 0;
    if (at) {
        char *s = (char *)at + strlen("\"test_accuracy_per_epoch\": [");
        while (n < cap && *s && *s != ']') {
            char *end;
            double v = strtod(s, &end);
            if (end == s) {
                break;
            }
            acc[n++] = v;
            s = end + strspn(end, ", ");
        }
    }
    return n;
}

int ps_launch_plot_write(ps_launch_plot_t *p, const char *summary)
{
    static double acc[S_MAX_EPOCHS];
    if (p->n < 2) { /* one point draws no line: an empty picture says nothing */
        ps_log_info("no plots of the run: worker 0 reported its steps %d time%s (2 are needed)",
                    p->n, p->n == 1 ? "" : "s");
        return 0;
    }
    int nacc = s_accuracies(summary, acc, S_MAX_EPOCHS);
    ps_text_t csv = {0}, gp = {0};
    ps_text_printf(&csv, "seconds,step,loss,samples_per_second\n");
    for (int i = 0; i < p->n; i++) {
        ps_text_printf(&csv, "%.3f,%lld,%.6f,%.1f\n", p->rows[i].seconds, p->rows[i].step,
                       p->rows[i].loss, p->rows[i].samples_per_s);
    }
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/progress.csv", p->dir);
    int rc = csv.oom ? PS_ENOMEM
                     : ps_file_write_atomic(path, (const void *[]){csv.p}, (size_t[]){csv.len}, 1,
                                            NULL, 0);
    if (rc == 0 && nacc > 0) {
        ps_text_t a = {0};
        ps_text_printf(&a, "epoch,test_accuracy\n");
        for (int e = 0; e < nacc; e++) {
            ps_text_printf(&a, "%d,%.6f\n", e + 1, acc[e]);
        }
        snprintf(path, sizeof path, "%s/accuracy.csv", p->dir);
        rc = a.oom ? PS_ENOMEM
                   : ps_file_write_atomic(path, (const void *[]){a.p}, (size_t[]){a.len}, 1, NULL,
                                          0);
        free(a.p);
    }
    if (rc != 0) {
        ps_log_err("cannot write the run's plot data in %s: %s", p->dir, ps_strerror(rc));
        free(csv.p);
        return PS_EIO;
    }
    ps_plot_header(&gp, S_PROG, p->dir, "progress", 1200, 360);
    ps_text_printf(&gp, "set multiplot layout 1,3\nset key off\n"
                        "set title 'training loss (worker 0)'\nset xlabel 'step'\n"
                        "plot '-' using 1:2 with lines lw 2\n");
    for (int i = 0; i < p->n; i++) {
        ps_text_printf(&gp, "%lld %.6f\n", p->rows[i].step, p->rows[i].loss);
    }
    ps_text_printf(&gp, "%se\nset title 'test accuracy'\nset xlabel 'epoch'\n"
                        "set yrange [0:1]\nset xtics 1\n"
                        "plot '-' using 1:2 with linespoints lw 2 pt 7\n",
                   p->n ? "" : "0 0\n");
    for (int e = 0; e < nacc; e++) {
        ps_text_printf(&gp, "%d %.6f\n", e + 1, acc[e]);
    }
    ps_text_printf(&gp, "%se\nset title 'samples/s (all workers)'\nset xlabel 'seconds'\n"
                        "set yrange [0:*]\nset xtics autofreq\n"
                        "plot '-' using 1:2 with lines lw 2\n",
                   nacc ? "" : "0 0\n");
    int rated = 0;
    for (int i = 0; i < p->n; i++) {
        if (p->rows[i].samples_per_s > 0) { /* 0: no rate yet (the first report) */
            ps_text_printf(&gp, "%.3f %.1f\n", p->rows[i].seconds, p->rows[i].samples_per_s);
            rated++;
        }
    }
    ps_text_printf(&gp, "%se\nunset multiplot\n", rated ? "" : "0 0\n");
    rc = gp.oom ? PS_ENOMEM : ps_plot_run(S_PROG, p->dir, "progress", gp.p);
    if (rc == 0) {
        /* the PNG says it all; without gnuplot the script stays, to be run later */
        snprintf(path, sizeof path, "%s/progress.gp", p->dir);
        unlink(path);
        ps_log_info("plots of the run: %s/progress.png (data: progress.csv%s)", p->dir,
                    nacc ? ", accuracy.csv" : "");
    }
    free(csv.p);
    free(gp.p);
    return rc == 0 || rc == PS_ENOENT ? 0 : PS_EIO;
}
