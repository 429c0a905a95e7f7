/*
 * bench/bench.h - what the pieces of shardps-bench share.
 *
 * shardps-bench measures; it never decides pass or fail on a timing. Each
 * subcommand (comm/, train/) runs real shardps components and writes a
 * results page into an output directory: a markdown page headed by the
 * command, commit, date, machine and load, with its tables (each also a CSV)
 * and PNG plots drawn with gnuplot when it is installed. This header holds
 * the helpers they share: the results page and its tables (page.c), a string
 * builder and plots (plots.c); list parsing, files, running a program, the
 * machine, medians and sums over JSON documents, which are read and written
 * with common/json.h (util.c). Child processes themselves are deploy/proc.h's,
 * as the launcher's. Not a library for anyone else.
 */
#ifndef PS_BENCH_BENCH_H
#define PS_BENCH_BENCH_H

#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/json.h"
#include "common/text.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most entries a list flag (--sizes, --workers, ...) may hold. */
enum { PS_BENCH_LIST_MAX = 32 };

/* ---- subcommands --------------------------------------------------------- */

/* Each returns the process exit status: 0 when every measurement ran (runs
 * that failed are recorded as such and make the status 1), 2 on bad usage. */
int ps_bench_comm_main(int argc, char **argv);
int ps_bench_train_main(int argc, char **argv);
int ps_bench_crossover_main(int argc, char **argv);
int ps_bench_compute_main(int argc, char **argv);
int ps_bench_observe_main(int argc, char **argv);
int ps_bench_checkpoint_main(int argc, char **argv);
int ps_bench_replicas_main(int argc, char **argv);
int ps_bench_scale_main(int argc, char **argv);
int ps_bench_compress_main(int argc, char **argv);
int ps_bench_memory_main(int argc, char **argv);
int ps_bench_summary_main(int argc, char **argv);

/* ---- growable string ---------------------------------------------------- */

/* common/text.h's buffer, with the bench's names. */
typedef ps_text_t ps_bench_str_t;

/* Appends printf-style text. Never fails; sets s->oom when memory ran out. */
void ps_bench_str_addf(ps_bench_str_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The text, "" while empty. Borrowed; valid until the next append or fini. */
const char *ps_bench_str_get(const ps_bench_str_t *s);

/* Releases the text; the string is empty and reusable afterwards. */
void ps_bench_str_fini(ps_bench_str_t *s);

/* ---- results pages ---------------------------------------------------------- */

typedef struct ps_bench_page ps_bench_page_t;

/*
 * Starts the results page DIR/NAME.md (DIR exists) of one run of a
 * subcommand: argv[0..argc) is the subcommand's own argv (argv[0]: its name,
 * the page's title). The header gives the command (`shardps-bench` and argv,
 * as given: what regenerates the page), the build's commit, the date (UTC),
 * the machine and the load at the start and, once destroyed, at the end. Returns 0 and the
 * page in *out (caller owns the result; destroy with ps_bench_page_destroy()), or PS_EIO
 * with a line on stderr, or PS_ENOMEM.
 */
int ps_bench_page_new(const char *dir, const char *name, int argc, char **argv,
                      ps_bench_page_t **out);

/* The page's directory, where its tables' CSVs and its plots go. Borrowed;
 * valid until the page is destroyed. */
const char *ps_bench_page_dir(const ps_bench_page_t *page);

/* Adds a section of printf-style markdown at the end of the page. */
void ps_bench_page_addf(ps_bench_page_t *page, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Writes the page a last time, with the load at the end. NULL-safe; sets
 * *page to NULL. Destroy its tables first. */
void ps_bench_page_destroy(ps_bench_page_t **page);

/* ---- tables: DIR/NAME.csv and a section of the page -------------------------- */

typedef struct ps_bench_table ps_bench_table_t;

/*
 * Creates PAGE_DIR/NAME.csv and a table section at the end of the page
 * (page NULL: neither; the markdown is only printed, by destroy with echo).
 * columns: comma-separated CSV column names; headers: the same count of
 * markdown headers (comma-separated), or NULL to reuse the column names.
 * title: a markdown heading line. Returns 0 and the table in *out (caller
 * owns the result; destroy with ps_bench_table_destroy() before the page),
 * or PS_EIO with a line on stderr.
 */
int ps_bench_table_new(ps_bench_page_t *page, const char *name, const char *title,
                       const char *columns, const char *headers, ps_bench_table_t **out);

/* Writes one row given as printf-style comma-separated cells (cells never hold
 * commas; an empty cell means "not measured" and shows as n/a in markdown).
 * The CSV and the page are written at once, so a sweep cut short keeps its
 * rows. */
void ps_bench_table_rowf(ps_bench_table_t *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Adds a paragraph written under the table when it is destroyed. */
void ps_bench_table_note(ps_bench_table_t *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Writes the notes, closes the CSV and, if echo, prints the table's markdown
 * to stdout. NULL-safe; sets *t to NULL. */
void ps_bench_table_destroy(ps_bench_table_t **t, int echo);

/* ---- plots --------------------------------------------------------------- */

/*
 * Writes PAGE_DIR/NAME.gp (a self-contained gnuplot script: data inline,
 * output NAME.png beside it), runs gnuplot on it and puts the PNG on the page.
 * Returns 0, PS_ENOENT when gnuplot is not installed (said once on stderr;
 * the script is still written), or PS_EIO.
 */
int ps_bench_plot(ps_bench_page_t *page, const char *name, const char *script);

/* The terminal line every plot starts with: small PNGs of w x h pixels. */
void ps_bench_plot_header(ps_bench_str_t *s, const ps_bench_page_t *page, const char *name,
                          int w, int h);

/* The x axis of a plot against payload size: log2, tics named 4K, 1M, ...
 * sizes: nsizes >= 1 byte counts. */
void ps_bench_plot_sizes(ps_bench_str_t *gp, const long *sizes, int nsizes,
                         const char *ylabel);

/* ---- flags and files ------------------------------------------------------ */

/*
 * Parses a comma-separated list of integers, each with an optional K, M or G
 * suffix (powers of 1024), into vals. Returns the count (>= 1) or PS_EINVAL.
 */
int ps_bench_parse_list(const char *text, long *vals, int cap);

/* A list item's room, its NUL included. */
enum { PS_BENCH_WORD_MAX = 32 };

/* Splits a comma-separated list of words (each shorter than
 * PS_BENCH_WORD_MAX, none empty) into items. Returns the count (>= 1) or
 * PS_EINVAL. */
int ps_bench_split_words(const char *text, char items[][PS_BENCH_WORD_MAX], int cap);

/* Formats a byte count as "4K", "1M", "16M" (exact powers) or a plain number. */
void ps_bench_size_name(long bytes, char *buf, size_t cap);

/* What the subcommands that run jobs through shardps-launch share: *launch
 * (--launch, or NULL: found next to this program, in ../deploy/, on $PATH,
 * into path[cap]) and OUT/runs created. Returns the exit status to stop
 * with after one line on stderr naming prog (2: no launcher, 1: no
 * directory), or 0. */
int ps_bench_launch_setup(const char *prog, const char **launch, char *path, size_t cap,
                          const char *out);

/* Reads a whole file into *text (NUL-terminated; caller owns the result;
 * free with free()). Returns 0, PS_ENOENT or PS_ENOMEM. */
int ps_bench_read_file(const char *path, char **text);

/*
 * Runs argv[0] (a path; ps_proc_find_exe finds one) with stdout and stderr
 * appended to log_path (or inherited when NULL) and waits for it. Returns its
 * exit status (0..255), 128 + signal when it was killed, or PS_EIO with a line
 * on stderr when it could not start.
 */
int ps_bench_run(char *const argv[], const char *log_path);

/* The median of v[0..n-1], n >= 1; sorts v (so v[0] and v[n-1] are then the
 * least and the greatest). */
double ps_bench_median(double *v, int n);

/* ---- the machine ------------------------------------------------------------ */

/* The 1-minute load average (other work sharing the cores), or -1. */
double ps_bench_loadavg(void);

/* CPU seconds (user + system, all threads) process pid (0: this one) has used
 * so far, from /proc/PID/stat; -1 when it cannot be read. */
double ps_bench_cpu_seconds(pid_t pid);

/* CPU seconds (user + system) of this process's children that have been
 * waited for, and of theirs (getrusage RUSAGE_CHILDREN); the difference
 * across a job is the CPU its processes used. */
double ps_bench_children_cpu_seconds(void);

/* The machine's busy and total CPU time so far, in clock ticks of all its
 * cores (/proc/stat: busy = not idle and not waiting for I/O); 0 and 0 when
 * it cannot be read. The busy share over an interval is the difference of
 * busy over the difference of total. */
void ps_bench_cpu_ticks(double *busy, double *total);

/* Minor page faults (all threads) process pid (0: this one) has taken so
 * far, from /proc/PID/stat; -1 when it cannot be read. */
double ps_bench_minor_faults(pid_t pid);

/* "N cores, CPU model" (from /proc/cpuinfo), for the results pages. */
void ps_bench_machine(char *buf, size_t cap);

/* ---- JSON documents ------------------------------------------------------- */

/* The most bytes a JSON file the bench reads (a job's summary, a merged
 * trace, the PyTorch reference's line) may have: ps_json_read_file's limit. */
#define PS_BENCH_JSON_MAX ((size_t)256 << 20)

/* The sum of the numbers in v, an array or an object; with key (not NULL),
 * of each member's number at key (an array of objects: a summary's
 * server_reports). What is not a number counts 0, as does a v that is
 * neither. */
double ps_bench_json_sum(const json_t *v, const char *key);

#ifdef __cplusplus
}
#endif
#endif
