// Name lookups (getaddrinfo on the libuv thread pool).
#include <stdlib.h>
#include <string.h>

#include "bind.h"

#define LOOKUP_MT "ludx.lookup"

// The event kind, registered when the module loads.
static uint32_t ev_lookup;

typedef struct lookup_s {
  ludx_closer_t closer;
  uv_getaddrinfo_t req;
  ludx_rt_t *rt;
  uint32_t ref;
  int status;
  ludx_life_t life; // closed: the request is done
  struct addrinfo *res;
} lookup_t;

static void
lookup_free (lookup_t *l) {
  if (l->res)
    uv_freeaddrinfo(l->res);
  free(l);
}

static void
on_resolved (uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  lookup_t *l = req->data;
  l->status = status;
  l->res = res;
  ludx_rt_untrack(&l->closer);
  if (ludx_life_close(&l->life)) {
    lookup_free(l);
    return;
  }
  ludx_rt_post(l->rt, ev_lookup, l->ref, status, 0);
}

static void
lookup_shutdown (ludx_closer_t *c) {
  lookup_t *l = (lookup_t *) c;
  ludx_rt_untrack(c);
  uv_cancel((uv_req_t *) &l->req);
}

// core.lookup(host, ref [, family 4|6|0]) -> request
static int
l_lookup (lua_State *L) {
  const char *host = ludx_check_lstring(L, 1, "host", NULL);
  uint32_t ref = ludx_check_ref(L, 2);
  int family = (int) ludx_opt_integer(L, 3, "family", 0, 0, 6);
  lookup_t *l = calloc(1, sizeof(*l));
  if (l == NULL)
    return ludx_push_uv_error(L, UV_ENOMEM);
  l->rt = ludx_bind_rt(L);
  l->ref = ref;
  l->req.data = l;
  struct addrinfo hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = family == 4 ? AF_INET : family == 6 ? AF_INET6
                                                        : AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  int err = uv_getaddrinfo(&l->rt->loop, &l->req, on_resolved, host, NULL, &hints);
  if (err < 0) {
    free(l);
    return ludx_push_uv_error(L, err);
  }
  ludx_rt_track(l->rt, &l->closer, lookup_shutdown);
  ludx_new_object(L, LOOKUP_MT, l);
  return 1;
}

// req:result() -> {"1.2.3.4", "::1", ...} | nil, msg, code
static int
l_result (lua_State *L) {
  lookup_t *l = ludx_check_open(L, 1, LOOKUP_MT, "lookup");
  if (!l->life.closed)
    return ludx_push_uv_error(L, UV_EAGAIN);
  if (l->status < 0)
    return ludx_push_uv_error(L, l->status);
  lua_newtable(L);
  int n = 0;
  for (struct addrinfo *a = l->res; a; a = a->ai_next) {
    char host[INET6_ADDRSTRLEN];
    if (a->ai_family == AF_INET)
      uv_ip4_name((struct sockaddr_in *) a->ai_addr, host, sizeof(host));
    else if (a->ai_family == AF_INET6)
      uv_ip6_name((struct sockaddr_in6 *) a->ai_addr, host, sizeof(host));
    else
      continue;
    // one entry per address, in the resolver's order
    int dup = 0;
    for (int i = 1; i <= n && !dup; i++) {
      lua_rawgeti(L, -1, i);
      dup = strcmp(lua_tostring(L, -1), host) == 0;
      lua_pop(L, 1);
    }
    if (dup)
      continue;
    lua_pushstring(L, host);
    lua_rawseti(L, -2, ++n);
  }
  return 1;
}

static int
l_gc (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, LOOKUP_MT);
  lookup_t *l = *ud;
  *ud = NULL;
  if (l == NULL)
    return 0;
  if (ludx_life_release(&l->life))
    lookup_free(l);
  else
    uv_cancel((uv_req_t *) &l->req);
  return 0;
}

void
ludx_bind_dns (lua_State *L) {
  ev_lookup = ludx_rt_kind("LOOKUP");
  static const luaL_Reg methods[] = {{"result", l_result}, {"__gc", l_gc}, {NULL, NULL}};
  ludx_new_class(L, LOOKUP_MT, methods);
  static const luaL_Reg funcs[] = {{"lookup", l_lookup}, {NULL, NULL}};
  ludx_set_funcs(L, funcs);
}
