/* server/flags.c - shardps-server's flag table and the checks after parsing. */
#include "server/flags.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/http.h"
#include "common/log.h"
#include "proto/addr.h"
#include "proto/curve.h"
#include "common/trace.h"
#include "proto/link.h"

void ps_server_flags_init(ps_server_flags_t *f)
{
    memset(f, 0, sizeof *f);
    f->cfg.scheduler = PS_LINK_DEFAULT_SCHEDULER;
    f->cfg.bind = "tcp://0.0.0.0:*";
    f->cfg.rank = -1;
    f->cfg.connect_timeout = PS_LINK_DEFAULT_CONNECT_TIMEOUT;
    f->cfg.peer_timeout = PS_LINK_DEFAULT_PEER_TIMEOUT;
    f->cfg.report_missing = 5.0;
    f->log_level = "info";
    f->log_format = "text";
    f->cfg.trace_kib = 16384;
}

size_t ps_server_flags_table(ps_server_flags_t *f, ps_flag_t *out)
{
    ps_server_config_t *c = &f->cfg;
    const ps_flag_t t[] = {
        ps_link_scheduler_flag(&c->scheduler),
        {"bind", PS_FLAG_STR, &c->bind, "ENDPOINT", "where workers connect (port * = any free port)"},
        {"advertise", PS_FLAG_STR, &c->advertise, "HOST", "the host workers reach this server at, on its bound port (or a whole tcp://HOST:PORT); default: the bound host, or for 0.0.0.0 the local end of the route to the scheduler"},
        ps_link_rank_flag(&c->rank, PS_ROLE_SERVER),
        ps_link_connect_timeout_flag(&c->connect_timeout),
        ps_link_peer_timeout_flag(&c->peer_timeout),
        ps_link_job_id_flag(&c->job_id),
        ps_link_secret_flag(&c->secret_file),
        ps_link_job_hash_flag(&c->job_hash),
        ps_link_scheduler_grace_flag(&c->scheduler_grace),
        {"report-missing", PS_FLAG_DOUBLE, &c->report_missing, "SECONDS", "log which workers a step has waited on for this long; in (0, 86400]"},
        ps_curve_secure_flag(&c->secure),
        ps_curve_keys_flag(&c->keys),
        ps_http_bind_flag(&c->metrics_bind),
        ps_trace_file_flag(&c->trace),
        ps_trace_steps_flag(&c->trace_steps),
        ps_trace_kib_flag(&c->trace_kib),
        {"checkpoint-dir", PS_FLAG_STR, &c->checkpoint_dir, "DIR", "this server's checkpoint directory, when its path differs from the scheduler's --checkpoint-dir: its parts are written here and, on a resume, checked and loaded from here (default: the scheduler's path, on this host)"},
        {"spare", PS_FLAG_BOOL, &c->spare, "0|1", "wait as a spare to take over a lost server's keys from its newest checkpoint"},
        ps_log_level_flag(&f->log_level),
        ps_log_format_flag(&f->log_format),
    };
    _Static_assert(sizeof t / sizeof t[0] == PS_SERVER_NFLAGS, "PS_SERVER_NFLAGS");
    memcpy(out, t, sizeof t);
    return PS_SERVER_NFLAGS;
}

int ps_server_flags_check(const ps_server_flags_t *f, char *err, size_t errlen)
{
    const ps_server_config_t *c = &f->cfg;
    if (c->spare && c->rank != -1) {
        snprintf(err, errlen, "--spare takes no --rank: a spare gets the rank of the server it replaces");
        return PS_EINVAL;
    }
    if (c->checkpoint_dir && (!c->checkpoint_dir[0] || strlen(c->checkpoint_dir) >= 400)) {
        snprintf(err, errlen, "--checkpoint-dir: must be a directory path of 1 to 399 bytes");
        return PS_EINVAL;
    }
    if (ps_link_check_flags(c->rank, c->connect_timeout, c->peer_timeout, err, errlen) ||
        ps_config_check_endpoint("scheduler", c->scheduler, 0, err, errlen) ||
        ps_config_check_endpoint("bind", c->bind, 1, err, errlen) ||
        ps_addr_check_advertise(c->advertise, 1, err, errlen) ||
        ps_link_check_grace(c->scheduler_grace, err, errlen) ||
        ps_config_check_range("report-missing", c->report_missing, 0, PS_CONFIG_MAX_SECONDS,
                              PS_RANGE_OPEN_MIN, err, errlen) ||
        ps_curve_check_flags(c->secure, c->keys, PS_ROLE_SERVER, err, errlen) ||
        ps_link_read_secret(c->secret_file, &(ps_secret_t){0}, err, errlen) ||
        ps_http_check_bind(c->metrics_bind, err, errlen) ||
        ps_trace_check_flags(c->trace_steps, c->trace_kib, err, errlen)) {
        return PS_EINVAL;
    }
    return 0;
}
