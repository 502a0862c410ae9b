/* Permissions and resources (see cql_resource.h). */
#include "client/cql/cql_resource.h"

#include <stdio.h>
#include <string.h>

static const char *const perm_names[] = {
	"CREATE", "ALTER",     "DROP",     "SELECT",
	"MODIFY", "AUTHORIZE", "DESCRIBE", "EXECUTE",
};

#define DATA_ALL                                                               \
	(CQL_PERM_CREATE | CQL_PERM_ALTER | CQL_PERM_DROP | CQL_PERM_SELECT |  \
	 CQL_PERM_MODIFY | CQL_PERM_AUTHORIZE)
#define ROLE_ALL                                                               \
	(CQL_PERM_CREATE | CQL_PERM_ALTER | CQL_PERM_DROP |                    \
	 CQL_PERM_AUTHORIZE | CQL_PERM_DESCRIBE)
#define FUNCTION_ALL                                                           \
	(CQL_PERM_CREATE | CQL_PERM_ALTER | CQL_PERM_DROP |                    \
	 CQL_PERM_AUTHORIZE | CQL_PERM_EXECUTE)
#define MBEAN_ALL                                                              \
	(CQL_PERM_AUTHORIZE | CQL_PERM_DESCRIBE | CQL_PERM_EXECUTE |           \
	 CQL_PERM_MODIFY | CQL_PERM_SELECT)

uint32_t cql_resource_applicable(const struct cql_resource *r)
{
	switch (r->kind) {
	case CQL_RES_ALL_KEYSPACES:
	case CQL_RES_KEYSPACE:
		return DATA_ALL;
	case CQL_RES_TABLE: /* created before any grant on it */
		return DATA_ALL & ~CQL_PERM_CREATE;
	case CQL_RES_ALL_ROLES:
		return ROLE_ALL;
	case CQL_RES_ROLE:
		return CQL_PERM_ALTER | CQL_PERM_DROP | CQL_PERM_AUTHORIZE;
	case CQL_RES_ALL_FUNCTIONS:
	case CQL_RES_KEYSPACE_FUNCTIONS:
		return FUNCTION_ALL;
	case CQL_RES_FUNCTION:
		return FUNCTION_ALL & ~CQL_PERM_CREATE;
	case CQL_RES_ALL_MBEANS:
	case CQL_RES_MBEAN:
		return MBEAN_ALL;
	case CQL_RES_NONE:
		break;
	}
	return 0;
}

const char *cql_permission_name(uint32_t bit)
{
	for (size_t i = 0; i < sizeof(perm_names) / sizeof(*perm_names); i++)
		if (bit == 1u << i)
			return perm_names[i];
	return NULL;
}

uint32_t cql_permission_parse(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(perm_names) / sizeof(*perm_names); i++)
		if (strlen(perm_names[i]) == len &&
		    memcmp(perm_names[i], name, len) == 0)
			return 1u << i;
	return 0;
}

static int fit(int n, size_t cap)
{
	return n < 0 || (size_t)n >= cap ? -1 : n;
}

int cql_resource_name(const struct cql_resource *r, char *out, size_t cap)
{
	const char *ks = r->keyspace, *n = r->name;
	switch (r->kind) {
	case CQL_RES_ALL_KEYSPACES:
		return fit(snprintf(out, cap, "data"), cap);
	case CQL_RES_KEYSPACE:
		return ks ? fit(snprintf(out, cap, "data/%s", ks), cap) : -1;
	case CQL_RES_TABLE:
		return ks && n ? fit(snprintf(out, cap, "data/%s/%s", ks, n),
				     cap)
			       : -1;
	case CQL_RES_ALL_ROLES:
		return fit(snprintf(out, cap, "roles"), cap);
	case CQL_RES_ROLE:
		return n ? fit(snprintf(out, cap, "roles/%s", n), cap) : -1;
	case CQL_RES_ALL_FUNCTIONS:
		return fit(snprintf(out, cap, "functions"), cap);
	case CQL_RES_KEYSPACE_FUNCTIONS:
		return ks ? fit(snprintf(out, cap, "functions/%s", ks), cap)
			  : -1;
	case CQL_RES_FUNCTION:
		return ks && n ? fit(snprintf(out, cap, "functions/%s/%s", ks,
					      n),
				     cap)
			       : -1;
	case CQL_RES_ALL_MBEANS:
		return fit(snprintf(out, cap, "mbean"), cap);
	case CQL_RES_MBEAN:
		return n ? fit(snprintf(out, cap, "mbean/%s", n), cap) : -1;
	case CQL_RES_NONE:
		break;
	}
	return -1;
}

int cql_resource_display(const struct cql_resource *r, char *out, size_t cap)
{
	const char *ks = r->keyspace ? r->keyspace : "",
		   *n = r->name ? r->name : "";
	switch (r->kind) {
	case CQL_RES_ALL_KEYSPACES:
		return fit(snprintf(out, cap, "<all keyspaces>"), cap);
	case CQL_RES_KEYSPACE:
		return fit(snprintf(out, cap, "<keyspace %s>", ks), cap);
	case CQL_RES_TABLE:
		return fit(snprintf(out, cap, "<table %s.%s>", ks, n), cap);
	case CQL_RES_ALL_ROLES:
		return fit(snprintf(out, cap, "<all roles>"), cap);
	case CQL_RES_ROLE:
		return fit(snprintf(out, cap, "<role %s>", n), cap);
	case CQL_RES_ALL_FUNCTIONS:
		return fit(snprintf(out, cap, "<all functions>"), cap);
	case CQL_RES_KEYSPACE_FUNCTIONS:
		return fit(snprintf(out, cap, "<all functions in %s>", ks),
			   cap);
	case CQL_RES_FUNCTION:
		return fit(snprintf(out, cap, "<function %s.%s>", ks, n), cap);
	case CQL_RES_ALL_MBEANS:
		return fit(snprintf(out, cap, "<all mbeans>"), cap);
	case CQL_RES_MBEAN:
		return fit(snprintf(out, cap, "<mbean %s>", n), cap);
	case CQL_RES_NONE:
		break;
	}
	return -1;
}

/* Copies [s, s+len) into buf at *used; NULL when it does not fit. */
static const char *part(const char *s, size_t len, char *buf, size_t cap,
			size_t *used)
{
	if (*used + len + 1 > cap)
		return NULL;
	char *d = buf + *used;
	memcpy(d, s, len);
	d[len] = '\0';
	*used += len + 1;
	return d;
}

int cql_resource_from_name(const char *name, struct cql_resource *r, char *buf,
			   size_t cap)
{
	memset(r, 0, sizeof(*r));
	static const struct {
		const char *root;
		enum cql_resource_kind all, one, two;
	} roots[] = {
		{"data", CQL_RES_ALL_KEYSPACES, CQL_RES_KEYSPACE,
		 CQL_RES_TABLE},
		{"roles", CQL_RES_ALL_ROLES, CQL_RES_ROLE, CQL_RES_NONE},
		{"functions", CQL_RES_ALL_FUNCTIONS, CQL_RES_KEYSPACE_FUNCTIONS,
		 CQL_RES_FUNCTION},
		{"mbean", CQL_RES_ALL_MBEANS, CQL_RES_MBEAN, CQL_RES_NONE},
	};
	for (size_t i = 0; i < sizeof(roots) / sizeof(*roots); i++) {
		size_t rl = strlen(roots[i].root);
		if (strncmp(name, roots[i].root, rl) != 0)
			continue;
		const char *rest = name + rl;
		if (*rest == '\0') {
			r->kind = roots[i].all;
			return 0;
		}
		if (*rest != '/' || rest[1] == '\0')
			return -1;
		rest++;
		size_t used = 0;
		/* a role's and an mbean's name may hold '/' */
		const char *slash =
			roots[i].two == CQL_RES_NONE ? NULL : strchr(rest, '/');
		if (!slash) {
			const char *p =
				part(rest, strlen(rest), buf, cap, &used);
			if (!p)
				return -1;
			r->kind = roots[i].one;
			if (r->kind == CQL_RES_ROLE || r->kind == CQL_RES_MBEAN)
				r->name = p;
			else
				r->keyspace = p;
			return 0;
		}
		if (slash == rest || slash[1] == '\0')
			return -1;
		r->kind = roots[i].two;
		r->keyspace =
			part(rest, (size_t)(slash - rest), buf, cap, &used);
		r->name = part(slash + 1, strlen(slash + 1), buf, cap, &used);
		return r->keyspace && r->name ? 0 : -1;
	}
	return -1;
}

bool cql_resource_parent(const struct cql_resource *r,
			 struct cql_resource *parent)
{
	*parent = (struct cql_resource){.kind = CQL_RES_NONE};
	switch (r->kind) {
	case CQL_RES_KEYSPACE:
		parent->kind = CQL_RES_ALL_KEYSPACES;
		return true;
	case CQL_RES_TABLE:
		parent->kind = CQL_RES_KEYSPACE;
		parent->keyspace = r->keyspace;
		return true;
	case CQL_RES_ROLE:
		parent->kind = CQL_RES_ALL_ROLES;
		return true;
	case CQL_RES_KEYSPACE_FUNCTIONS:
		parent->kind = CQL_RES_ALL_FUNCTIONS;
		return true;
	case CQL_RES_FUNCTION:
		parent->kind = CQL_RES_KEYSPACE_FUNCTIONS;
		parent->keyspace = r->keyspace;
		return true;
	case CQL_RES_MBEAN:
		parent->kind = CQL_RES_ALL_MBEANS;
		return true;
	default:
		return false;
	}
}
