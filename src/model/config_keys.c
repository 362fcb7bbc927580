/* config_keys.c - every key a config may write, in one table (design.md
 * §2.2): where it may stand, how its value is read and stored, its
 * built-in value; and the merges of config_load.c, by key. */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "model/config_internal.h"

#define SETTING(f) offsetof(struct rlb_settings, f)
#define CONFIG(f)  offsetof(struct rlb_config, f)
#define CLUSTER(f) offsetof(struct rlb_cluster, f)
#define REPLICA(f) offsetof(struct rlb_replica, f)

/*
 * Every key, for reading values, "did you mean" hints and scope errors.
 * A hint is the first of the closest rlb_cfg_keys valid where the wrong one
 * stands, so the order matters a little. A cluster's local_hostname is
 * not a copy of the top level's: NULL there means the top level's.
 */
const struct key rlb_cfg_keys[] = {
	{"name", RLB_SCOPE_CLUSTER, RLB_TYPE_NAME, 0, 0, 0},
	{"replicas", RLB_SCOPE_CLUSTER, RLB_TYPE_REPLICAS, 0, 0, 0},
	{"srv", RLB_SCOPE_CLUSTER, RLB_TYPE_DNSNAME, CLUSTER(srv), 0, 0},
	{"dns", RLB_SCOPE_CLUSTER, RLB_TYPE_DNSNAME, CLUSTER(dns), 0, 0},
	{"port", RLB_SCOPE_CLUSTER, RLB_TYPE_PORT, CLUSTER(port), 0, 0},
	{"load_balancing", RLB_SCOPE_BOTH, RLB_TYPE_POLICY,
	 SETTING(load_balancing), RLB_POLICY_RANDOM, 0},
	{"load_balancing_first_offset", RLB_SCOPE_BOTH, RLB_TYPE_COUNT,
	 SETTING(first_offset), 0, 0},
	{"load_balancing_least_request_choice_count", RLB_SCOPE_BOTH,
	 RLB_TYPE_COUNT, SETTING(least_request_choices), 2, 1},
	{"load_balancing_least_request_active_request_bias", RLB_SCOPE_BOTH,
	 RLB_TYPE_REAL, SETTING(least_request_bias), 1, 0},
	{"distributed_replica_error_half_life", RLB_SCOPE_BOTH, RLB_TYPE_COUNT,
	 SETTING(half_life), 60, 0},
	{"distributed_replica_error_cap", RLB_SCOPE_BOTH, RLB_TYPE_COUNT,
	 SETTING(error_cap), 1000, 0},
	{"distributed_replica_max_ignored_errors", RLB_SCOPE_BOTH,
	 RLB_TYPE_COUNT, SETTING(max_ignored_errors), 0, 0},
	{"local_hostname", RLB_SCOPE_TOP, RLB_TYPE_HOSTNAME,
	 CONFIG(local_hostname), 0, 0},
	{"dns_cache_ttl", RLB_SCOPE_BOTH, RLB_TYPE_COUNT,
	 SETTING(dns_cache_ttl), 15, 0},
	{"connect_timeout_ms", RLB_SCOPE_BOTH, RLB_TYPE_COUNT,
	 SETTING(connect_timeout_ms), 1000, 0},
	{"dns_hold_nx", RLB_SCOPE_BOTH, RLB_TYPE_COUNT, SETTING(dns_hold_nx),
	 30, 0},
	/* The floor keeps a TTL-0 source (Consul) from being asked at every
	 * resolution; 10 ms keeps a test's churn from spinning. */
	{"dns_refresh_floor_ms", RLB_SCOPE_BOTH, RLB_TYPE_COUNT,
	 SETTING(dns_refresh_floor_ms), 1000, 10},
	{"local_hostname", RLB_SCOPE_CLUSTER, RLB_TYPE_HOSTNAME,
	 CLUSTER(local_hostname), 0, 0},
	{"connect_failover", RLB_SCOPE_BOTH, RLB_TYPE_BOOL,
	 SETTING(connect_failover), false, 0},
	{"use_hedged_requests", RLB_SCOPE_BOTH, RLB_TYPE_BOOL,
	 SETTING(use_hedged_requests), true, 0},
	{"hedged_connection_timeout_ms", RLB_SCOPE_BOTH, RLB_TYPE_COUNT,
	 SETTING(hedged_connection_timeout_ms), 50, 1},
	/* The prober's HTTP check (design.md §6.1): the path is a
	 * cluster's alone; the read timeout may be set for all. */
	{"health_check_path", RLB_SCOPE_CLUSTER, RLB_TYPE_URL_PATH,
	 CLUSTER(health_path), 0, 0},
	{"health_check_port", RLB_SCOPE_CLUSTER, RLB_TYPE_PORT,
	 CLUSTER(health_port), 0, 0},
	{"health_check_timeout_ms", RLB_SCOPE_BOTH, RLB_TYPE_COUNT,
	 SETTING(health_check_timeout_ms), 1000, 1},
	{"state_dir", RLB_SCOPE_TOP, RLB_TYPE_PATH, CONFIG(state_dir), 0, 0},
	{"log_level", RLB_SCOPE_TOP, RLB_TYPE_LOG_LEVEL, CONFIG(log_level),
	 RLB_LOG_WARNING, 0},
	{"log_target", RLB_SCOPE_TOP, RLB_TYPE_LOG_TARGET, CONFIG(log_target),
	 RLB_LOG_STDERR, 0},
	{"clusters", RLB_SCOPE_TOP, RLB_TYPE_CLUSTERS, 0, 0, 0},
	{"host", RLB_SCOPE_REPLICA, RLB_TYPE_HOST, 0, 0, 0},
	{"port", RLB_SCOPE_REPLICA, RLB_TYPE_PORT, REPLICA(port), 0, 0},
	{"priority", RLB_SCOPE_REPLICA, RLB_TYPE_COUNT, REPLICA(priority), 1,
	 0},
	{"address", RLB_SCOPE_REPLICA, RLB_TYPE_ADDRESS, 0, 0, 0},
};

const size_t rlb_cfg_nkeys = sizeof(rlb_cfg_keys) / sizeof(*rlb_cfg_keys);
_Static_assert(sizeof(rlb_cfg_keys) / sizeof(*rlb_cfg_keys) <= 64,
	       "a given mask has a bit per key");

/* The bit of key k in `given` masks. */
uint64_t rlb_cfg_key_bit(const struct key *k)
{
	return (uint64_t)1 << (k - rlb_cfg_keys);
}

/* The key called name that may stand at level `here`, or NULL. */
const struct key *rlb_cfg_key_find(const char *name, enum key_scope here)
{
	for (const struct key *k = rlb_cfg_keys;
	     k < rlb_cfg_keys + rlb_cfg_nkeys; k++) {
		if ((k->scope & here) && strcmp(k->name, name) == 0)
			return k;
	}
	return NULL;
}

/* Key i of the table when of scope *here, for rlb_closest_word(). */
static const char *key_of_scope(void *here, size_t i)
{
	const struct key *k = &rlb_cfg_keys[i];

	return (k->scope & *(enum key_scope *)here) ? k->name : NULL;
}

/*
 * The closest valid key of level `here` to a wrong one, or NULL if none
 * is close: one that starts with it ("prio"), else the nearest within an
 * edit distance of 2 or a third of its length.
 */
const char *rlb_cfg_suggest_key(const char *name, enum key_scope here)
{
	return rlb_closest_word(name, key_of_scope, &here, rlb_cfg_nkeys,
				false);
}

/* Where the value of key k lives in base, a struct of level `here`. */
void *rlb_cfg_value_at(void *base, enum key_scope here, const struct key *k)
{
	if (k->scope == RLB_SCOPE_BOTH && here == RLB_SCOPE_TOP)
		base = &((struct rlb_config *)base)->defaults;
	else if (k->scope == RLB_SCOPE_BOTH)
		base = &((struct rlb_cluster *)base)->s;
	return (char *)base + k->off;
}

bool rlb_cfg_is_string(enum key_type t)
{
	return t == RLB_TYPE_HOSTNAME || t == RLB_TYPE_PATH ||
	       t == RLB_TYPE_URL_PATH || t == RLB_TYPE_DNSNAME;
}

/* Bytes of a value of each type; 0 for structure. */
static const size_t value_size[RLB_NTYPES] = {
	[RLB_TYPE_POLICY] = sizeof(enum rlb_policy),
	[RLB_TYPE_COUNT] = sizeof(int64_t),
	[RLB_TYPE_REAL] = sizeof(double),
	[RLB_TYPE_BOOL] = sizeof(bool),
	[RLB_TYPE_PORT] = sizeof(int),
	[RLB_TYPE_HOSTNAME] = sizeof(char *),
	[RLB_TYPE_PATH] = sizeof(char *),
	[RLB_TYPE_URL_PATH] = sizeof(char *),
	[RLB_TYPE_DNSNAME] = sizeof(char *),
	[RLB_TYPE_LOG_LEVEL] = sizeof(enum rlb_log_level),
	[RLB_TYPE_LOG_TARGET] = sizeof(enum rlb_log_target),
};

/* Store v as a value of type t (a number, enum or bool) at dst. */
void rlb_cfg_store(enum key_type t, void *dst, int64_t v)
{
	switch (t) {
	case RLB_TYPE_POLICY:
		*(enum rlb_policy *)dst = (enum rlb_policy)v;
		break;
	case RLB_TYPE_COUNT:
		*(int64_t *)dst = v;
		break;
	case RLB_TYPE_REAL:
		*(double *)dst = (double)v;
		break;
	case RLB_TYPE_BOOL:
		*(bool *)dst = v != 0;
		break;
	case RLB_TYPE_PORT:
		*(int *)dst = (int)v;
		break;
	case RLB_TYPE_LOG_LEVEL:
		*(enum rlb_log_level *)dst = (enum rlb_log_level)v;
		break;
	case RLB_TYPE_LOG_TARGET:
		*(enum rlb_log_target *)dst = (enum rlb_log_target)v;
		break;
	default:
		break; /* strings start NULL; structure has no value */
	}
}

/*
 * The built-in value of every key of level `here` into base, except in
 * a cluster the settings, which come from the top level.
 */
void rlb_cfg_set_defaults(void *base, enum key_scope here)
{
	for (const struct key *k = rlb_cfg_keys;
	     k < rlb_cfg_keys + rlb_cfg_nkeys; k++) {
		if (!(k->scope & here) ||
		    (k->scope == RLB_SCOPE_BOTH && here != RLB_SCOPE_TOP))
			continue;
		rlb_cfg_store(k->type, rlb_cfg_value_at(base, here, k), k->def);
	}
}

/* Values by key, for config_load.c's merge. */

void rlb_cfg_defaults(struct rlb_config *cfg)
{
	rlb_cfg_set_defaults(cfg, RLB_SCOPE_TOP);
}

void rlb_cfg_overlay(struct rlb_config *cfg, struct rlb_cfg_layer *l)
{
	for (const struct key *k = rlb_cfg_keys;
	     k < rlb_cfg_keys + rlb_cfg_nkeys; k++) {
		void *dst = rlb_cfg_value_at(cfg, RLB_SCOPE_TOP, k);
		void *src = rlb_cfg_value_at(&l->top, RLB_SCOPE_TOP, k);

		if (!(l->given & rlb_cfg_key_bit(k)))
			continue;
		if (rlb_cfg_is_string(k->type))
			free(*(char **)dst);
		memcpy(dst, src, value_size[k->type]);
		if (rlb_cfg_is_string(k->type))
			*(char **)src = NULL;
	}
}

void rlb_cfg_inherit(struct rlb_cfg_cluster *pc,
		     const struct rlb_settings *defaults)
{
	struct rlb_settings own = pc->c.s;

	pc->c.s = *defaults;
	for (const struct key *k = rlb_cfg_keys;
	     k < rlb_cfg_keys + rlb_cfg_nkeys; k++) {
		if (k->scope == RLB_SCOPE_BOTH &&
		    (pc->given & rlb_cfg_key_bit(k)))
			memcpy((char *)&pc->c.s + k->off,
			       (const char *)&own + k->off,
			       value_size[k->type]);
	}
}
