/* server/main.c - shardps-server: flags in, serve one job, exit status out. */
#include <stdio.h>

#include "common/config.h"
#include "common/log.h"
#include "proto/link.h"
#include "server/server.h"

int main(int argc, char **argv)
{
    ps_server_config_t cfg = {
        .scheduler = PS_LINK_DEFAULT_SCHEDULER,
        .bind = "tcp://0.0.0.0:*",
        .rank = -1,
        .connect_timeout = PS_LINK_DEFAULT_CONNECT_TIMEOUT,
        .peer_timeout = PS_LINK_DEFAULT_PEER_TIMEOUT,
        .report_missing = 5.0,
    };
    const char *log_level = "info";
    ps_flag_t flags[] = {
        ps_link_scheduler_flag(&cfg.scheduler),
        {"bind", PS_FLAG_STR, &cfg.bind, "ENDPOINT", "where workers connect (port * = any free port)"},
        {"advertise", PS_FLAG_STR, &cfg.advertise, "ENDPOINT", "endpoint announced to workers (default: the bound one; a 0.0.0.0 host becomes the address the scheduler sees)"},
        ps_link_rank_flag(&cfg.rank, PS_ROLE_SERVER),
        ps_link_connect_timeout_flag(&cfg.connect_timeout),
        ps_link_peer_timeout_flag(&cfg.peer_timeout),
        {"report-missing", PS_FLAG_DOUBLE, &cfg.report_missing, "SECONDS", "log which workers a step has waited on for this long"},
        ps_log_level_flag(&log_level),
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
    if (ps_link_check_timeouts(cfg.connect_timeout, cfg.peer_timeout) != 0 ||
        !(cfg.report_missing > 0)) {
        fprintf(stderr, "%s: error: timeouts must be > 0\n", prog);
        return 2;
    }
    ps_log_set_role("S", cfg.rank);
    return ps_server_run(&cfg);
}
