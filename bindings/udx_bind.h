#ifndef LUDX_UDX_BIND_H
#define LUDX_UDX_BIND_H

// What udx.c (the instance and sockets) gives udx_stream.c (streams), and
// what udx_stream.c gives C-side users of a stream (framer_udx.c). The order is
// one way: udx.c knows nothing of streams.
#include "bind.h"
#include "udx.h"

typedef struct lsock_s lsock_t;

udx_t *
ludx_udx_instance (lua_State *L);

int
ludx_check_fault (lua_State *L, int idx, udx_fault_t *f);

lsock_t *
ludx_check_lsock (lua_State *L, int idx);

udx_socket_t *
ludx_lsock_socket (lsock_t *s);

void
ludx_socket_attach (lsock_t *s);

void
ludx_socket_detach (lsock_t *s);

// The C stream of a udx stream userdata (a udx.stream's handle()), NULL
// once it is gone; *closed tells whether it closed.
udx_stream_t *
ludx_udx_stream_of (lua_State *L, int idx, int *closed);

#endif
