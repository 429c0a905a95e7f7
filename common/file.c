/*
 * common/file.c - durable whole-file writes and small file helpers.
 *
 * The temp file lies in the target's own directory so that the rename stays
 * within one file system (and so is atomic); its name carries the pid so
 * that two processes writing one path never share a temp file.
 */
#include "common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/error.h"

/* The directory holding path into dir[cap]: "." for a bare name, "/" for an
 * entry of the root; trailing slashes of path are ignored. -1 if too long. */
static int s_dirname(const char *path, char *dir, size_t cap)
{
    size_t end = strlen(path);
    while (end > 1 && path[end - 1] == '/') {
        end--;
    }
    while (end > 0 && path[end - 1] != '/') {
        end--;
    }
    while (end > 1 && path[end - 1] == '/') {
        end--;
    }
    int n = end ? snprintf(dir, cap, "%.*s", (int)end, path) : snprintf(dir, cap, ".");
    return n >= 0 && (size_t)n < cap ? 0 : -1;
}

static int s_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int ps_file_write_atomic(const char *path, const void *const *parts, const size_t *lens,
                         int n, char *why, size_t why_cap)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp) {
        ps_error_format(why, why_cap, "%s: path too long", path);
        return PS_EINVAL;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        ps_error_format(why, why_cap, "%s: cannot create %s: %s", path, tmp,
                        strerror(errno));
        return PS_EIO;
    }
    int bad = 0;
    for (int i = 0; i < n && !bad; i++) {
        bad = s_write_all(fd, parts[i], lens[i]);
    }
    if (bad || fsync(fd) != 0) {
        ps_error_format(why, why_cap, "%s: writing %s failed: %s", path, tmp,
                        strerror(errno));
        goto fail;
    }
    int closed = close(fd);
    fd = -1;
    if (closed != 0) {
        ps_error_format(why, why_cap, "%s: closing %s failed: %s", path, tmp,
                        strerror(errno));
        goto fail;
    }
    if (rename(tmp, path) != 0) {
        ps_error_format(why, why_cap, "%s: rename from %s failed: %s", path, tmp,
                        strerror(errno));
        goto fail;
    }
    if (ps_file_sync_dir(path) != 0) {
        /* the file is complete; only the rename may not have reached disk yet */
        ps_error_format(why, why_cap, "%s: fsync of its directory failed: %s", path,
                        strerror(errno));
        return PS_EIO;
    }
    return 0;
fail:
    if (fd >= 0) {
        close(fd);
    }
    unlink(tmp);
    return PS_EIO;
}

int ps_file_make_dir(const char *path)
{
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
        return PS_EIO;
    }
    return ps_file_sync_dir(path);
}

int ps_file_sync_dir(const char *path)
{
    char dir[4096];
    if (s_dirname(path, dir, sizeof dir) != 0) {
        errno = ENAMETOOLONG;
        return PS_EIO;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return PS_EIO;
    }
    int rc = fsync(fd), err = errno;
    close(fd);
    errno = err;
    return rc == 0 ? 0 : PS_EIO;
}

int ps_file_open_read(const char *path, uint64_t *size, char *why, size_t why_cap)
{
    struct stat sb;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const int enoent = errno == ENOENT;
        ps_error_format(why, why_cap, "%s: cannot open: %s", path, strerror(errno));
        return enoent ? PS_ENOENT : PS_EIO;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        ps_error_format(why, why_cap, "%s: not a regular file", path);
        close(fd);
        return PS_EIO;
    }
    *size = (uint64_t)sb.st_size;
    return fd;
}

/* 1 when a private file's mode and owner keep it private: no access for
 * others, and none for the group unless root owns the file, the group may
 * only read it and we are not root (the group is how we read it). That one
 * exception is a Kubernetes Secret volume read by a non-root user
 * (root:fsGroup, 0440), the rule PostgreSQL applies to its key file. */
static int s_private(const struct stat *st)
{
    const unsigned group = st->st_mode & 070, other = st->st_mode & 007;
    return !other && (!group || (st->st_uid == 0 && group == 040 && geteuid() != 0));
}

int ps_file_read_private(const char *path, const char *what, const char *hint, char *text,
                         size_t cap, char *err, size_t errlen)
{
    /* Symlinks are resolved first (a Secret volume's files are links into
     * ..data/), so that the file checked is the one read. */
    char real[PATH_MAX];
    struct stat st;
    int fd = realpath(path, real) ? open(real, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot read %s %s: %s%s", what, path, strerror(errno),
                 errno == ENOENT ? hint : "");
        if (fd >= 0) {
            close(fd);
        }
        return PS_EINVAL;
    }
    if (!S_ISREG(st.st_mode) || !s_private(&st)) {
        const int linked = strcmp(path, real) != 0;
        snprintf(err, errlen, "%s %s%s%s may be read or changed by others (mode %04o, owner "
                 "uid %u); chmod 600 it", what, path, linked ? " -> " : "", linked ? real : "",
                 (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
        close(fd);
        return PS_EINVAL;
    }
    ssize_t n = read(fd, text, cap - 1);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    return 0;
}

int ps_file_read_all(int fd, void *buf, size_t n)
{
    char *c = buf;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return PS_EIO;
        }
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

int ps_file_crc32(const char *path, uint32_t *crc)
{
    unsigned char buf[1 << 16];
    uLong c = crc32(0L, Z_NULL, 0);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return errno == ENOENT ? PS_ENOENT : PS_EIO;
    }
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            close(fd);
            return PS_EIO;
        }
        if (r == 0) {
            break;
        }
        c = crc32(c, buf, (uInt)r);
    }
    close(fd);
    *crc = (uint32_t)c;
    return 0;
}

int ps_file_check_writable(const char *path, char *why, size_t why_cap)
{
    char dir[4096];
    struct stat sb;
    size_t len = strlen(path);
    if (!len || path[len - 1] == '/' || (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))) {
        ps_error_format(why, why_cap, "%s: not a file name", path);
        return PS_EIO;
    }
    if (s_dirname(path, dir, sizeof dir) != 0) {
        ps_error_format(why, why_cap, "%s: path too long", path);
        return PS_EIO;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        ps_error_format(why, why_cap, "%s: cannot write in %s: %s", path, dir,
                        strerror(errno));
        return PS_EIO;
    }
    return 0;
}

int ps_file_check_readable(const char *path, char *why, size_t why_cap)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        ps_error_format(why, why_cap, "%s: %s", path, strerror(errno));
        return errno == ENOENT ? PS_ENOENT : PS_EIO;
    }
    if (!S_ISREG(sb.st_mode) || access(path, R_OK) != 0) {
        ps_error_format(why, why_cap, "%s: %s", path,
                        S_ISREG(sb.st_mode) ? strerror(errno) : "not a regular file");
        return PS_EIO;
    }
    return 0;
}

int ps_file_check_dir_writable(const char *path, char *why, size_t why_cap)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        return ps_file_check_writable(path, why, why_cap); /* to be created */
    }
    if (!S_ISDIR(sb.st_mode)) {
        ps_error_format(why, why_cap, "%s: not a directory", path);
        return PS_EIO;
    }
    if (access(path, W_OK | X_OK) != 0) {
        ps_error_format(why, why_cap, "%s: cannot write in it: %s", path, strerror(errno));
        return PS_EIO;
    }
    return 0;
}

int ps_file_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    if (!path[0] || snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        return PS_EINVAL;
    }
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (ps_file_make_dir(buf) != 0) {
                return PS_EIO;
            }
            *p = c;
            if (c == '\0') {
                break;
            }
        }
    }
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : PS_EIO;
}

int ps_file_mkdirs_for(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) {
        return 0;
    }
    if (snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path) >= (int)sizeof dir) {
        return PS_EINVAL;
    }
    return ps_file_mkdirs(dir);
}
