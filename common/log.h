/*
 * common/log.h - the one logger.
 *
 * Every line goes to stderr as "HH:MM:SS.mmm <role><rank> <level> message",
 * e.g. "12:00:01.250 W0 I epoch=1 step=10 loss=0.51". The level is checked
 * before the arguments are evaluated. Training metrics are key=value lines.
 * Thread-safe: each line is written with one fprintf under the stdio lock.
 */
#ifndef PS_COMMON_LOG_H
#define PS_COMMON_LOG_H

#include <stddef.h>

#include "common/config.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { PS_LOG_ERR = 0, PS_LOG_WARN = 1, PS_LOG_INFO = 2, PS_LOG_DEBUG = 3 };

/* The current level; lines above it are skipped. */
extern int ps_log_level;

/* Sets the prefix: role letter ("C", "S", "W", "L" or any short tag) and
 * rank (-1 for none). Call once from main() before threads start. */
void ps_log_set_role(const char *role, int rank);

/* Parses "err|warn|info|debug" into ps_log_level. Returns 0 or PS_EINVAL. */
int ps_log_set_level(const char *name);

/* The same for a program's --log-level flag: on a bad name prints the one-line
 * error "PROG: error: --log-level NAME: ..." to stderr and returns PS_EINVAL. */
int ps_log_set_level_flag(const char *prog, const char *name);

/* The --log-level LEVEL entry of a role's flag table (the scheduler's, the
 * server's, the worker's), checked afterwards by ps_log_set_level_flag().
 * dst holds the default on entry; borrowed, it must outlive the table. */
ps_flag_t ps_log_level_flag(const char **dst);

/*
 * Lists in log lines and error texts are never cut silently. Appends item
 to buf at offset at when it fits with
 * room left for the marker; else counts it in *more. Returns the bytes
 * added. ps_log_list_end() then appends " (+N more)" when *more > 0.
 */
size_t ps_log_list_add(char *buf, size_t cap, size_t at, const char *item, int *more);
void ps_log_list_end(char *buf, size_t cap, size_t at, int more);

void ps_log_write(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The stamp that opens every line: the local time now as "HH:MM:SS.mmm"
 * (12 characters) in buf. Thread-safe. */
void ps_log_stamp(char *buf, size_t cap);

/* Does p (n bytes, not NUL-terminated) open like a logger line, with
 * "HH:MM:SS.mmm "? For a program that relays other programs' output. */
int ps_log_is_line(const char *p, size_t n);

#define PS_LOG_AT(lvl, ...) \
    do { \
        if ((lvl) <= ps_log_level) { \
            ps_log_write((lvl), __VA_ARGS__); \
        } \
    } while (0)
#define ps_log_err(...) PS_LOG_AT(PS_LOG_ERR, __VA_ARGS__)
#define ps_log_warn(...) PS_LOG_AT(PS_LOG_WARN, __VA_ARGS__)
#define ps_log_info(...) PS_LOG_AT(PS_LOG_INFO, __VA_ARGS__)
#define ps_log_debug(...) PS_LOG_AT(PS_LOG_DEBUG, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
