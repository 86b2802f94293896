import type { ApiEnv } from "./env.js";
import { TurnShare } from "./http/turn-share.js";
import { type Authenticator, apiKeyAuthenticator } from "./middleware/auth.js";
import { BodyRateLimiter } from "./middleware/key-body-rate.js";
import { type TenantLimiter, tenantLimiter } from "./middleware/tenant-limits.js";

/**
 * How long a turn may run, from its first admitted sync request, before the next ones wait
 * for a later turn (see TurnShare): ~50 predicts on the development VM.
 */
const TURN_SLICE_MS = 10;

/**
 * The rules every /v1 and /v2 request passes before its route, built once per process and
 * shared by Hono's middleware and the predict fast path: a tenant's limits count both paths,
 * and admitted requests of both wait in one turn share.
 */
export interface Guards {
  authenticate: Authenticator;
  limit: TenantLimiter | undefined;
  /** Large bodies a tenant may send a second (KEY_BODY_BYTES_PER_S); undefined: no limit. */
  bodyRate: BodyRateLimiter | undefined;
  /** Where an admitted sync request waits, when the turn is full, before its body is parsed. */
  turns: TurnShare;
}

export function guardsFrom(env: ApiEnv): Guards {
  const keys = (env.API_KEYS ?? "")
    .split(",")
    .map((k) => k.trim())
    .filter(Boolean);
  return {
    authenticate: apiKeyAuthenticator(keys, env.ADMIN_TOKEN, env.KEY_MAX_PRIORITY),
    limit: tenantLimiter({
      ratePerS: env.KEY_RATE_LIMIT_RPS,
      burst: env.KEY_RATE_BURST,
      maxConcurrent: env.KEY_MAX_CONCURRENT,
    }),
    bodyRate:
      env.KEY_BODY_BYTES_PER_S > 0
        ? new BodyRateLimiter({
            bytesPerS: env.KEY_BODY_BYTES_PER_S,
            burst: 2 * env.MAX_BODY_BYTES,
          })
        : undefined,
    turns: new TurnShare(TURN_SLICE_MS),
  };
}
