#ifndef UDX_H
#define UDX_H

const char *
udx_version_string (void);

#endif
