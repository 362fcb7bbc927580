/* first_members.c - the members a new process of the host starts with,
 * for a tool that runs once (replicalbctl): the session's rule for a
 * process's first answer (rlb_shared_answer_use(), design.md §15.6),
 * taken to its end at once, since such a tool has no later. */
#include "config.h"

#include <limits.h>
#include <stdlib.h>

#include "session/session.h"

/* c's first members into f, from dir's shared answer or dns. */
static int first_of(struct rlb_cluster *c, const char *dir,
		    const struct rlb_dns_client *dns,
		    struct rlb_first_members *f)
{
	struct rlb_shared_answer sh;
	struct rlb_members_answer a;
	enum rlb_shared_use use;

	f->shared_age_ms = f->skipped_age_ms = -1;
	f->dns_failed = false;
	rlb_membership_init(&f->ms, c);
	/* A look: a damaged answer is the next process's to set aside. */
	rlb_members_shared_read(
		dir, c->name,
		rlb_members_shared_key(c->name_hash, c->srv, c->dns), false,
		&sh);
	use = rlb_shared_answer_use(&sh, c, 0, false);
	if (use == RLB_SHARED_FRESH) {
		f->shared_age_ms = sh.age_ms < 0 ? 0 : sh.age_ms;
		rlb_membership_adopt(&f->ms, c, &sh.a, rlb_monotonic_ms(),
				     sh.age_ms);
		return 0;
	}
	/* A process would answer with a stale one at once and ask DNS in
	 * the background: here the answer DNS gives, unless it gives none. */
	if (rlb_members_ask(c, dns, INT64_MAX, &a) < 0) {
		rlb_members_answer_free(&sh.a);
		return -1;
	}
	if (use == RLB_SHARED_STALE && a.outcome == RLB_DNS_FAILED) {
		rlb_members_answer_free(&a);
		f->shared_age_ms = sh.age_ms < 0 ? 0 : sh.age_ms;
		f->dns_failed = true;
		rlb_membership_adopt(&f->ms, c, &sh.a, rlb_monotonic_ms(),
				     sh.age_ms);
		return 0;
	}
	if (sh.ok)
		f->skipped_age_ms = sh.age_ms;
	rlb_members_answer_free(&sh.a);
	rlb_membership_apply(&f->ms, c, &a, rlb_monotonic_ms());
	return 0;
}

struct rlb_first_members *
rlb_session_first_members(struct rlb_config *cfg,
			  const struct rlb_dns_client *dns, size_t *n)
{
	struct rlb_first_members *out;
	char dir[PATH_MAX];
	size_t want = 0;

	*n = 0;
	for (size_t i = 0; i < cfg->nclusters; i++)
		want += cfg->clusters[i].srv || cfg->clusters[i].dns;
	out = calloc(want ? want : 1, sizeof(*out));
	if (!out)
		return NULL;
	rlb_health_state_dir(cfg, dir, sizeof(dir));
	for (size_t i = 0; i < cfg->nclusters; i++) {
		struct rlb_cluster *c = &cfg->clusters[i];

		if (!c->srv && !c->dns)
			continue;
		if (first_of(c, dir, dns ? dns : &rlb_dns_stub, &out[*n]) < 0)
			goto nomem;
		(*n)++;
		if (rlb_members_add(c, &out[*n - 1].ms) < 0)
			goto nomem;
	}
	return out;
nomem:
	rlb_session_first_members_free(out, *n);
	*n = 0;
	return NULL;
}

void rlb_session_first_members_free(struct rlb_first_members *f, size_t n)
{
	for (size_t i = 0; f && i < n; i++)
		rlb_membership_clear(&f[i].ms);
	free(f);
}
