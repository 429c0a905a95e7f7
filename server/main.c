/* server/main.c - shardps-server: flags in, serve one job, exit status out. */
#include <stdio.h>

#include "common/alloc.h"
#include "common/config.h"
#include "common/log.h"
#include "common/version.h"
#include "proto/codec.h"
#include "server/flags.h"
#include "server/server.h"

int main(int argc, char **argv)
{
    /* Large frames reuse freed memory instead of costing page faults per
     * message, whatever MALLOC_* says (common/alloc.h). */
    ps_alloc_keep_large_blocks();
    const char *prog = PS_SERVER_PROG;
    if (ps_version_flag(prog, ps_codec_build_id, argc, argv)) {
        return 0;
    }
    ps_server_flags_t f;
    ps_flag_t flags[PS_SERVER_NFLAGS];
    ps_server_flags_init(&f);
    size_t n = ps_server_flags_table(&f, flags);
    int rc = ps_config_parse(prog, PS_SERVER_ABOUT, flags, n, argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    if (ps_log_set_level_flag(prog, f.log_level) != 0 ||
        ps_log_set_format_flag(prog, f.log_format) != 0) {
        return 2;
    }
    char err[512];
    if (ps_server_flags_check(&f, err, sizeof err) != 0) {
        ps_config_blame_env(flags, n, argc, argv, err, sizeof err);
        fprintf(stderr, "%s: error: %s\n", prog, err);
        return 2;
    }
    ps_log_set_role("S", f.cfg.rank);
    return ps_server_run(&f.cfg);
}
