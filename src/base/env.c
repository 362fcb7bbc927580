/* env.c - every environment variable replicalb reads, in one table: the
 * loader, the runtime, replicalbctl and the docs (design.md §2.6) go by
 * it, and tests/integration/cli.sh checks the docs against it. */
#include "config.h"

#include <stdlib.h>
#include <sys/auxv.h>

#include "base/base.h"

const struct rlb_env_var rlb_env_vars[RLB_ENV_COUNT] = {
	[RLB_ENV_CONFIG] = {"REPLICALB_CONFIG", "the main config file"},
	[RLB_ENV_APP] = {"REPLICALB_APP", "the per-application overlay name"},
	[RLB_ENV_LOAD_BALANCING] = {"REPLICALB_LOAD_BALANCING",
				    "the policy of every cluster"},
	[RLB_ENV_CONNECT_FAILOVER] = {"REPLICALB_CONNECT_FAILOVER",
				      "not 0: connect_failover for every "
				      "cluster"},
	[RLB_ENV_HOSTNAME] = {"REPLICALB_HOSTNAME",
			      "the local hostname of every cluster"},
	[RLB_ENV_STATE_DIR] = {"REPLICALB_STATE_DIR", "the state directory"},
	[RLB_ENV_LOG_LEVEL] = {"REPLICALB_LOG_LEVEL", "the log level"},
	[RLB_ENV_DISABLE] = {"REPLICALB_DISABLE",
			     "not 0: the library passes everything through"},
	[RLB_ENV_LIBRARY] = {"REPLICALB_LIBRARY",
			     "the wrapper's library to preload"},
	[RLB_ENV_XDG_RUNTIME_DIR] = {"XDG_RUNTIME_DIR",
				     "the default state directory's parent"},
	[RLB_ENV_HOME] = {"HOME", "the fallback state directory's home "
				  "(~/.cache/replicalb)"},
};

bool rlb_secure_mode(void)
{
	return getauxval(AT_SECURE) != 0;
}

const char *rlb_env(enum rlb_env_id id)
{
	const char *v = secure_getenv(rlb_env_vars[id].name);

	return v && *v ? v : NULL;
}
