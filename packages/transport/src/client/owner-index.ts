import { FerryError } from "@ferry/protocol";
import type { RedisClient } from "../shared/connection.js";
import { LuaCommand } from "../shared/lua-command.js";
import { guarded } from "../shared/redis-guard.js";

/**
 * Adds a member and lets the set live at least as long as it: the set's TTL only grows, so it
 * outlives every member it indexes (each expires on its own) and goes once they all have.
 * KEYS: the set. ARGV: score, member, ttl (s).
 */
const ADD = `
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
if redis.call('TTL', KEYS[1]) < tonumber(ARGV[3]) then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return 1
`;

/** A page of a tenant's list, as OpenAI pages lists (`after` an id, `limit`, `order`). */
export interface ListPage {
  after?: string | undefined;
  limit: number;
  order?: "asc" | "desc" | undefined;
}

/** Ids read from the index per round trip while a page fills. */
const SCAN = 100;

/**
 * One tenant's things (files, batches) by creation time, for listing them: a sorted set per
 * owner beside the things themselves, which live in their own slots. A member whose thing has
 * expired is dropped when a listing meets it.
 */
export class OwnerIndex {
  private readonly addScript: LuaCommand<number>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keyOf: (owner: string) => string,
  ) {
    this.addScript = new LuaCommand(redis, "ferryOwnerIndexAdd", 1, ADD);
  }

  async add(owner: string, id: string, createdMs: number, ttlS: number): Promise<void> {
    await guarded(() => this.addScript.run(this.redis, this.keyOf(owner), createdMs, id, ttlS));
  }

  /** Keeps the index as long as a member whose life grew to `ttlS`. */
  async keep(owner: string, id: string, ttlS: number): Promise<void> {
    const score = await guarded(() => this.redis.zscore(this.keyOf(owner), id));
    if (score !== null) await this.add(owner, id, Number(score), ttlS);
  }

  async remove(owner: string, id: string): Promise<void> {
    await guarded(() => this.redis.zrem(this.keyOf(owner), id));
  }

  /**
   * A page of `owner`'s things, newest first unless `order` is "asc": `load` reads them
   * (undefined for one gone), `keep` filters them.
   */
  async page<T>(
    owner: string,
    page: ListPage,
    load: (ids: string[]) => Promise<Array<T | undefined>>,
    keep: (item: T) => boolean = () => true,
  ): Promise<{ data: T[]; hasMore: boolean }> {
    const key = this.keyOf(owner);
    const asc = page.order === "asc";
    let start = 0;
    if (page.after !== undefined) {
      const after = page.after;
      const rank = await guarded(() =>
        asc ? this.redis.zrank(key, after) : this.redis.zrevrank(key, after),
      );
      if (rank === null)
        throw new FerryError("INVALID_INPUT", `after: '${after}' is not in this list`);
      start = rank + 1;
    }
    const data: T[] = [];
    const gone: string[] = [];
    while (data.length <= page.limit) {
      const from = start;
      const ids = await guarded(() =>
        asc
          ? this.redis.zrange(key, from, from + SCAN - 1)
          : this.redis.zrevrange(key, from, from + SCAN - 1),
      );
      if (ids.length === 0) break;
      start += ids.length;
      const items = await load(ids);
      items.forEach((item, k) => {
        if (item === undefined) gone.push(ids[k] ?? "");
        else if (keep(item)) data.push(item);
      });
    }
    if (gone.length > 0) await this.redis.zrem(key, ...gone).catch(() => undefined);
    return { data: data.slice(0, page.limit), hasMore: data.length > page.limit };
  }
}

/**
 * A list's order for something created at `createdS` (OpenAI's whole seconds): now in ms when
 * that is still its second, so that two made within one second keep their order; its second's
 * end otherwise (a file whose upload outlasted the second it began in).
 */
export function sortTime(createdS: number, now = Date.now()): number {
  const from = createdS * 1000;
  return Math.min(Math.max(now, from), from + 999);
}
