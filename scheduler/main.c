/* scheduler/main.c - shardps-scheduler: flags in, one job run, exit status out. */
#include <stdio.h>

#include "common/alloc.h"
#include "common/config.h"
#include "common/log.h"
#include "common/version.h"
#include "proto/codec.h"
#include "scheduler/flags.h"
#include "scheduler/scheduler.h"

int main(int argc, char **argv)
{
    /* Large frames reuse freed memory instead of costing page faults per
     * message, whatever MALLOC_* says (common/alloc.h). */
    ps_alloc_keep_large_blocks();
    const char *prog = PS_SCHEDULER_PROG;
    if (ps_version_flag(prog, ps_codec_build_id, argc, argv)) {
        return 0;
    }
    ps_scheduler_flags_t f;
    ps_flag_t flags[PS_SCHEDULER_NFLAGS];
    ps_scheduler_flags_init(&f);
    size_t n = ps_scheduler_flags_table(&f, flags);
    int rc = ps_config_parse(prog, PS_SCHEDULER_ABOUT, flags, n, argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    if (ps_log_set_level_flag(prog, f.log_level) != 0 ||
        ps_log_set_format_flag(prog, f.log_format) != 0) {
        return 2;
    }
    ps_log_set_role("C", -1);
    char err[512];
    if (ps_scheduler_flags_check(&f, err, sizeof err) != 0 ||
        ps_scheduler_flags_check_outputs(&f, err, sizeof err) != 0) {
        ps_config_blame_env(flags, n, argc, argv, err, sizeof err);
        fprintf(stderr, "%s: error: %s\n", prog, err);
        return 2;
    }
    if (ps_scheduler_check_resume(&f.cfg, err, sizeof err) != 0) {
        fprintf(stderr, "%s: error: %s\n", prog, err);
        return 2;
    }
    return ps_scheduler_run(&f.cfg);
}
