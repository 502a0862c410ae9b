/* The key table behind conf.c; private to conf/. */
#ifndef CASSINI_CONF_CONF_INTERNAL_H
#define CASSINI_CONF_CONF_INTERNAL_H

#include "conf/conf.h"

#include <stddef.h>

enum conf_type {
	CONF_T_STRING,    /* char * */
	CONF_T_PATH,      /* char *, resolved against the node home */
	CONF_T_BOOL,      /* bool */
	CONF_T_INT,       /* int64_t in [min, max] */
	CONF_T_DOUBLE,    /* double in [min, max] */
	CONF_T_DURATION,  /* uint64_t milliseconds in [min, max] */
	CONF_T_SIZE,      /* uint64_t bytes in [min, max] */
	CONF_T_RATE,      /* uint64_t bytes per second in [min, max] */
	CONF_T_ENUM,      /* int64_t value from enum_names */
	CONF_T_LIST,      /* struct conf_string_list */
	CONF_T_PATH_LIST, /* struct conf_string_list of paths */
	CONF_T_HOST,      /* struct inet_addr, address only */
	CONF_T_SEEDS,     /* seed_provider section -> char *seed_list */
};

struct conf_enum_name {
	const char *name;
	int value;
};

struct conf_key {
	const char *name;
	enum conf_type type;
	size_t offset;
	const char *default_text; /* parsed with the same code as the file */
	double min;
	double max;
	const struct conf_enum_name *enum_names; /* {NULL} ends, CONF_T_ENUM */
	const char *doc;
};

extern const struct conf_key conf_keys[];
extern const size_t conf_keys_count;

#endif
