import { randomUUID } from "node:crypto";
import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";
import { assertReady, guarded } from "../shared/redis-guard.js";

/** An answer as it was sent, to be sent again for a retry with the same key. */
export interface StoredAnswer {
  status: number;
  body: string;
  headers: Record<string, string>;
}

/**
 * What a request with an Idempotency-Key finds (draft-ietf-httpapi-idempotency-key-header):
 * the key free (claimed for it now), an earlier request's answer to replay, that request still
 * being accepted, or the key used with another payload.
 */
export type IdempotencyClaim =
  /**
   * Run it. `takeover`: an earlier attempt claimed the key and went quiet past the stale
   * time (its API replica died between the accept and the answer): what it made may exist.
   */
  | {
      kind: "claimed";
      takeover: boolean;
      /**
       * When the key's first request claimed it (epoch ms, as text), kept by a takeover: what
       * it creates is named by it, so the key used again once it expired creates anew. ""
       * for a claim an older version wrote.
       */
      since: string;
      /**
       * This attempt's own token on the claim: a takeover gives the key a new one, and only the
       * attempt holding it renews, answers, abandons or frees the key (one taken over from it,
       * still running, cannot overwrite the answer of the retry that took it).
       */
      attempt: string;
    }
  | { kind: "answered"; answer: StoredAnswer; fingerprint: string }
  | { kind: "in-progress" }
  | { kind: "reused" };

/** A fingerprint not known when the key is claimed (a body still streaming in). */
export const UNKNOWN_FINGERPRINT = "?";

// One round trip: look, compare, and claim a free (or abandoned) key in one step, so that of
// two retries racing, exactly one runs. An unknown fingerprint on either side is compared by
// the caller once its body is read.
const CLAIM = `
local raw = redis.call('GET', KEYS[1])
local now = tonumber(ARGV[2])
if raw then
  local rec = cjson.decode(raw)
  local known = rec.fp ~= '${UNKNOWN_FINGERPRINT}' and ARGV[1] ~= '${UNKNOWN_FINGERPRINT}'
  if known and rec.fp ~= ARGV[1] then return {'reused'} end
  if rec.state == 'answered' then return {'answered', raw} end
  if now - rec.at < tonumber(ARGV[4]) then return {'in-progress'} end
  rec.at = now
  rec.attempt = ARGV[5]
  redis.call('SET', KEYS[1], cjson.encode(rec), 'EX', ARGV[3])
  return {'takeover', rec.since or ''}
end
local rec = {state = 'pending', fp = ARGV[1], at = now, since = ARGV[2], attempt = ARGV[5]}
redis.call('SET', KEYS[1], cjson.encode(rec), 'EX', ARGV[3])
return {'claimed', ARGV[2]}
`;

// Whether the key is still the claim of attempt ARGV[1], pending: what an attempt writes to
// the key (its renewal, answer, abandoning or freeing) is taken only then.
const OWNED = `
local raw = redis.call('GET', KEYS[1])
if not raw then return false end
local rec = cjson.decode(raw)
if rec.state ~= 'pending' or (rec.attempt or '') ~= ARGV[1] then return false end
`;

// A claim still being worked on says so: its `at` moves on, while it is this attempt's and
// still pending (not abandoned), so no retry takes it over as abandoned.
const KEEP = `${OWNED}
if rec.at == 0 then return 0 end
rec.at = tonumber(ARGV[2])
redis.call('SET', KEYS[1], cjson.encode(rec), 'KEEPTTL')
return 1
`;

/** Writes ARGV[2] over the key (for ARGV[3] s), or deletes it when ARGV[2] is empty. */
const SETTLE = `${OWNED}
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3]) end
return 1
`;

interface StoredRecord {
  state: "pending" | "answered";
  fp: string;
  at: number;
  /** The first claim's time, as text (see `since` of a claim). */
  since?: string;
  /** The token of the attempt holding the claim (see `attempt` of a claim). */
  attempt?: string;
  answer?: StoredAnswer;
}

/**
 * Idempotency keys of the requests that create something (Stripe's `Idempotency-Key`): one
 * Redis key per client key, scoped to the caller's identity, holding a fingerprint of the
 * first request and, once it was answered, the answer for its retries to replay. Each key is
 * one slot, so it works the same on Redis Cluster. A request costs two round trips: the claim
 * and the answer.
 */
export class IdempotencyStore {
  private readonly claimScript: LuaCommand<string[]>;
  private readonly keepScript: LuaCommand<number>;
  private readonly settleScript: LuaCommand<number | null>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    /** How long an answer is replayed (IDEMPOTENCY_TTL_S). */
    private readonly ttlS: number,
    /**
     * How long a claim may go unanswered before a retry takes it over: past any accept's
     * time (a job's accept waits at most a few seconds for its replicas).
     */
    private readonly staleMs = 30_000,
  ) {
    this.claimScript = new LuaCommand(redis, "ferryIdempotencyClaim", 1, CLAIM);
    this.keepScript = new LuaCommand(redis, "ferryIdempotencyKeep", 1, KEEP);
    this.settleScript = new LuaCommand(redis, "ferryIdempotencySettle", 1, SETTLE);
  }

  /**
   * Keeps a claim from going stale while its request is still running (an upload streaming
   * for minutes, say): its time is renewed every third of the stale time until the returned
   * function is called. Without it, a retry 30 s into a long upload took the claim over as
   * abandoned and wrote the same file beside it. A renewal that fails is left to the next.
   */
  keepClaimed(scope: string, key: string, attempt: string): () => void {
    const timer = setInterval(
      () => {
        void guarded(() =>
          this.keepScript.run(this.redis, this.keys.idempotency(scope, key), attempt, Date.now()),
        ).catch(() => undefined);
      },
      Math.max(1, Math.floor(this.staleMs / 3)),
    );
    timer.unref();
    return () => clearInterval(timer);
  }

  async claim(scope: string, key: string, fingerprint: string): Promise<IdempotencyClaim> {
    assertReady(this.redis);
    const attempt = randomUUID();
    const [kind, raw] = await guarded(() =>
      this.claimScript.run(
        this.redis,
        this.keys.idempotency(scope, key),
        fingerprint,
        Date.now(),
        this.ttlS,
        this.staleMs,
        attempt,
      ),
    );
    if (kind === "answered" && raw) {
      const rec = JSON.parse(raw) as StoredRecord;
      if (rec.answer) return { kind: "answered", answer: rec.answer, fingerprint: rec.fp };
    }
    if (kind === "reused") return { kind: "reused" };
    if (kind === "in-progress") return { kind: "in-progress" };
    return { kind: "claimed", takeover: kind === "takeover", since: raw ?? "", attempt };
  }

  /** Stores the answer of the attempt holding the claim, for its retries. */
  async answer(
    scope: string,
    key: string,
    fingerprint: string,
    answer: StoredAnswer,
    claim: { since: string; attempt: string },
  ): Promise<void> {
    const rec: StoredRecord = {
      state: "answered",
      fp: fingerprint,
      at: Date.now(),
      since: claim.since,
      answer,
    };
    await this.settle(scope, key, claim.attempt, JSON.stringify(rec));
  }

  /**
   * Leaves the claim for the next retry to take over at once: the request failed after it
   * may have written what it creates (a 503 waiting for replicas), so the retry looks first.
   */
  async abandon(
    scope: string,
    key: string,
    fingerprint: string,
    claim: { since: string; attempt: string },
  ): Promise<void> {
    const rec: StoredRecord = {
      state: "pending",
      fp: fingerprint,
      at: 0,
      since: claim.since,
      attempt: claim.attempt,
    };
    await this.settle(scope, key, claim.attempt, JSON.stringify(rec));
  }

  /** Frees the key: the request failed before anything was accepted (nothing to replay). */
  async release(scope: string, key: string, attempt: string): Promise<void> {
    await this.settle(scope, key, attempt, "");
  }

  /** Writes `record` over the key (or deletes it: ""), while `attempt` still holds the claim. */
  private async settle(scope: string, key: string, attempt: string, record: string) {
    await guarded(() =>
      this.settleScript.run(
        this.redis,
        this.keys.idempotency(scope, key),
        attempt,
        record,
        this.ttlS,
      ),
    );
  }
}
