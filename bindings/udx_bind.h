#ifndef LUDX_UDX_BIND_H
#define LUDX_UDX_BIND_H

// Shared by udx.c (instance, sockets) and udx_stream.c (streams).
#include "bind.h"
#include "udx.h"

typedef struct lsock_s lsock_t;

udx_t *
ludx_udx_instance (lua_State *L);

int
ludx_parse_addr (const char *host, int port, struct sockaddr_storage *out);

int
ludx_push_addr (lua_State *L, const struct sockaddr *sa);

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

void
ludx_bind_udx_stream (lua_State *L);

// The C stream of a udx stream userdata (a udx.stream's .h), NULL once it
// is gone; *closed tells whether it closed.
udx_stream_t *
ludx_udx_stream_of (lua_State *L, int idx, int *closed);

#endif
