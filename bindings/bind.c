#include "bind.h"

#include <stdlib.h>
#include <string.h>

ludx_rt_t *
ludx_bind_rt (lua_State *L) {
  ludx_rt_t *rt = ludx_rt_default();
  if (rt == NULL)
    luaL_error(L, "ludx: cannot start the event loop (out of memory)");
  return rt;
}

int
ludx_push_uv_error (lua_State *L, int err) {
  lua_pushnil(L);
  lua_pushstring(L, uv_strerror(err));
  lua_pushstring(L, uv_err_name(err));
  return 3;
}

// LuaJIT books an allocation's size as debt that the collector works off
// 1 KiB per later allocation check. A program that reads 64 KiB strings and
// drops them makes few small objects between them, so the collector falls
// far behind: a loop of 64 KiB strings peaked at 17 MB of heap with 0.56 MB
// live (158 MB with 5 MB live), and a 16 MiB-frame transfer kept 2.6 MB at
// 0.5 MB live. Once a cycle is due (the heap doubled since the last one we
// saw end: the default pause), a string of n KiB does its n KiB of work at
// once: the same peaks became 1.6 MB and 20 MB, and the loop got faster
// (fewer fresh pages), where paying every string kept 0.9 MB for +0.25 s/GB.
// One Lua state per process (the runtime's): the heap seen after the last
// cycle is kept here, lowered whenever the heap is seen smaller. The step
// sets LuaJIT's threshold anew, so it also runs a collector the program
// stopped (collectgarbage("stop")): LuaJIT offers no way to tell.
static size_t gc_after_kb;

void
ludx_gc_pay (lua_State *L, size_t n) {
  if (n < LUDX_GC_PAY_MIN)
    return;
  size_t kb = (size_t) lua_gc(L, LUA_GCCOUNT, 0);
  if (kb < gc_after_kb)
    gc_after_kb = kb;
  if (kb < 2 * gc_after_kb)
    return;
  if (lua_gc(L, LUA_GCSTEP, (int) (n >> 10)))
    gc_after_kb = (size_t) lua_gc(L, LUA_GCCOUNT, 0);
}

void
ludx_push_bytes (lua_State *L, const void *p, size_t n) {
  lua_pushlstring(L, (const char *) p, n);
  ludx_gc_pay(L, n);
}

int
ludx_push_error (lua_State *L, const char *msg, const char *code) {
  lua_pushnil(L);
  lua_pushstring(L, msg);
  lua_pushstring(L, code);
  return 3;
}

static const char *
current_function (lua_State *L) {
  lua_Debug ar;
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name)
    return ar.name;
  return "?";
}

static int
arg_error (lua_State *L, int idx, const char *name, const char *expected) {
  return luaL_error(L, "bad argument '%s' to '%s' (%s expected, got %s)", name, current_function(L), expected, luaL_typename(L, idx));
}

const char *
ludx_check_lstring (lua_State *L, int idx, const char *name, size_t *len) {
  if (lua_type(L, idx) != LUA_TSTRING)
    arg_error(L, idx, name, "string");
  return lua_tolstring(L, idx, len);
}

lua_Number
ludx_check_number (lua_State *L, int idx, const char *name) {
  if (lua_type(L, idx) != LUA_TNUMBER)
    arg_error(L, idx, name, "number");
  return lua_tonumber(L, idx);
}

lua_Integer
ludx_check_integer (lua_State *L, int idx, const char *name, lua_Integer min, lua_Integer max) {
  lua_Number n = ludx_check_number(L, idx, name);
  if (n != (lua_Number) (lua_Integer) n) {
    luaL_error(L, "bad argument '%s' to '%s' (integer expected, got %f)", name, current_function(L), n);
  }
  if ((lua_Integer) n < min || (lua_Integer) n > max) {
    luaL_error(L, "bad argument '%s' to '%s' (%f is out of range %f..%f)", name, current_function(L), n, (double) min, (double) max);
  }
  return (lua_Integer) n;
}

lua_Integer
ludx_opt_integer (lua_State *L, int idx, const char *name, lua_Integer def, lua_Integer min, lua_Integer max) {
  if (lua_isnoneornil(L, idx))
    return def;
  return ludx_check_integer(L, idx, name, min, max);
}

const char *
ludx_opt_lstring (lua_State *L, int idx, const char *name, const char *def, size_t *len) {
  if (lua_isnoneornil(L, idx)) {
    if (len)
      *len = def ? strlen(def) : 0;
    return def;
  }
  return ludx_check_lstring(L, idx, name, len);
}

int
ludx_check_table (lua_State *L, int idx, const char *name) {
  if (lua_type(L, idx) != LUA_TTABLE)
    arg_error(L, idx, name, "table");
  return 1;
}

lua_Integer
ludx_field_integer (lua_State *L, int idx, const char *field, lua_Integer def) {
  lua_getfield(L, idx, field);
  lua_Integer v = def;
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TNUMBER) {
      luaL_error(L, "bad option '%s' to '%s' (number expected, got %s)", field, current_function(L), luaL_typename(L, -1));
    }
    v = (lua_Integer) lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

int
ludx_field_boolean (lua_State *L, int idx, const char *field, int def) {
  lua_getfield(L, idx, field);
  int v = def;
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TBOOLEAN) {
      luaL_error(L, "bad option '%s' to '%s' (boolean expected, got %s)", field, current_function(L), luaL_typename(L, -1));
    }
    v = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

const char *
ludx_field_string (lua_State *L, int idx, const char *field, const char *def) {
  lua_getfield(L, idx, field);
  const char *v = def;
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING) {
      luaL_error(L, "bad option '%s' to '%s' (string expected, got %s)", field, current_function(L), luaL_typename(L, -1));
    }
    v = lua_tostring(L, -1); // stays valid: the table still holds it
  }
  lua_pop(L, 1);
  return v;
}

uint32_t
ludx_check_ref (lua_State *L, int idx) {
  return (uint32_t) ludx_check_integer(L, idx, "ref", 0, UINT32_MAX);
}

const uint8_t *
ludx_check_bytes (lua_State *L, int idx, const char *name, size_t want) {
  size_t len;
  const char *s = ludx_check_lstring(L, idx, name, &len);
  if (len != want)
    luaL_error(L, "bad argument '%s' to '%s' (%d-byte string expected, got %d bytes)", name, current_function(L), (int) want, (int) len);
  return (const uint8_t *) s;
}

int
ludx_check_boolean (lua_State *L, int idx, const char *name) {
  if (lua_type(L, idx) != LUA_TBOOLEAN)
    arg_error(L, idx, name, "boolean");
  return lua_toboolean(L, idx);
}

// ---------------------------------------------------------------------------
// Addresses

int
ludx_parse_addr (const char *host, int port, struct sockaddr_storage *out) {
  memset(out, 0, sizeof(*out));
  if (port < 0 || port > 65535)
    return UV_EINVAL;
  if (strchr(host, ':'))
    return uv_ip6_addr(host, port, (struct sockaddr_in6 *) out);
  return uv_ip4_addr(host, port, (struct sockaddr_in *) out);
}

void
ludx_check_addr (lua_State *L, int host_idx, int port_idx, struct sockaddr_storage *out) {
  const char *host = ludx_check_lstring(L, host_idx, "host", NULL);
  int port = (int) ludx_check_integer(L, port_idx, "port", 0, 65535);
  if (ludx_parse_addr(host, port, out) < 0)
    luaL_error(L, "bad argument 'host' to '%s' (an IPv4 or IPv6 address expected, got '%s')", current_function(L), host);
}

int
ludx_push_addr (lua_State *L, const struct sockaddr *sa) {
  char host[INET6_ADDRSTRLEN] = "";
  int port = 0;
  const char *family = "IPv4";
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
    port = ntohs(in6->sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      uv_inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], host, sizeof(host));
    } else {
      uv_ip6_name(in6, host, sizeof(host));
      family = "IPv6";
    }
  } else if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
    uv_ip4_name(in, host, sizeof(host));
    port = ntohs(in->sin_port);
  }
  lua_pushstring(L, host);
  lua_pushinteger(L, port);
  lua_pushstring(L, family);
  return 3;
}

// ---------------------------------------------------------------------------
// FIFO

int
ludx_fifo_push (ludx_fifo_t *q, const void *head, size_t head_len, const void *data, size_t len) {
  ludx_fifo_item_t *it = malloc(sizeof(*it) + head_len + len);
  if (it == NULL)
    return UV_ENOMEM;
  it->next = NULL;
  it->head_len = head_len;
  it->len = len;
  if (head_len > 0)
    memcpy(it->data, head, head_len);
  if (len > 0)
    memcpy(it->data + head_len, data, len);
  int was_empty = q->head == NULL;
  if (q->tail)
    q->tail->next = it;
  else
    q->head = it;
  q->tail = it;
  q->count++;
  q->bytes += len;
  return was_empty;
}

ludx_fifo_item_t *
ludx_fifo_shift (ludx_fifo_t *q) {
  ludx_fifo_item_t *it = q->head;
  if (it == NULL)
    return NULL;
  q->head = it->next;
  if (q->head == NULL)
    q->tail = NULL;
  q->count--;
  q->bytes -= it->len;
  return it;
}

void
ludx_fifo_clear (ludx_fifo_t *q) {
  ludx_fifo_item_t *it;
  while ((it = ludx_fifo_shift(q)) != NULL)
    free(it);
}

// ---------------------------------------------------------------------------

void **
ludx_new_object (lua_State *L, const char *mt, void *ptr) {
  void **ud = lua_newuserdata(L, sizeof(void *));
  *ud = ptr;
  luaL_getmetatable(L, mt);
  lua_setmetatable(L, -2);
  return ud;
}

void *
ludx_check_object (lua_State *L, int idx, const char *mt, const char *name) {
  void **ud = lua_touserdata(L, idx);
  if (ud != NULL && lua_getmetatable(L, idx)) {
    luaL_getmetatable(L, mt);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (same)
      return *ud;
  }
  luaL_error(L, "bad argument '%s' to '%s' (%s expected, got %s)", name, current_function(L), mt, luaL_typename(L, idx));
  return NULL;
}

void *
ludx_check_open (lua_State *L, int idx, const char *mt, const char *what) {
  void *p = ludx_check_object(L, idx, mt, what);
  if (p == NULL)
    luaL_error(L, "%s is closed", what);
  return p;
}

void
ludx_new_class (lua_State *L, const char *mt, const luaL_Reg *methods) {
  luaL_newmetatable(L, mt);
  lua_pushvalue(L, -1);
  lua_setfield(L, -2, "__index");
  ludx_set_funcs(L, methods);
  lua_pop(L, 1);
}

void
ludx_set_funcs (lua_State *L, const luaL_Reg *funcs) {
  for (; funcs->name; funcs++) {
    lua_pushcfunction(L, funcs->func);
    lua_setfield(L, -2, funcs->name);
  }
}
