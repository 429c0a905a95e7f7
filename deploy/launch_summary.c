/* deploy/launch_summary.c - the user's --summary file, written by the
 * launcher from the scheduler's and how the job ended (launch_summary.h). */
#include "deploy/launch_summary.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/json.h"
#include "common/log.h"

/* The longest scheduler summary read back. */
enum { S_MAX_BYTES = 1 << 26 };

int ps_launch_summary_write(const ps_launch_summary_t *s, char *cause, size_t cap)
{
    json_t *doc = NULL;
    char why[512];
    int missing = ps_json_read_file(s->scheduler_file, S_MAX_BYTES, &doc, NULL, 0) != 0 ||
                  !json_is_object(doc);
    if (missing) {
        json_decref(doc);
        doc = json_pack("{s:o, s:s, s:o}", "job_id",
                        s->job_id ? ps_json_text(s->job_id) : json_null(), "status",
                        "failed", "last_step", json_null());
    }
    const char *status = json_string_value(json_object_get(doc, "status"));
    const int stopped = missing || !status || !strcmp(status, "ok") ||
                        !strcmp(status, "interrupted");
    int failed = !doc;
    if (!failed && s->exit_code != 0 && stopped) {
        /* 128 + N: the launcher's own signal; anything else a failure it saw first */
        failed |= json_object_set_new(doc, "status", json_string(s->exit_code > 128
                                                                     ? "interrupted"
                                                                     : "failed")) != 0;
        failed |= json_object_set_new(doc, "failure", ps_json_text(s->why)) != 0;
    }
    failed = failed || json_object_set_new(doc, "exit_code", json_integer(s->exit_code)) != 0;
    const char *final = failed ? NULL : json_string_value(json_object_get(doc, "failure"));
    snprintf(cause, cap, "%s", final ? final : "");
    int rc = failed ? PS_ENOMEM : ps_json_write_file(s->path, doc, PS_JSON_LINE, why, sizeof why);
    json_decref(doc);
    if (rc != 0) {
        ps_log_err("cannot write the summary to %s: %s", s->path,
                   failed ? "out of memory" : why);
        return PS_EIO;
    }
    return missing;
}
