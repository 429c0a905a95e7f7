/*
 * deploy/keygen.c - shardps-keygen: a new job's secret and CurveZMQ keys.
 * `shardps-keygen DIR` writes the keys for --secure (proto/curve.h says which
 * files and who reads them) and the job's secret DIR/job.secret;
 * `shardps-keygen --secret FILE` writes only a secret (common/secret.h), for
 * a cluster manager to hand every role as --secret-file. Copy them,
 * keeping them owner-only, to every machine of the job.
 */
#include <stdio.h>
#include <string.h>

#include "common/secret.h"
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
               "       shardps-keygen --secret FILE\n"
               "DIR: writes a new job's CurveZMQ keys into DIR (made 0700 when missing): the\n"
               "job's keypair job.key (the scheduler's), server.key and worker.key, and\n"
               "their public halves *.pub, and the job's secret job.secret, each 0600.\n"
               "Run a job with --secure --keys DIR --secret-file DIR/job.secret.\n"
               "--secret FILE: writes only a new job secret to FILE (0600; never replaces\n"
               "one): give every role --secret-file FILE (or SHARDPS_SECRET_FILE).\n"
               "  --version  " PS_VERSION_HELP "\n");
        return 0;
    }
    const int secret_only = argc == 3 && !strcmp(argv[1], "--secret");
    if (!secret_only && (argc != 2 || argv[1][0] == '-')) {
        fprintf(stderr, "shardps-keygen: error: expected the key directory, or --secret FILE "
                        "(see --help)\n");
        return 2;
    }
    char err[512], path[4200];
    if (secret_only) {
        snprintf(path, sizeof path, "%s", argv[2]);
    } else {
        snprintf(path, sizeof path, "%s/job.secret", argv[1]);
    }
    if ((!secret_only && ps_curve_keygen(argv[1], err, sizeof err) != 0) ||
        ps_secret_write(path, err, sizeof err) != 0) {
        fprintf(stderr, "shardps-keygen: error: %s\n", err);
        return 2;
    }
    return 0;
}
