/*
 * deploy/status_main.c - shardps-status: a running job's cluster view, once
 * or every --interval seconds (--watch) until the job ends, from its
 * scheduler; as a table, or as one JSON object per view (--json).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/error.h"
#include "common/version.h"
#include "deploy/status.h"
#include "proto/codec.h"

#define S_PROG "shardps-status"
#define S_EXIT_FAILED 3 /* --watch: the job ended failed */

int main(int argc, char **argv)
{
    if (ps_version_flag(S_PROG, ps_codec_build_id, argc, argv)) {
        return 0;
    }
    const char *scheduler = NULL, *keys = NULL;
    int watch = 0, json = 0;
    double interval = 1.0, timeout = 5.0;
    const ps_flag_t flags[] = {
        {"scheduler", PS_FLAG_STR, &scheduler, "ENDPOINT", "the job's scheduler (required)"},
        {"watch", PS_FLAG_BOOL, &watch, "0|1", "print the view again every --interval seconds until the job ends"},
        {"interval", PS_FLAG_DOUBLE, &interval, "SECONDS", "with --watch: seconds between views; in [0.1, 3600]"},
        {"timeout", PS_FLAG_DOUBLE, &timeout, "SECONDS", "give up when the scheduler does not answer this long; in (0, 86400]", "SHARDPS_STATUS_TIMEOUT"},
        {"keys", PS_FLAG_STR, &keys, "DIR", "a --secure job's key directory (shardps-keygen; shardps-launch --secure logs the one it made): the query proves its worker key"},
        {"json", PS_FLAG_BOOL, &json, "0|1", "print each view as one line of JSON (docs/observe.md lists its fields)"},
    };
    static const char about[] =
        "Prints a running shardps job's cluster view: its nodes, their key ranges,\n"
        "steps and rates, and which workers a step waits for.\n"
        "With --watch it ends when the job does, with the job's final view.\n"
        "Exit status: 0 answered (with --watch: the job finished ok), 1 no answer,\n"
        "2 bad usage, 3 with --watch: the job failed.";
    int rc = ps_config_parse(S_PROG, about, flags, sizeof flags / sizeof flags[0], argc, argv,
                             NULL);
    if (rc != 0) {
        return rc == 1 ? 0 : 2;
    }
    char err[256];
    if (!scheduler) {
        fprintf(stderr, S_PROG ": error: --scheduler ENDPOINT is required\n");
        return 2;
    }
    if (ps_config_check_range("interval", interval, 0.1, 3600, PS_RANGE_CLOSED, err,
                              sizeof err) ||
        ps_config_check_range("timeout", timeout, 0, PS_CONFIG_MAX_SECONDS, PS_RANGE_OPEN_MIN,
                              err, sizeof err)) {
        ps_config_blame_env(flags, sizeof flags / sizeof flags[0], argc, argv, err, sizeof err);
        fprintf(stderr, S_PROG ": error: %s\n", err);
        return 2;
    }
    ps_status_client_t *c = NULL;
    if (ps_status_client_new(scheduler, keys, &c, err, sizeof err) != 0) {
        fprintf(stderr, S_PROG ": error: %s\n", err);
        return 2;
    }
    const int tty = isatty(STDOUT_FILENO) && !json;
    int status = 0;
    for (;;) {
        Shardps__StatusReply *st;
        if (ps_status_client_query(c, timeout, &st, err, sizeof err) != 0) {
            fprintf(stderr, S_PROG ": error: %s\n", err);
            status = 1;
            break;
        }
        if (watch && tty) {
            fputs("\033[H\033[2J", stdout); /* a screen that updates in place */
        }
        if (json) {
            (void)ps_status_print_json(stdout, st);
        } else {
            ps_status_print(stdout, st);
        }
        const int finished = !strcmp(st->phase, "finished"), failed = !strcmp(st->phase, "failed");
        shardps__status_reply__free_unpacked(st, NULL);
        if (!watch || finished || failed) {
            status = watch && failed ? S_EXIT_FAILED : 0;
            break;
        }
        if (!json) {
            putchar('\n');
        }
        fflush(stdout);
        struct timespec ts = {(time_t)interval, (long)((interval - (double)(time_t)interval) * 1e9)};
        nanosleep(&ts, NULL);
    }
    fflush(stdout);
    ps_status_client_destroy(&c);
    return status;
}
