import type { ApiEnv } from "./env.js";
import { type Authenticator, apiKeyAuthenticator } from "./middleware/auth.js";
import { type TenantLimiter, tenantLimiter } from "./middleware/tenant-limits.js";

/**
 * The rules every /v1 and /v2 request passes before its route, built once per process and
 * shared by Hono's middleware and the predict fast path: a tenant's limits count both paths.
 */
export interface Guards {
  authenticate: Authenticator;
  limit: TenantLimiter | undefined;
}

export function guardsFrom(env: ApiEnv): Guards {
  const keys = (env.API_KEYS ?? "")
    .split(",")
    .map((k) => k.trim())
    .filter(Boolean);
  return {
    authenticate: apiKeyAuthenticator(keys, env.ADMIN_TOKEN),
    limit: tenantLimiter({
      ratePerS: env.KEY_RATE_LIMIT_RPS,
      burst: env.KEY_RATE_BURST,
      maxConcurrent: env.KEY_MAX_CONCURRENT,
    }),
  };
}
