/* common/log.c - stderr logger with role/rank prefix and an ISO 8601 stamp,
 * as text or JSON lines. */
#include "common/log.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "common/error.h"
#include "common/json.h"

int ps_log_level = PS_LOG_INFO;
static char s_prefix[16] = "-";
static int s_format = PS_LOG_TEXT; /* set once from main(), before threads */

#define S_MSG_MAX 1024 /* a message's bytes; quoted as JSON, at most 6 times that */

void ps_log_set_role(const char *role, int rank)
{
    if (rank >= 0) {
        snprintf(s_prefix, sizeof s_prefix, "%s%d", role, rank);
    } else {
        snprintf(s_prefix, sizeof s_prefix, "%s", role);
    }
}

int ps_log_set_level(const char *name)
{
    static const char *names[] = {"err", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, names[i]) == 0) {
            ps_log_level = i;
            return 0;
        }
    }
    return PS_EINVAL;
}

/* The one-line error of a bad value of --flag, naming the variable var
 * where the value came from it (the command line would have won). */
static int s_bad_value(const char *prog, const char *flag, const char *var,
                       const char *value, const char *expected)
{
    const char *env = getenv(var);
    if (env && !strcmp(env, value)) {
        fprintf(stderr, "%s: error: %s=%s: expected %s\n", prog, var, value, expected);
    } else {
        fprintf(stderr, "%s: error: --%s %s: expected %s\n", prog, flag, value, expected);
    }
    return PS_EINVAL;
}

int ps_log_set_level_flag(const char *prog, const char *name)
{
    return ps_log_set_level(name) == 0 ? 0
                                       : s_bad_value(prog, "log-level", "SHARDPS_LOG_LEVEL",
                                                     name, "err, warn, info or debug");
}

ps_flag_t ps_log_level_flag(const char **dst)
{
    return (ps_flag_t){"log-level", PS_FLAG_STR, dst, "LEVEL", "err, warn, info or debug"};
}

ps_flag_t ps_log_format_flag(const char **dst)
{
    return (ps_flag_t){"log-format", PS_FLAG_STR, dst, "FORMAT",
                       "text, or json: one object per line (docs/observe.md)"};
}

int ps_log_set_format_flag(const char *prog, const char *name)
{
    if (!strcmp(name, "text") || !strcmp(name, "json")) {
        s_format = name[0] == 'j' ? PS_LOG_JSON : PS_LOG_TEXT;
        return 0;
    }
    return s_bad_value(prog, "log-format", "SHARDPS_LOG_FORMAT", name, "text or json");
}

int ps_log_format(void)
{
    return s_format;
}

/* The role a node tag's letters name in a JSON line ("W0": "worker"). */
static const char *s_role_word(const char *node, size_t letters)
{
    static const char *const words[][2] = {
        {"C", "scheduler"}, {"S", "server"}, {"W", "worker"}, {"L", "launcher"}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (letters == 1 && node[0] == words[i][0][0]) {
            return words[i][1];
        }
    }
    return NULL;
}

/* {"time":...,"node":...,"role":...,"rank":...,"level":...,"message":...},
 * the message quoted in place (cut with "..." to fit). */
static size_t s_json_line(char *buf, size_t cap, const char *stamp, const char *node,
                          int level, const char *msg)
{
    static const char *const names[] = {"err", "warn", "info", "debug", "stdout", "stderr"};
    size_t letters = strcspn(node, "0123456789");
    const char *word = s_role_word(node, letters);
    char rank[16] = "null";
    if (node[letters]) {
        snprintf(rank, sizeof rank, "%d", atoi(node + letters));
    }
    int n = snprintf(buf, cap,
                     "{\"time\":\"%s\",\"node\":\"%s\",\"role\":\"%s\",\"rank\":%s,"
                     "\"level\":\"%s\",\"message\":",
                     stamp, node, word ? word : node, rank, names[level % 6]);
    if (n < 0 || (size_t)n + 8 > cap) {
        return 0;
    }
    size_t len = (size_t)n + strlen(ps_json_quote(msg, buf + n, cap - (size_t)n - 1));
    buf[len++] = '}';
    buf[len] = '\0';
    return len;
}

static const char s_tag[] = "EWID>!"; /* each level's letter in a text line */

size_t ps_log_line(char *buf, size_t cap, const char *stamp, const char *node, int level,
                   const char *msg)
{
    char now[PS_LOG_STAMP_MAX];
    if (!stamp) {
        ps_log_stamp(now, sizeof now);
        stamp = now;
    }
    if (s_format == PS_LOG_JSON) {
        return s_json_line(buf, cap, stamp, node, level, msg);
    }
    int n = snprintf(buf, cap, "%s %s %c %s", stamp, node, s_tag[level % 6], msg);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

void ps_log_write(int level, const char *fmt, ...)
{
    char msg[S_MSG_MAX], line[6 * S_MSG_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ps_log_line(line, sizeof line, NULL, s_prefix, level & 3, msg);
    /* One fprintf per line: stdio locks the stream, so threads never interleave. */
    fprintf(stderr, "%s\n", line);
}

void ps_log_stamp(char *buf, size_t cap)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    long off = tm.tm_gmtoff / 60;
    char sign = off < 0 ? '-' : '+';
    off = off < 0 ? -off : off;
    snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03d%c%02ld:%02ld", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(tv.tv_usec / 1000), sign, off / 60, off % 60);
}

/* The stamp's shape: '0' a digit, '+' a sign, anything else itself. */
static const char s_shape[] = "0000-00-00T00:00:00.000+00:00";
#define S_STAMP_LEN (sizeof s_shape - 1)
static const char s_json_open[] = "{\"time\":\"";

static int s_is_stamp(const char *p, size_t n)
{
    if (n < S_STAMP_LEN) {
        return 0;
    }
    for (size_t i = 0; i < S_STAMP_LEN; i++) {
        const char c = s_shape[i];
        if ((c == '0' && !isdigit((unsigned char)p[i])) ||
            (c == '+' && p[i] != '+' && p[i] != '-') ||
            (c != '0' && c != '+' && p[i] != c)) {
            return 0;
        }
    }
    return 1;
}

/* Where a line's stamp starts (after a JSON line's opening), or NULL. */
static const char *s_stamp_at(const char *p, size_t n)
{
    const size_t open = sizeof s_json_open - 1;
    if (n > open && !memcmp(p, s_json_open, open)) {
        return s_is_stamp(p + open, n - open) ? p + open : NULL;
    }
    return s_is_stamp(p, n) && n > S_STAMP_LEN && p[S_STAMP_LEN] == ' ' ? p : NULL;
}

int ps_log_is_line(const char *p, size_t n)
{
    return s_stamp_at(p, n) != NULL;
}

int ps_log_split(const char *p, size_t n, char *stamp, char *node, size_t cap, int *level,
                 size_t *msg_at)
{
    if (!s_is_stamp(p, n) || n <= S_STAMP_LEN || p[S_STAMP_LEN] != ' ') {
        return -1;
    }
    const char *tag = p + S_STAMP_LEN + 1, *end = p + n;
    const char *sp = memchr(tag, ' ', (size_t)(end - tag));
    const char *lv = sp && sp + 2 <= end ? memchr(s_tag, sp[1], sizeof s_tag - 1) : NULL;
    if (!lv || sp == tag || (size_t)(sp - tag) >= cap || (sp + 2 < end && sp[2] != ' ')) {
        return -1;
    }
    for (const char *q = tag; q < sp; q++) {
        if (!isalnum((unsigned char)*q)) { /* a tag goes into JSON unquoted */
            return -1;
        }
    }
    memcpy(stamp, p, S_STAMP_LEN);
    stamp[S_STAMP_LEN] = '\0';
    memcpy(node, tag, (size_t)(sp - tag));
    node[sp - tag] = '\0';
    *level = (int)(lv - s_tag);
    *msg_at = sp + 3 <= end ? (size_t)(sp + 3 - p) : n;
    return 0;
}

double ps_log_line_time(const char *p, size_t n)
{
    const char *s = s_stamp_at(p, n);
    struct tm tm = {0};
    int ms, oh, om;
    char sign;
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c%2d:%2d", &tm.tm_year, &tm.tm_mon,
                     &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &sign, &oh,
                     &om) != 10) {
        return -1;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const double off = (sign == '-' ? -1 : 1) * (oh * 3600.0 + om * 60.0);
    return (double)timegm(&tm) + ms / 1000.0 - off;
}

/* Room kept for " (+2147483647 more)". */
enum { S_MORE_ROOM = 24 };

size_t ps_log_list_add(char *buf, size_t cap, size_t at, const char *item, int *more)
{
    size_t len = strlen(item);
    if (*more || at + len + S_MORE_ROOM >= cap) {
        (*more)++;
        return 0;
    }
    memcpy(buf + at, item, len + 1);
    return len;
}

void ps_log_list_end(char *buf, size_t cap, size_t at, int more)
{
    if (more && at < cap) {
        snprintf(buf + at, cap - at, " (+%d more)", more);
    }
}
