/* common/log.c - stderr logger with role/rank prefix and a wall-clock stamp. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "common/error.h"

int ps_log_level = PS_LOG_INFO;
static char s_prefix[16] = "-";

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

int ps_log_set_level_flag(const char *prog, const char *name)
{
    if (ps_log_set_level(name) != 0) {
        fprintf(stderr, "%s: error: --log-level %s: expected err, warn, info or debug\n", prog,
                name);
        return PS_EINVAL;
    }
    return 0;
}

ps_flag_t ps_log_level_flag(const char **dst)
{
    return (ps_flag_t){"log-level", PS_FLAG_STR, dst, "LEVEL", "err, warn, info or debug"};
}

void ps_log_write(int level, const char *fmt, ...)
{
    static const char tag[] = "EWID";
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    char stamp[16];
    ps_log_stamp(stamp, sizeof stamp);
    /* One fprintf per line: stdio locks the stream, so threads never interleave. */
    fprintf(stderr, "%s %s %c %s\n", stamp, s_prefix, tag[level & 3], msg);
}

void ps_log_stamp(char *buf, size_t cap)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    snprintf(buf, cap, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(tv.tv_usec / 1000));
}

int ps_log_is_line(const char *p, size_t n)
{
    static const char shape[] = "00:00:00.000 ";
    if (n < sizeof shape - 1) {
        return 0;
    }
    for (size_t i = 0; i < sizeof shape - 1; i++) {
        if (shape[i] == '0') {
            if (p[i] < '0' || p[i] > '9') {
                return 0;
            }
        } else if (p[i] != shape[i]) {
            return 0;
        }
    }
    return 1;
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
