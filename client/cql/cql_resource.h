/*
 * Permissions and resources as Cassandra 4.1's auth/Permission,
 * DataResource, RoleResource, FunctionResource and JMXResource: which
 * permissions apply to which level, their stored names (the `resource`
 * column of system_auth.role_permissions: "data/ks/t"), their printed
 * names ("<table ks.t>") and their chain of parents.
 *
 * Pure functions over struct cql_resource (client/cql/cql_ast.h), shared by
 * the parser (GRANT keeps only the applicable permissions), the executor
 * (which permission a statement needs) and the authorizer.
 */
#ifndef CASSINI_CLIENT_CQL_RESOURCE_H
#define CASSINI_CLIENT_CQL_RESOURCE_H

#include "client/cql/cql_ast.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The permissions that can be granted on `r` (Cassandra's
 * applicablePermissions). */
uint32_t cql_resource_applicable(const struct cql_resource *r);

/* "CREATE", "SELECT", ... for one bit; NULL for anything else. */
const char *cql_permission_name(uint32_t bit);
/* The bit of a permission's name (case-sensitive, as stored), or 0. */
uint32_t cql_permission_parse(const char *name, size_t len);

/* The stored name ("data", "data/ks", "data/ks/t", "roles/r",
 * "functions/ks/f[args]", "mbean/x") into `out`; its length, or -1 when it
 * does not fit (or a table's keyspace is missing). */
int cql_resource_name(const struct cql_resource *r, char *out, size_t cap);
/* As Cassandra prints it: "<all keyspaces>", "<keyspace ks>", "<table
 * ks.t>", "<all roles>", "<role r>", "<all functions>", "<all functions in
 * ks>", "<function ks.f(args)>", "<all mbeans>", "<mbean x>". */
int cql_resource_display(const struct cql_resource *r, char *out, size_t cap);
/* The inverse of cql_resource_name: 0, or -1 for a name that is not one.
 * The parts point into `name` (NUL-terminated copies in `buf`, cap bytes). */
int cql_resource_from_name(const char *name, struct cql_resource *r, char *buf,
			   size_t cap);

/* The resource one level up (a table's keyspace, a keyspace's <all
 * keyspaces>, ...); false at a root. */
bool cql_resource_parent(const struct cql_resource *r,
			 struct cql_resource *parent);

#endif
