/*
 * deploy/keygen.c - shardps-keygen DIR: a new job's CurveZMQ keys for
 * --secure (proto/curve.h says which files and who reads them). Copy DIR,
 * keeping it owner-only, to every machine of the job.
 *
 * shardps-keygen --k8s NAME [FILE]: the same keys as a Kubernetes Secret
 * manifest (stdout, or FILE made 0600), for the pods to mount as their
 * --keys directory (deploy/kubernetes/). The keys exist only in that output.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "proto/curve.h"

static const char s_usage[] =
    "usage: shardps-keygen DIR\n"
    "       shardps-keygen --k8s NAME [FILE]\n"
    "Writes a new job's CurveZMQ keys into DIR (made 0700 when missing): the\n"
    "job's keypair job.key (the scheduler's), server.key and worker.key, and\n"
    "their public halves *.pub, each 0600. Run a job with --secure --keys DIR.\n"
    "With --k8s, writes the same keys as a Kubernetes Secret named NAME (YAML)\n"
    "to stdout or to FILE (created 0600, never overwritten); mount it as the\n"
    "--keys directory (docs/cluster.md, Kubernetes).\n";

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
static void s_print_secret(FILE *out, const char *name, const ps_curve_files_t *f)
{
    fprintf(out,
            "# shardps job keys for --secure (shardps-keygen --k8s): kubectl apply -f this\n"
            "# file, then mount the Secret as a volume (defaultMode 0400) and point --keys\n"
            "# (SHARDPS_KEYS) at it. It holds secret keys: keep it out of version control.\n"
            "apiVersion: v1\n"
            "kind: Secret\n"
            "metadata:\n"
            "  name: %s\n"
            "  labels:\n"
            "    app: shardps\n"
            "type: Opaque\n"
            "stringData:\n",
            name);
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
    int rc = ps_curve_files_make(&f, err, sizeof err);
    if (rc == 0) {
        s_print_secret(out, name, &f);
        ps_curve_files_wipe(&f);
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
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(s_usage, stdout);
        return 0;
    }
    if (argc >= 3 && argc <= 4 && !strcmp(argv[1], "--k8s")) {
        return s_k8s(argv[2], argc == 4 ? argv[3] : NULL);
    }
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "shardps-keygen: error: expected one argument, the key directory, "
                        "or --k8s NAME [FILE] (see --help)\n");
        return 2;
    }
    char err[512];
    if (ps_curve_keygen(argv[1], err, sizeof err) != 0) {
        fprintf(stderr, "shardps-keygen: error: %s\n", err);
        return 2;
    }
    return 0;
}
