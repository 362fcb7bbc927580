/* bench_select.c - nanoseconds per rlb_select() over 3 and 1,000 replicas,
 * with health in a real shared state segment. */
#include "config.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"

#define RUNS	       9       /* median of this many timed runs */
#define TARGET_3_NS    1000.0  /* one selection over 3 replicas < 1 us */
#define TARGET_1000_NS 50000.0 /* over 1,000 replicas < 50 us */

struct bench_case {
	const char *label;
	enum rlb_policy policy;
	size_t n;
	long iterations; /* selections per timed run */
	double target_ns;
	bool peek;
};

/*
 * Add errors at the cluster's current decay time T, where no decay is
 * owed: for tests of other behaviour than the decay refinement.
 */
static void add_errors(struct rlb_cluster *c, size_t i, uint64_t n)
{
	rlb_health_add_errors(c, i, n, rlb_health_decay_time(c));
}

static const struct bench_case cases[] = {
	{"nearest_hostname", RLB_POLICY_NEAREST_HOSTNAME, 3, 200000,
	 TARGET_3_NS, false},
	{"random", RLB_POLICY_RANDOM, 3, 200000, TARGET_3_NS, false},
	{"round_robin", RLB_POLICY_ROUND_ROBIN, 3, 200000, TARGET_3_NS, false},
	{"in_order (peek)", RLB_POLICY_IN_ORDER, 3, 200000, TARGET_3_NS, true},
	{"least_request", RLB_POLICY_LEAST_REQUEST, 3, 200000, TARGET_3_NS,
	 false},
	{"nearest_hostname", RLB_POLICY_NEAREST_HOSTNAME, 1000, 2000,
	 TARGET_1000_NS, false},
	{"hostname_levenshtein_distance", RLB_POLICY_LEVENSHTEIN, 1000, 2000,
	 TARGET_1000_NS, false},
	{"random", RLB_POLICY_RANDOM, 1000, 2000, TARGET_1000_NS, false},
	{"round_robin", RLB_POLICY_ROUND_ROBIN, 1000, 2000, TARGET_1000_NS,
	 false},
	{"in_order (peek)", RLB_POLICY_IN_ORDER, 1000, 2000, TARGET_1000_NS,
	 true},
	{"least_request", RLB_POLICY_LEAST_REQUEST, 1000, 2000, TARGET_1000_NS,
	 false},
	{"random", RLB_POLICY_RANDOM, RLB_MAX_REPLICAS, 500, 0, false},
};

#define NCASES	   (sizeof(cases) / sizeof(cases[0]))
#define LOCAL_HOST "ch-017-2.dc2.example.net"

static double clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	return remove(path);
}

/* A config with one cluster per case, names like the real ones. */
static struct rlb_config *build_config(const char *dir)
{
	struct rlb_config *cfg = calloc(1, sizeof(*cfg));

	if (!cfg)
		return NULL;
	cfg->state_dir = strdup(dir);
	cfg->nclusters = NCASES;
	cfg->clusters = calloc(NCASES, sizeof(*cfg->clusters));
	if (!cfg->state_dir || !cfg->clusters)
		return NULL;
	for (size_t k = 0; k < NCASES; k++) {
		struct rlb_cluster *c = &cfg->clusters[k];
		char name[64];

		snprintf(name, sizeof(name), "bench%zu-%d.cluster", k,
			 (int)getpid());
		c->name = strdup(name);
		c->name_hash = rlb_hash64(name, strlen(name), 0);
		c->s.load_balancing = cases[k].policy;
		c->s.half_life = 60;
		c->s.least_request_choices = 2;
		c->s.least_request_bias = 1.0;
		c->s.error_cap = 1000;
		c->nreplicas = cases[k].n;
		c->replicas = calloc(c->nreplicas, sizeof(*c->replicas));
		if (!c->name || !c->replicas)
			return NULL;
		for (size_t i = 0; i < c->nreplicas; i++) {
			char host[RLB_MAX_HOST + 1];

			snprintf(host, sizeof(host),
				 "ch-%03zu-%zu.dc%zu.example.net", i / 3,
				 i % 3 + 1, i % 4 + 1);
			c->replicas[i].host = strdup(host);
			c->replicas[i].priority = 1;
			c->replicas[i].identity =
				rlb_hash64(host, strlen(host), 0);
			if (!c->replicas[i].host)
				return NULL;
		}
		c->view = calloc(1, sizeof(*c->view));
		if (!c->view || rlb_view_build(c->view, c, LOCAL_HOST) < 0)
			return NULL;
	}
	return cfg;
}

static void free_config(struct rlb_config *cfg)
{
	for (size_t k = 0; k < cfg->nclusters; k++) {
		struct rlb_cluster *c = &cfg->clusters[k];

		rlb_health_detach(c->health);
		for (size_t i = 0; i < c->nreplicas; i++)
			free(c->replicas[i].host);
		free(c->replicas);
		if (c->view)
			rlb_view_free(c->view);
		free(c->view);
		free(c->name);
	}
	free(cfg->clusters);
	free(cfg->state_dir);
	free(cfg);
}

/*
 * Median ns per selection over RUNS runs, in wall time and in this
 * thread's CPU time (which leaves out time spent descheduled on a busy
 * machine); *sink keeps the work alive.
 */
static void run_case(struct rlb_cluster *c, const struct bench_case *bc,
		     struct rlb_selection *sel, volatile uint64_t *sink,
		     double *wall_ns, double *cpu_ns)
{
	double wall[RUNS], cpu[RUNS];

	/* Warm up caches, the state file's pages and the random source. */
	for (long i = 0; i < bc->iterations / 10 + 1; i++)
		rlb_select(c, bc->peek, rlb_now(), sel);
	for (int r = 0; r < RUNS; r++) {
		double w0 = clock_ns(CLOCK_MONOTONIC);
		double c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);

		for (long i = 0; i < bc->iterations; i++) {
			rlb_select(c, bc->peek, rlb_now(), sel);
			*sink += sel->order[0];
		}
		cpu[r] = (clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) /
			 (double)bc->iterations;
		wall[r] = (clock_ns(CLOCK_MONOTONIC) - w0) /
			  (double)bc->iterations;
	}
	qsort(wall, RUNS, sizeof(*wall), cmp_double);
	qsort(cpu, RUNS, sizeof(*cpu), cmp_double);
	*wall_ns = wall[RUNS / 2];
	*cpu_ns = cpu[RUNS / 2];
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	char tmpl[4096];
	struct rlb_config *cfg;
	bool check = argc > 1 && strcmp(argv[1], "--check") == 0;
	bool missed = false;
	volatile uint64_t sink = 0;

	if (argc > 1 && !check) {
		fprintf(stderr, "usage: %s [--check]\n", argv[0]);
		return 2;
	}
	snprintf(tmpl, sizeof(tmpl), "%s/rlb-bench-select-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(tmpl)) {
		perror("mkdtemp");
		return 1;
	}
	cfg = build_config(tmpl);
	if (!cfg) {
		fprintf(stderr, "bench_select: out of memory\n");
		return 1;
	}
	rlb_health_attach_all(cfg, RLB_STATE_COUNT, false);

	printf("bench_select: ns per rlb_select() incl. rlb_now(), median of "
	       "%d runs\n",
	       RUNS);
	printf("state file: %s\n", rlb_health_path(cfg->clusters[0].health));
	printf("%-30s %5s %9s %11s %10s %8s\n", "policy", "N", "iters/run",
	       "wall ns", "cpu ns", "target");
	for (size_t k = 0; k < NCASES; k++) {
		const struct bench_case *bc = &cases[k];
		struct rlb_cluster *c = &cfg->clusters[k];
		struct rlb_selection *sel = rlb_selection_new(c->nreplicas);
		double ns, cpu;

		if (!sel) {
			fprintf(stderr, "bench_select: out of memory\n");
			return 1;
		}
		/* A few replicas with errors, as in a real cluster. */
		add_errors(c, 0, 3);
		add_errors(c, c->nreplicas - 1, 1);
		run_case(c, bc, sel, &sink, &ns, &cpu);
		printf("%-30s %5zu %9ld %11.1f %10.1f", bc->label, bc->n,
		       bc->iterations, ns, cpu);
		if (bc->target_ns > 0) {
			bool ok = ns < bc->target_ns;

			printf(" %8.0f %s\n", bc->target_ns,
			       ok ? "ok" : "MISSED");
			missed |= !ok;
		} else {
			printf(" %8s\n", "-");
		}
		free(sel);
	}
	free_config(cfg);
	/* The segments outlive the directory that names them. */
	rlb_health_remove_state(&(struct rlb_config){.state_dir = tmpl}, true,
				NULL);
	nftw(tmpl, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return check && missed ? 1 : 0;
}
