/* Node-kind colours (0..255 RGB) shared by the Paje and SVG exports, so a kind looks the
 * same in ViTE and in the SVG. Private to trace/. */
#ifndef NP_TRACE_PALETTE_H
#define NP_TRACE_PALETTE_H

#include "trace/trace.h"

static const unsigned char palette[NP_NODE_KIND_COUNT][3] = {
    [NP_NODE_PREFETCH] = {158, 158, 158},     [NP_NODE_H2D] = {188, 189, 34},
    [NP_NODE_ROUTE] = {23, 190, 207},         [NP_NODE_RETRIEVE] = {44, 160, 44},
    [NP_NODE_SYNC] = {152, 223, 138},         [NP_NODE_EXCHANGE_EMB] = {214, 39, 40},
    [NP_NODE_FWD] = {31, 119, 180},           [NP_NODE_BWD] = {148, 103, 189},
    [NP_NODE_EXCHANGE_GRAD] = {255, 127, 14}, [NP_NODE_ALLREDUCE] = {227, 119, 194},
    [NP_NODE_SPARSE_UPDATE] = {140, 86, 75},  [NP_NODE_WRITEBACK] = {196, 156, 148},
    [NP_NODE_DENSE_UPDATE] = {174, 199, 232}, [NP_NODE_DATA] = {99, 99, 99},
};

#endif
