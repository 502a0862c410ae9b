/*
 * client/: CQL native protocol v3/v4 server, CQL parser, schema and system tables, and a C client library. Filled by the Client issue.
 *
 * Nothing is exported yet; see DESIGN.md for where this module sits.
 */
#ifndef CASSINI_CLIENT_CLIENT_H
#define CASSINI_CLIENT_CLIENT_H

#endif
