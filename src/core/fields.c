/* The names of the header fields the request path consults (fields.h). */
#include "fields.h"

const struct lx_known_name lx_known_names[LX_H_KNOWN] = {
    [LX_H_HOST] = {"host", 4},
    [LX_H_CONNECTION] = {"connection", 10},
    [LX_H_IF_NONE_MATCH] = {"if-none-match", 13},
    [LX_H_IF_MODIFIED_SINCE] = {"if-modified-since", 17},
    [LX_H_RANGE] = {"range", 5},
    [LX_H_IF_RANGE] = {"if-range", 8},
    [LX_H_ACCEPT_ENCODING] = {"accept-encoding", 15},
    [LX_H_USER_AGENT] = {"user-agent", 10},
    [LX_H_REFERER] = {"referer", 7},
    [LX_H_EXPECT] = {"expect", 6},
    [LX_H_TRANSFER_ENCODING] = {"transfer-encoding", 17},
    [LX_H_IF_MATCH] = {"if-match", 8},
    [LX_H_IF_UNMODIFIED_SINCE] = {"if-unmodified-since", 19},
};
