/*
 * common/config.h - command-line flags and SHARDPS_* environment variables.
 *
 * Each program describes its flags in one table. Every flag "--some-name" is
 * also read from the environment variable SHARDPS_SOME_NAME, or from the one
 * its entry names where two programs give the same flag name different
 * meanings (shardps-launch's --timeout is SHARDPS_JOB_TIMEOUT,
 * shardps-status's SHARDPS_STATUS_TIMEOUT): each variable means one thing to
 * every program, so one environment (a ConfigMap) can feed every role. The
 * command line wins over the environment, which wins over the default already
 * stored in the destination. This module does not know what any flag means.
 */
#ifndef PS_COMMON_CONFIG_H
#define PS_COMMON_CONFIG_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PS_FLAG_INT,    /* dst: int *            */
    PS_FLAG_DOUBLE, /* dst: double *         */
    PS_FLAG_STR,    /* dst: const char ** (borrowed from argv/environ) */
    PS_FLAG_BOOL,   /* dst: int *; "--x" sets 1; "--x=0", "--x 0|false|no" set 0 */
} ps_flag_type_t;

typedef struct {
    const char *name;    /* long name without "--", e.g. "servers" */
    ps_flag_type_t type; /* how to parse the value */
    void *dst;           /* where the value goes; holds the default on entry */
    const char *metavar; /* value placeholder in --help, e.g. "N" */
    const char *help;    /* one line */
    const char *env;     /* its environment variable; NULL = SHARDPS_<NAME> */
} ps_flag_t;

/*
 * Checks a number flag's value after parsing: v in [min, max] (an end left
 * out per open), and no non-zero value too small for a float32 (below
 * FLT_MIN, it would silently become 0 or lose precision). Returns 0 or
 * PS_EINVAL with "--NAME V: out of range (min, max]" in err. Every double
 * flag is checked so; the range is documented in its help.
 */
int ps_config_check_range(const char *name, double v, double min, double max, int open,
                          char *err, size_t errlen);

/*
 * Checks an endpoint flag's syntax after parsing (before anything binds or
 * connects, so a typo is bad usage): tcp://HOST:PORT with PORT in 1..65535,
 * or "*" when any_port (bind flags); ipc:// and inproc:// with a name. NULL
 * (not given) passes. Returns 0 or PS_EINVAL with "--NAME V: not an endpoint
 * (expected tcp://HOST:PORT)" in err.
 */
int ps_config_check_endpoint(const char *name, const char *v, int any_port, char *err,
                             size_t errlen);

/* ps_config_check_range()'s open: which ends are excluded. */
enum { PS_RANGE_CLOSED = 0, PS_RANGE_OPEN_MIN = 1, PS_RANGE_OPEN_MAX = 2 };

/* Seconds every timeout-like flag accepts: (0, PS_CONFIG_MAX_SECONDS]. */
#define PS_CONFIG_MAX_SECONDS 86400.0

/*
 * Parses the environment, then argv[1..argc), into the table's destinations.
 * Accepts "--name value" and "--name=value". A bare "--" ends the flags; the
 * index of the first argument not consumed is stored in *rest (may be NULL, in
 * which case stray arguments are an error).
 * Returns 0 on success, 1 when --help was printed to stdout (caller exits 0),
 * PS_EINVAL after printing one line "PROG: error: ..." to stderr (nothing with
 * prog NULL: a caller checking another program's flags, which reports them).
 * Not thread-safe (reads environ); call from main().
 */
int ps_config_parse(const char *prog, const char *about, const ps_flag_t *flags,
                    size_t nflags, int argc, char **argv, int *rest);

/*
 * ps_config_parse() without the environment, for tools whose flags are their
 * own (shardps-bench: its --servers is a list): the SHARDPS_* variables
 * belong to the job's programs. Same returns.
 */
int ps_config_parse_argv(const char *prog, const char *about, const ps_flag_t *flags,
                         size_t nflags, int argc, char **argv, int *rest);

/*
 * After a failed check of the parsed flags: when err starts "--NAME VALUE"
 * and NAME's value came from its environment variable (argv does not give
 * --NAME), rewrites that start to "VARIABLE=VALUE", so that the error names
 * what the user set and not a flag they never typed. err holds cap bytes.
 */
void ps_config_blame_env(const ps_flag_t *flags, size_t nflags, int argc, char **argv,
                         char *err, size_t cap);

/* A flag's default as --help prints it ("[default: X]"), from the value its
 * destination holds; "" for none (an unset string, a bool of -1). */
void ps_config_default(const ps_flag_t *f, char *out, size_t cap);

/* Prints the --help text of a table to stdout. */
void ps_config_usage(const char *prog, const char *about, const ps_flag_t *flags,
                     size_t nflags);

#ifdef __cplusplus
}
#endif
#endif
