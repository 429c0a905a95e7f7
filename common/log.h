/*
 * common/log.h - the one logger.
 *
 * Every line goes to stderr, as text (the default):
 * "<ISO 8601 time with its UTC offset> <role><rank> <level> message", e.g.
 * "2026-03-02T12:00:01.250+01:00 W0 I epoch=1 step=10 loss=0.51", or with
 * --log-format json as one object per line:
 * {"time":"2026-03-02T12:00:01.250+01:00","node":"W0","role":"worker",
 *  "rank":0,"level":"info","message":"epoch=1 step=10 loss=0.51"}
 * ("rank" null for a role without one). The level is checked before the
 * arguments are evaluated. Training metrics are key=value lines.
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
/* Levels of another program's lines relayed by ps_log_line(): its stdout
 * (text ">", JSON "stdout") and its stderr ("!", "stderr"). */
enum { PS_LOG_STDOUT = 4, PS_LOG_STDERR = 5 };
/* Line formats. */
enum { PS_LOG_TEXT = 0, PS_LOG_JSON = 1 };

/* Room for the stamp's text with its NUL ("2026-03-02T12:00:01.250+01:00"). */
#define PS_LOG_STAMP_MAX 32

/* The current level; lines above it are skipped. */
extern int ps_log_level;

/* Sets the prefix: role letter ("C", "S", "W", "L" or any short tag) and
 * rank (-1 for none). Call once from main() before threads start. */
void ps_log_set_role(const char *role, int rank);

/* Parses "err|warn|info|debug" into ps_log_level. Returns 0 or PS_EINVAL. */
int ps_log_set_level(const char *name);

/* The same for a program's --log-level flag: on a bad name prints the one-line
 * error "PROG: error: --log-level NAME: ..." to stderr ("SHARDPS_LOG_LEVEL=NAME:
 * ..." where the value is the variable's) and returns PS_EINVAL. */
int ps_log_set_level_flag(const char *prog, const char *name);

/* The --log-format FORMAT entry of a program's flag table ("text" or
 * "json"), checked afterwards by ps_log_set_format_flag(), which prints the
 * one-line error "PROG: error: --log-format NAME: ..." (or
 * "SHARDPS_LOG_FORMAT=NAME: ...") on a bad name and returns PS_EINVAL. dst
 * holds the default on entry; borrowed. */
ps_flag_t ps_log_format_flag(const char **dst);
int ps_log_set_format_flag(const char *prog, const char *name);

/* The current format, PS_LOG_TEXT or PS_LOG_JSON. */
int ps_log_format(void);

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

/* One line of the current format, without its newline, into buf: stamp
 * (NULL: the time now), node (a role and rank tag: "W0", "C"), level
 * (PS_LOG_ERR ... PS_LOG_STDERR) and msg. Returns its length (cut to fit
 * cap). For ps_log_write() and for a program that relays another's lines.
 * Thread-safe. */
size_t ps_log_line(char *buf, size_t cap, const char *stamp, const char *node, int level,
                   const char *msg);

/* The parts of a text logger line p (n bytes): its stamp into stamp
 * (PS_LOG_STAMP_MAX bytes), its node tag (letters and digits) into node
 * (cap bytes), its level and where its message starts. Returns 0, or -1
 * when p is not such a line (a JSON line is not). */
int ps_log_split(const char *p, size_t n, char *stamp, char *node, size_t cap, int *level,
                 size_t *msg_at);

/* The stamp that opens every line: the local time now, ISO 8601 with
 * milliseconds and the UTC offset ("2026-03-02T12:00:01.250+01:00", 29
 * characters) in buf (PS_LOG_STAMP_MAX bytes hold it). Thread-safe. */
void ps_log_stamp(char *buf, size_t cap);

/* Does p (n bytes, not NUL-terminated) open like a logger line, a text one
 * with its stamp and a space or a JSON one with its "time"? For a program
 * that relays other programs' output. */
int ps_log_is_line(const char *p, size_t n);

/* The time of a logger line p (n bytes, either format) in seconds since the
 * Unix epoch, or -1 when it does not open like one. */
double ps_log_line_time(const char *p, size_t n);

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
