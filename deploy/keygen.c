/*
 * deploy/keygen.c - shardps-keygen: a new job's secret and CurveZMQ keys.
 * `shardps-keygen DIR` writes the keys for --secure (proto/curve.h says which
 * files and who reads them) and the job's secret DIR/job.secret;
 * `shardps-keygen --secret FILE` writes only a secret (common/secret.h), for
 * a cluster manager to hand every role as --secret-file. Copy them,
 * keeping them owner-only, to every machine of the job.
 *
 * shardps-keygen --k8s NAME [FILE]: the same files as a Kubernetes Secret
 * manifest (stdout, or FILE made 0600), for the pods to mount as their
 * --keys directory (deploy/kubernetes/). The keys exist only in that output.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/secret.h"
#include "common/version.h"
#include "proto/codec.h"
#include "proto/curve.h"

static const char s_usage[] =
    "usage: shardps-keygen DIR\n"
    "       shardps-keygen --secret FILE\n"
    "       shardps-keygen --k8s NAME [FILE]\n"
    "DIR: writes a new job's CurveZMQ keys into DIR (made 0700 when missing): the\n"
    "job's keypair job.key (the scheduler's), server.key and worker.key, and\n"
    "their public halves *.pub, and the job's secret job.secret, each 0600.\n"
    "Run a job with --secure --keys DIR --secret-file DIR/job.secret.\n"
    "--secret FILE: writes only a new job secret to FILE (0600; never replaces\n"
    "one): give every role --secret-file FILE (or SHARDPS_SECRET_FILE).\n"
    "--k8s NAME: writes the same files as a Kubernetes Secret named NAME (YAML)\n"
    "to stdout or to FILE (created 0600, never overwritten); mount it as the\n"
    "--keys directory (docs/cluster.md, Kubernetes).\n"
    "  --version  " PS_VERSION_HELP "\n";

/* A Secret's name: a DNS subdomain (lower-case letters, digits, '-', '.';
 * a letter or digit at each end; at most 253 characters). */
static int s_dns_name(const char *name)
{
    size_t n = strlen(name);
    if (n < 1 || n > 253 || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-.") != n) {
        return 0;
    }
    return strchr("-.", name[0]) == NULL && strchr("-.", name[n - 1]) == NULL;
}

/* The Secret, its files as stringData block scalars (each line indented). */
static void s_print_secret(FILE *out, const char *name, const ps_curve_files_t *f,
                           const ps_secret_t *secret)
{
    fprintf(out,
            "# shardps job keys for --secure (shardps-keygen --k8s): kubectl apply -f this\n"
            "# file, then mount the Secret as a volume (defaultMode 0400) and point --keys\n"
            "# (SHARDPS_KEYS) at it, --secret-file at its job.secret. It holds secret keys: keep it out of version control.\n"
            "apiVersion: v1\n"
            "kind: Secret\n"
            "metadata:\n"
            "  name: %s\n"
            "  labels:\n"
            "    app: shardps\n"
            "type: Opaque\n"
            "stringData:\n",
            name);
    fprintf(out, "  job.secret: |\n    ");
    for (int i = 0; i < PS_SECRET_LEN; i++) {
        fprintf(out, "%02x", secret->key[i]);
    }
    fputc('\n', out);
    for (int i = 0; i < PS_CURVE_NFILES; i++) {
        fprintf(out, "  %s: |\n", f->name[i]);
        for (const char *line = f->text[i]; *line;) {
            size_t len = strcspn(line, "\n");
            fprintf(out, "    %.*s\n", (int)len, line);
            line += len + (line[len] == '\n');
        }
    }
}

static int s_k8s(const char *name, const char *file)
{
    if (!s_dns_name(name)) {
        fprintf(stderr, "shardps-keygen: error: --k8s %s: a Secret's name is lower-case "
                        "letters, digits, '-' and '.', starting and ending with a letter or "
                        "digit\n", name);
        return 2;
    }
    FILE *out = stdout;
    if (file) {
        int fd = open(file, O_WRONLY | O_CREAT | O_EXCL, 0600);
        out = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!out) {
            fprintf(stderr, "shardps-keygen: error: cannot create %s: %s\n", file,
                    strerror(errno));
            return 2;
        }
    }
    ps_curve_files_t f;
    char err[512];
    ps_secret_t secret;
    int rc = ps_curve_files_make(&f, err, sizeof err);
    if (rc == 0 && (rc = ps_secret_new(&secret)) != 0) {
        snprintf(err, sizeof err, "no randomness for the job's secret");
        ps_curve_files_wipe(&f);
    }
    if (rc == 0) {
        s_print_secret(out, name, &f, &secret);
        ps_curve_files_wipe(&f);
        memset(&secret, 0, sizeof secret);
    }
    int ok = fflush(out) == 0 && !ferror(out);
    ok = (file ? fclose(out) == 0 : 1) && ok;
    if (rc != 0 || !ok) {
        if (file) {
            unlink(file);
        }
        fprintf(stderr, "shardps-keygen: error: %s\n",
                rc ? err : "cannot write the Secret manifest");
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (ps_version_flag("shardps-keygen", ps_codec_build_id, argc, argv)) {
        return 0;
    }
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(s_usage, stdout);
        return 0;
    }
    if (argc >= 3 && argc <= 4 && !strcmp(argv[1], "--k8s")) {
        return s_k8s(argv[2], argc == 4 ? argv[3] : NULL);
    }
    const int secret_only = argc == 3 && !strcmp(argv[1], "--secret");
    if (!secret_only && (argc != 2 || argv[1][0] == '-')) {
        fprintf(stderr, "shardps-keygen: error: expected the key directory, --secret FILE "
                        "or --k8s NAME [FILE] (see --help)\n");
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
