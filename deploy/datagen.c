/*
 * deploy/datagen.c - shardps-datagen: synthetic training data files.
 *
 * `shardps-datagen ctr --out FILE` writes click logs in the Criteo layout
 * (deploy/ctrgen.h: Zipf categories over Criteo Kaggle's cardinalities,
 * labels from a planted model), plain or gzip, for the ctr model and its
 * benchmarks where the real logs cannot be had. Its one line on stdout says
 * what it wrote and how well the planted model itself ranks the labels: the
 * best AUC a model of the file can reach. Bad usage exits 2 with one line.
 */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/version.h"
#include "deploy/ctrgen.h"
#include "proto/codec.h"

#define S_PROG "shardps-datagen"
#define S_CTR_PROG S_PROG " ctr"

static const char s_ctr_about[] =
    "Writes FILE: --rows samples in the Criteo layout (train.txt of the display\n"
    "advertising challenge: label, 13 integer and 26 categorical fields, tab-separated),\n"
    "gzip-compressed when FILE ends in .gz or with --gzip. Categorical field k draws\n"
    "Zipf ranks over Criteo Kaggle's count of categories of field k times --scale (never\n"
    "below the smaller of that count and 100), each written as 8 hex digits; labels come\n"
    "from a planted logistic model over every field (about 25% clicks). The same\n"
    "--seed and --scale give the same bytes. Prints one line:\n"
    "rows=N clicks=C ctr=R planted_auc=A planted_logloss=L file=FILE,\n"
    "planted_*: the planted model's own probabilities against the labels drawn.";

/* shardps-datagen ctr [flags]: exits 0, or 2 on bad usage, 1 on failure. */
static int s_ctr(int argc, char **argv)
{
    int rows = 2000000, seed = 1, gzip = 0;
    double scale = PS_CTRGEN_DEFAULT_SCALE;
    const char *out = NULL;
    const ps_flag_t flags[] = {
        {"rows", PS_FLAG_INT, &rows, "N", "samples to write, >= 1"},
        {"seed", PS_FLAG_INT, &seed, "S", "the seed everything follows from, >= 0"},
        {"out", PS_FLAG_STR, &out, "FILE", "the file to write (required; replaced whole)"},
        {"scale", PS_FLAG_DOUBLE, &scale, "F",
         "Criteo Kaggle's cardinalities times F, in (0, 1]; 1: their 33.8 million"},
        {"gzip", PS_FLAG_BOOL, &gzip, NULL, "gzip FILE (also when it ends in .gz)"},
    };
    const size_t nflags = sizeof flags / sizeof flags[0];
    int rc = ps_config_parse_argv(S_CTR_PROG, s_ctr_about, flags, nflags, argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    char err[512];
    if (ps_config_check_range("rows", rows, 1, 2147483647.0, PS_RANGE_CLOSED, err,
                              sizeof err) ||
        ps_config_check_range("seed", seed, 0, 2147483647.0, PS_RANGE_CLOSED, err,
                              sizeof err) ||
        ps_config_check_range("scale", scale, 0, 1, PS_RANGE_OPEN_MIN, err, sizeof err)) {
        fprintf(stderr, S_CTR_PROG ": error: %s\n", err);
        return 2;
    }
    if (!out || !*out) {
        fprintf(stderr, S_CTR_PROG ": error: --out FILE is required (see --help)\n");
        return 2;
    }
    const size_t len = strlen(out);
    gzip = gzip || (len > 3 && !strcmp(out + len - 3, ".gz"));
    ps_ctrgen_t *g = NULL;
    if (ps_ctrgen_new((uint64_t)seed, scale, &g) != 0) {
        fprintf(stderr, S_CTR_PROG ": error: out of memory\n");
        return 1;
    }
    ps_ctrgen_report_t rep;
    rc = ps_ctrgen_write(g, out, (uint64_t)rows, gzip, &rep, err, sizeof err);
    ps_ctrgen_destroy(&g);
    if (rc != 0) {
        fprintf(stderr, S_CTR_PROG ": error: %s\n", err);
        return 1;
    }
    printf("rows=%llu clicks=%llu ctr=%.4f planted_auc=%.4f planted_logloss=%.4f file=%s\n",
           (unsigned long long)rep.rows, (unsigned long long)rep.clicks,
           (double)rep.clicks / (double)rep.rows, rep.auc, rep.logloss, out);
    return 0;
}

int main(int argc, char **argv)
{
    if (ps_version_flag(S_PROG, ps_codec_build_id, argc, argv)) {
        return 0;
    }
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        static char help_flag[] = "--help";
        char *help[] = {argv[0], help_flag, NULL};
        return s_ctr(2, help);
    }
    if (argc >= 2 && !strcmp(argv[1], "ctr")) {
        return s_ctr(argc - 1, argv + 1);
    }
    if (argc < 2) {
        fprintf(stderr, S_PROG ": error: expected a subcommand: ctr (see --help)\n");
    } else {
        fprintf(stderr,
                S_PROG ": error: unknown subcommand '%s' (expected ctr; see --help)\n",
                argv[1]);
    }
    return 2;
}
