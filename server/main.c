/* server/main.c - shardps-server: flags in, serve one job, exit status out. */
#include <stdio.h>

#include "common/config.h"
#include "common/log.h"
#include "server/server.h"

int main(int argc, char **argv)
{
    ps_server_config_t cfg = {
        .scheduler = "tcp://127.0.0.1:9000",
        .bind = "tcp://0.0.0.0:*",
        .rank = -1,
        .connect_timeout = 10.0,
        .peer_timeout = 5.0,
        .report_missing = 5.0,
    };
    const char *log_level = "info";
    ps_flag_t flags[] = {
        {"scheduler", PS_FLAG_STR, &cfg.scheduler, "ENDPOINT", "the scheduler's endpoint"},
        {"bind", PS_FLAG_STR, &cfg.bind, "ENDPOINT", "where workers connect (port * = any free port)"},
        {"advertise", PS_FLAG_STR, &cfg.advertise, "ENDPOINT", "endpoint announced to workers (default: the bound one; a 0.0.0.0 host becomes the address the scheduler sees)"},
        {"rank", PS_FLAG_INT, &cfg.rank, "R", "wanted server rank (-1 = any)"},
        {"connect-timeout", PS_FLAG_DOUBLE, &cfg.connect_timeout, "SECONDS", "give up if the scheduler does not answer"},
        {"peer-timeout", PS_FLAG_DOUBLE, &cfg.peer_timeout, "SECONDS", "the scheduler silent this long is lost"},
        {"report-missing", PS_FLAG_DOUBLE, &cfg.report_missing, "SECONDS", "log which workers a step has waited on for this long"},
        {"log-level", PS_FLAG_STR, &log_level, "LEVEL", "err, warn, info or debug"},
    };
    const char *prog = "shardps-server";
    int rc = ps_config_parse(prog,
                             "A shardps parameter server: holds a key range of the model and "
                             "applies updates.",
                             flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    if (ps_log_set_level_flag(prog, log_level) != 0) {
        return 2;
    }
    if (!(cfg.connect_timeout > 0) || !(cfg.peer_timeout > 0) || !(cfg.report_missing > 0)) {
        fprintf(stderr, "%s: error: timeouts must be > 0\n", prog);
        return 2;
    }
    ps_log_set_role("S", cfg.rank);
    return ps_server_run(&cfg);
}
