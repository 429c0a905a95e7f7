/*
 * deploy/keygen.c - shardps-keygen DIR: a new job's CurveZMQ keys for
 * --secure (proto/curve.h says which files and who reads them). Copy DIR,
 * keeping it owner-only, to every machine of the job.
 */
#include <stdio.h>
#include <string.h>

#include "common/version.h"
#include "proto/codec.h"
#include "proto/curve.h"

int main(int argc, char **argv)
{
    if (ps_version_flag("shardps-keygen", ps_codec_build_id, argc, argv)) {
        return 0;
    }
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: shardps-keygen DIR\n"
               "Writes a new job's CurveZMQ keys into DIR (made 0700 when missing): the\n"
               "job's keypair job.key (the scheduler's), server.key and worker.key, and\n"
               "their public halves *.pub, each 0600. Run a job with --secure --keys DIR.\n"
               "  --version  " PS_VERSION_HELP "\n");
        return 0;
    }
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "shardps-keygen: error: expected one argument, the key directory "
                        "(see --help)\n");
        return 2;
    }
    char err[512];
    if (ps_curve_keygen(argv[1], err, sizeof err) != 0) {
        fprintf(stderr, "shardps-keygen: error: %s\n", err);
        return 2;
    }
    return 0;
}
