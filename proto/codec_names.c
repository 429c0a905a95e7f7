/* proto/codec_names.c - names of the wire's enums and of this build, for
 * logs, errors and registration (see codec.h). */
#include <stdio.h>

#include "proto/build_id.h"
#include "proto/codec.h"

void ps_codec_build_id(char *buf, size_t cap)
{
    snprintf(buf, cap, "%s protocol %u", PS_BUILD_VCS, PS_PROTOCOL_VERSION);
}

const char *ps_codec_type_name(int type)
{
    static const char *names[PS_MSG_TYPE_MAX + 1] = {
        "none",    "register", "register-ack", "model-info", "view",      "barrier",
        "barrier-done", "heartbeat", "shutdown", "done",   "push",      "push-ack",
        "pull",    "pull-reply", "init",       "init-ack", "error",     "report",
        "ring-data", "checkpoint", "members", "peer-ready",
        [PS_MSG_FAILOVER] = "failover",
        [PS_MSG_FAILOVER_READY] = "failover-ready",
        [PS_MSG_JOIN_PREPARE] = "join-prepare",
        [PS_MSG_JOIN_STEP] = "join-step",
        [PS_MSG_STATUS] = "status",
        [PS_MSG_STATUS_REPLY] = "status-reply",
        [PS_MSG_PREFLIGHT_PROBE] = "preflight-probe",
        [PS_MSG_PREFLIGHT_RESULT] = "preflight-result",
        [PS_MSG_PUSH_PULL] = "push-pull",
        [PS_MSG_CHALLENGE] = "challenge",
        [PS_MSG_RESUME_CHECK] = "resume-check",
        [PS_MSG_REPLICA] = "replica",
        [PS_MSG_REPLICATE] = "replicate",
        [PS_MSG_REPLICA_SNAPSHOT] = "replica-snapshot",
        [PS_MSG_REPLICA_ACK] = "replica-ack",
        [PS_MSG_ROWS_PULL] = "rows-pull",
        [PS_MSG_ROWS] = "rows",
        [PS_MSG_ROWS_PUSH] = "rows-push"};
    if (type < 0 || type > PS_MSG_TYPE_MAX || !names[type]) {
        return "unknown";
    }
    return names[type];
}

const char *ps_codec_role_tag(ps_role_t role)
{
    switch ((int)role) {
    case PS_ROLE_SCHEDULER: return "C";
    case PS_ROLE_SERVER: return "S";
    case PS_ROLE_WORKER: return "W";
    default: return "?";
    }
}
