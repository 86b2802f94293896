import { FerryError } from "@ferry/protocol";
import type { RedisClient } from "./connection.js";
import type { Keys } from "./keys.js";
import { LuaCommand } from "./lua-command.js";
import { guarded } from "./redis-guard.js";

/** The hash field that holds the owner's total, beside one field per thing held. */
const TOTAL = "=total";

/**
 * Lua: drops a thing, its bytes out of the total. KEYS: held, expiry of the things counted,
 * expiry of the holds that are not things (a running batch's answers).
 */
const LET_GO = `
local function letGo(thing)
  local b = redis.call('HGET', KEYS[1], thing)
  if b then
    redis.call('HINCRBY', KEYS[1], '${TOTAL}', -tonumber(b))
    redis.call('HDEL', KEYS[1], thing)
  end
  redis.call('ZREM', KEYS[2], thing)
  redis.call('ZREM', KEYS[3], thing)
end`;

/**
 * Holds `bytes` for thing `id` of an owner until `expires_at`, first dropping what has expired;
 * refused (nothing written) when it would take the owner past `max_bytes` or `max_items`
 * (either 0: no check); an empty id only looks. A thing already held is held again at its
 * new size: a retry, or a reservation settled at the size the thing turned out to be.
 * KEYS: held (hash id -> bytes, and the total), expiry (sorted set id -> expires_at) of the
 * things counted, and of the holds that are not things (grown ones: their bytes count, they
 * do not count as one of `max_items`).
 * ARGV: now (s), id, bytes, expires_at (s), max_bytes, max_items, from (a thing let go
 * first, its bytes now `id`'s: an upload's reservation settled as the file; '' for none),
 * least (past the budget, `bytes` is cut to what is left, and refused below this), grow ('1':
 * `bytes` is added to what the thing holds, all or nothing).
 * Returns {1, total, items, bytes held} when held; when refused {0, total, items, why} of the
 * owner's other things (1: too many of them, 2: too many bytes).
 */
const HOLD = `${LET_GO}
local now = tonumber(ARGV[1])
for _, thing in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do letGo(thing) end
for _, thing in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do letGo(thing) end
local id, bytes, expires = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local maxBytes, maxItems = tonumber(ARGV[5]), tonumber(ARGV[6])
local from = ARGV[7]
if from ~= '' and from ~= id then letGo(from) end
local held = tonumber(redis.call('HGET', KEYS[1], id) or '0')
local total = tonumber(redis.call('HGET', KEYS[1], '${TOTAL}') or '0')
local least = tonumber(ARGV[8])
-- grown: bytes more than it holds now, all of them or none, a hold and not a thing
local grown = ARGV[9] == '1'
local expiry = KEYS[2]
if grown then
  bytes = held + bytes
  least = bytes
  expiry = KEYS[3]
end
local items = redis.call('ZCARD', KEYS[2])
if id == '' then return {0, total, items} end
local known = redis.call('ZSCORE', expiry, id)
local others = items
if known and not grown then others = items - 1 end
if maxItems > 0 and not known and not grown and items + 1 > maxItems then return {0, total - held, others, 1} end
if maxBytes > 0 and total - held + bytes > maxBytes then
  bytes = maxBytes - (total - held)
  if bytes < least then
    -- a thing grown is refused with what is held in all, itself included
    if grown then return {0, total, others, 2} end
    return {0, total - held, others, 2}
  end
end
redis.call('HSET', KEYS[1], id, bytes)
total = redis.call('HINCRBY', KEYS[1], '${TOTAL}', bytes - held)
redis.call('ZADD', expiry, expires, id)
if not known and not grown then items = items + 1 end
local life = math.max(1, expires - now)
for _, key in ipairs(KEYS) do
  if redis.call('TTL', key) < life then redis.call('EXPIRE', key, life) end
end
return {1, total, items, bytes}
`;

/** Lets go of thing `id`. KEYS: held, both expiries. ARGV: id. */
const RELEASE = `${LET_GO}
letGo(ARGV[1])
return 1
`;

/**
 * Holds thing `id` (if held) until `expires_at` at least, as its own keys now live.
 * KEYS: held, expiry. ARGV: now (s), id, expires_at (s).
 */
const EXTEND = `
if not redis.call('ZSCORE', KEYS[2], ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[2], 'GT', ARGV[3], ARGV[2])
local life = math.max(1, tonumber(ARGV[3]) - tonumber(ARGV[1]))
for _, key in ipairs(KEYS) do
  if redis.call('TTL', key) < life then redis.call('EXPIRE', key, life) end
end
return 1
`;

/**
 * What is held: uploaded files (and batches' output files), or the rows of Ferry's own batches
 * still to run (held from their upload until their batch completes). Each its own budget.
 */
export type StorageKind = "files" | "batch-rows";

/** What one owner may hold at once; 0 leaves that side unchecked. */
export interface StorageLimits {
  maxBytes: number;
  maxItems: number;
}

/**
 * What each owner keeps stored (their uploaded files; the rows of their batches waiting to
 * run), against a budget per owner: a thing is held (its bytes reserved) before any of it is
 * written, settled at its size once whole, let go when deleted (or run), and goes by itself
 * when it expires, as the thing's own keys do. Two keys per owner and kind, in the owner's
 * slot (one script, on a cluster too).
 */
export class StorageQuota {
  private readonly holdScript: LuaCommand<[number, number, number, number?]>;
  private readonly releaseScript: LuaCommand<number>;
  private readonly extendScript: LuaCommand<number>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly kind: StorageKind = "files",
  ) {
    this.holdScript = new LuaCommand(redis, "ferryStorageHold", 3, HOLD);
    this.releaseScript = new LuaCommand(redis, "ferryStorageRelease", 3, RELEASE);
    this.extendScript = new LuaCommand(redis, "ferryStorageExtend", 2, EXTEND);
  }

  /**
   * Reserves `bytes` for `id` until `expiresAtS` (what is left of the budget, when that is
   * less but at least `least`), and returns what it reserved; throws QUOTA_EXCEEDED (nothing
   * reserved) when `owner` would hold more than `limits` allow.
   */
  async reserve(
    owner: string,
    id: string,
    bytes: number,
    expiresAtS: number,
    limits: StorageLimits,
    least = bytes,
  ): Promise<number> {
    const [held, total, items, granted] = await this.hold(
      owner,
      id,
      bytes,
      expiresAtS,
      limits,
      "",
      least,
    );
    if (held === 1) return granted ?? bytes;
    if (this.kind === "batch-rows")
      throw new FerryError(
        "QUOTA_EXCEEDED",
        `${owner === "" ? "This server's batches (one tenant: API_KEYS is unset)" : "This key's batches"} are at their limit of rows still to run: its other batches hold ${total} bytes, and this one would hold ${least} with its next chunk (the most one key may have waiting is ${limits.maxBytes} bytes, BATCH_ROWS_PER_KEY_BYTES). Wait for its batches to finish, or send smaller ones.`,
      );
    // (refused, the fourth is why: 1 for the number of things)
    const what =
      granted === 1
        ? `it holds ${items} files, the most one key may keep (${limits.maxItems})`
        : `it holds ${total} bytes of files, and this upload needs room for ${least} more (the most one key may keep is ${limits.maxBytes} bytes)`;
    throw new FerryError(
      "QUOTA_EXCEEDED",
      `${owner === "" ? "This server's file storage (one tenant: API_KEYS is unset)" : "This key's file storage"} is full: ${what}. Delete files it no longer needs (DELETE /v1/files/{id}), or wait for them to expire.`,
    );
  }

  /**
   * Holds `bytes` more for `id` (a batch's answers as they are kept), until `expiresAtS`;
   * throws QUOTA_EXCEEDED (nothing more held) when `owner` would hold more than `limits`
   * allow. One step in Redis: answers kept at once by several runners' writes all count.
   */
  async grow(
    owner: string,
    id: string,
    bytes: number,
    expiresAtS: number,
    limits: StorageLimits,
  ): Promise<void> {
    const [held, total] = await this.hold(owner, id, bytes, expiresAtS, limits, "", bytes, true);
    if (held === 1) return;
    throw new FerryError(
      "QUOTA_EXCEEDED",
      `${owner === "" ? "This server's file storage (one tenant: API_KEYS is unset)" : "This key's file storage"} is full: its files and its batches' answers hold ${total} bytes, and ${bytes} more would pass the most one key may keep (${limits.maxBytes} bytes, FILE_STORAGE_PER_KEY_BYTES).`,
    );
  }

  /**
   * Holds `id` at the size it turned out to be, and until when, whatever the budget, in place
   * of the reservation `from` (one step: nothing is counted twice or not at all meanwhile).
   */
  async settle(
    owner: string,
    id: string,
    bytes: number,
    expiresAtS: number,
    from = "",
  ): Promise<void> {
    await this.hold(owner, id, bytes, expiresAtS, { maxBytes: 0, maxItems: 0 }, from);
  }

  async release(owner: string, id: string): Promise<void> {
    await guarded(() => this.releaseScript.run(this.redis, ...this.scriptKeys(owner), id));
  }

  /** Holds `id`, if it is held, until `expiresAtS` at least (its file lives longer now). */
  async extend(owner: string, id: string, expiresAtS: number): Promise<void> {
    const { held, expiry } = this.keysOf(owner);
    await guarded(() =>
      this.extendScript.run(
        this.redis,
        held,
        expiry,
        Math.floor(Date.now() / 1000),
        id,
        expiresAtS,
      ),
    );
  }

  /** The bytes `owner` holds for thing `id`, or undefined when it holds none for it. */
  async held(owner: string, id: string): Promise<number | undefined> {
    const bytes = await guarded(() => this.redis.hget(this.keysOf(owner).held, id));
    return bytes === null ? undefined : Number(bytes);
  }

  /** What `owner` holds now (expired things dropped): bytes and things. */
  async usage(owner: string): Promise<{ bytes: number; items: number }> {
    const [, bytes, items] = await this.hold(owner, "", 0, 0, { maxBytes: 0, maxItems: 0 });
    return { bytes, items };
  }

  /** The three keys the hold and release scripts take, in their order. */
  private scriptKeys(owner: string): [string, string, string] {
    const { held, expiry, holds } = this.keysOf(owner);
    return [held, expiry, holds];
  }

  /** The owner's keys of this kind: held (the hash), expiry (its files), holds (not files). */
  private keysOf(owner: string): { held: string; expiry: string; holds: string } {
    const k = this.keys;
    return this.kind === "files"
      ? { held: k.storageHeld(owner), expiry: k.storageExpiry(owner), holds: k.storageHolds(owner) }
      : {
          held: k.batchRowsHeld(owner),
          expiry: k.batchRowsExpiry(owner),
          holds: k.batchRowsHolds(owner),
        };
  }

  private hold(
    owner: string,
    id: string,
    bytes: number,
    expiresAtS: number,
    limits: StorageLimits,
    from = "",
    least = bytes,
    grow = false,
  ): Promise<[number, number, number, number?]> {
    return guarded(() =>
      this.holdScript.run(
        this.redis,
        ...this.scriptKeys(owner),
        Math.floor(Date.now() / 1000),
        id,
        bytes,
        expiresAtS,
        limits.maxBytes,
        limits.maxItems,
        from,
        least,
        grow ? "1" : "",
      ),
    );
  }
}
