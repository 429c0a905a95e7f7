/*
 * deploy/trace_main.c - shardps-trace: `merge OUT IN...` puts the trace files
 * of a job's processes into one, on the scheduler's clock (common/trace.h).
 */
#include <stdio.h>
#include <string.h>

#include "common/trace.h"
#include "common/version.h"
#include "proto/codec.h"

#define S_PROG "shardps-trace"

static int s_usage(FILE *f)
{
    fprintf(f, "usage: " S_PROG " merge OUT IN...\n"
               "Merges the Chrome trace files that shardps roles wrote with --trace into\n"
               "OUT, every event moved onto the scheduler's clock (each file records its\n"
               "process's offset, measured when it registered). Open OUT in Perfetto or\n"
               "chrome://tracing.\n"
               "  --version  " PS_VERSION_HELP "\n");
    return f == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
    if (ps_version_flag(S_PROG, ps_codec_build_id, argc, argv)) {
        return 0;
    }
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        return s_usage(stdout);
    }
    if (argc < 4 || strcmp(argv[1], "merge") != 0) {
        return s_usage(stderr);
    }
    char err[512];
    if (ps_trace_merge((const char *const *)argv + 3, argc - 3, argv[2], err, sizeof err) != 0) {
        fprintf(stderr, S_PROG ": error: %s\n", err);
        return 1;
    }
    return 0;
}
