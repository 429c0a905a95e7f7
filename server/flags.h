/*
 * server/flags.h - shardps-server's flags: the one table.
 *
 * The table shardps-server parses (and prints --help from), and the one
 * shardps-launch reads to know which flags it forwards to every server.
 * docs/usage.md's table is checked against --help by tests/integration/
 * test_flags_doc.sh. This module parses nothing itself (common/config.h does).
 */
#ifndef PS_SERVER_FLAGS_H
#define PS_SERVER_FLAGS_H

#include <stddef.h>

#include "common/config.h"
#include "server/server.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PS_SERVER_PROG "shardps-server"
#define PS_SERVER_ABOUT \
    "A shardps parameter server: holds a key range of the model and applies updates."
/* Entries in the table. */
#define PS_SERVER_NFLAGS 21

/* What the flags set. Strings are borrowed from argv or environ. */
typedef struct {
    ps_server_config_t cfg; /* the server's configuration */
    const char *log_level;  /* --log-level, for ps_log_set_level_flag() */
    const char *log_format; /* --log-format, for ps_log_set_format_flag() */
} ps_server_flags_t;

/* Fills *f with the defaults (what --help shows). */
void ps_server_flags_init(ps_server_flags_t *f);

/* Writes the table into out[0..PS_SERVER_NFLAGS) and returns its length.
 * Each entry's destination is a field of *f (borrowed: f must outlive the
 * table). Thread-safe for distinct f. */
size_t ps_server_flags_table(ps_server_flags_t *f, ps_flag_t *out);

/* After parsing: checks the values. Returns 0, or PS_EINVAL with a one-line
 * reason in err (the caller prints "PROG: error: REASON"). */
int ps_server_flags_check(const ps_server_flags_t *f, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
