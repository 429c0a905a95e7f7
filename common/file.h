/*
 * common/file.h - durable whole-file writes and the small file helpers around
 * them.
 *
 * Every file shardps leaves behind for a later run (models, checkpoint parts,
 * manifests, the summary, the endpoint file) is written with
 * ps_file_write_atomic, so a reader finds either the old file or the new one,
 * never a part of one, even after a crash. Plain POSIX calls and zlib (the
 * checksum); no buffering of our own, no locking: two processes writing the
 * same path at once each leave a whole file, the later rename wins.
 */
#ifndef PS_COMMON_FILE_H
#define PS_COMMON_FILE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Writes the n byte ranges parts[i][0 .. lens[i]) back to back as the file
 * path, atomically: a temp file beside it (path.tmp.<pid>), fsync, rename
 * over path, fsync of the directory. Returns 0, PS_EINVAL (path too long) or
 * PS_EIO; on failure the temp file is removed, path is as it was (unless only
 * the final directory fsync failed: then path is whole and new) and a
 * one-line reason naming path goes to why (may be NULL). The parts are
 * borrowed for the call. Thread-safe.
 */
int ps_file_write_atomic(const char *path, const void *const *parts, const size_t *lens,
                         int n, char *why, size_t why_cap);

/* mkdir of path (mode 0777 less the umask) that accepts an existing
 * directory (another process may make it at the same time), and makes the
 * new entry durable (ps_file_sync_dir). Returns 0 or PS_EIO, errno set. */
int ps_file_make_dir(const char *path);

/* Creates the directory path and its parents, as `mkdir -p`, each as
 * ps_file_make_dir does; an existing directory is fine. Returns 0, PS_EINVAL
 * (path too long) or PS_EIO (with errno set when a mkdir failed). */
int ps_file_mkdirs(const char *path);

/* The directory that holds file path, made as ps_file_mkdirs does ("run/"
 * of "run/s.json"; nothing for a bare name). Returns as ps_file_mkdirs. */
int ps_file_mkdirs_for(const char *path);

/* fsync of the directory that holds path (a file or a directory name; "."
 * for a bare name), so that a new or renamed entry there is durable.
 * Returns 0 or PS_EIO, with errno set by the failed call. */
int ps_file_sync_dir(const char *path);

/* Opens path, a regular file, for reading and puts its size in *size.
 * Returns the descriptor (the caller closes it), or PS_ENOENT (no such file)
 * or PS_EIO (unreadable, or not a regular file) with a one-line reason
 * naming path in why (may be NULL). */
int ps_file_open_read(const char *path, uint64_t *size, char *why, size_t why_cap);

/* Reads up to cap - 1 bytes of the private file at path into text
 * (NUL-terminated), after checking it is a regular file (not a link) that
 * only its owner may read or write: for keys and secrets. what names it in a
 * reason ("key file"), hint follows a reason for a missing file (may be "").
 * Returns 0, or PS_EINVAL with a one-line reason naming path in err. */
int ps_file_read_private(const char *path, const char *what, const char *hint, char *text,
                         size_t cap, char *err, size_t errlen);

/* Reads exactly n bytes from fd into buf, retrying short reads and EINTR.
 * Returns 0, or PS_EIO on an error or an end of file before n bytes. */
int ps_file_read_all(int fd, void *buf, size_t n);

/* The CRC-32 (zlib's) of the whole file at path into *crc, for a manifest.
 * Returns 0, PS_ENOENT or PS_EIO. */
int ps_file_crc32(const char *path, uint32_t *crc);

/* Checks that a file can be created at path (not a directory name, and its
 * directory exists and is writable), without creating it: for flags checked
 * before a long job. Returns 0, or PS_EIO with a one-line reason naming path
 * in why (may be NULL). */
int ps_file_check_writable(const char *path, char *why, size_t why_cap);

/* Checks that path is a regular file this process can read, without
 * reading it: for input flags checked before joining a job. Returns 0,
 * PS_ENOENT (no such file) or PS_EIO (a directory, unreadable), with a
 * one-line reason naming path in why (may be NULL). */
int ps_file_check_readable(const char *path, char *why, size_t why_cap);

/* The same for a directory the job fills (checkpoints): an existing
 * directory we can write in, or one that can be created (its parent
 * writable). Returns 0, or PS_EIO with a one-line reason in why. */
int ps_file_check_dir_writable(const char *path, char *why, size_t why_cap);

#ifdef __cplusplus
}
#endif
#endif
