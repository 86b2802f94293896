import type { InferJob } from "@ferry/protocol";
import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";
import { bandOf, ENTRY_FIELD, laneKeys, SYNC_GROUP } from "../shared/sync-lane.js";

/**
 * Looks each row of a group up in its queue's prediction cache and appends the rows that
 * missed as one entry: a sync row of a cached model costs one round trip, not a lookup and
 * then an enqueue. An answer counts when it was stored at or after the freshness cutoff.
 * The entry comes whole (appended as it is when nothing hit, the common case: no copy in
 * Lua), with its rows' byte lengths to cut out the rows that hit.
 * KEYS: lane, current bucket, previous bucket (all of the queue's slot). ARGV: cutoff (ms),
 * entry field, entry JSON (its rows last), row count n, n cache fields ("" looks nothing up),
 * the byte length of the JSON before the first row, then the n rows' byte lengths.
 * Returns the entry id (nil when every row hit), then per row the stored answer or nil.
 */
const LOOKUP_OR_APPEND = `
local cutoff, json, n = tonumber(ARGV[1]), ARGV[3], tonumber(ARGV[4])
local hits, asked, fields = {}, {}, {}
for i = 1, n do
  hits[i] = false
  if ARGV[4 + i] ~= '' then
    asked[#asked + 1] = i
    fields[#fields + 1] = ARGV[4 + i]
  end
end
local any = false
for b = 2, 3 do
  if #fields == 0 then break end
  local found = redis.call('HMGET', KEYS[b], unpack(fields))
  local again, againFields = {}, {}
  for j = 1, #fields do
    local v = found[j]
    if v then
      if (tonumber(string.match(v, '^(%d+):')) or 0) >= cutoff then
        hits[asked[j]] = v
        any = true
      end
    else
      again[#again + 1] = asked[j]
      againFields[#againFields + 1] = fields[j]
    end
  end
  asked, fields = again, againFields
end
local id = false
if not any then
  id = redis.call('XADD', KEYS[1], '*', ARGV[2], json)
else
  local head = tonumber(ARGV[5 + n])
  local parts, pos = {}, head + 1
  for i = 1, n do
    local len = tonumber(ARGV[5 + n + i])
    if not hits[i] then parts[#parts + 1] = string.sub(json, pos, pos + len - 1) end
    pos = pos + len + 1
  end
  if #parts > 0 then
    id = redis.call('XADD', KEYS[1], '*', ARGV[2],
      string.sub(json, 1, head) .. table.concat(parts, ',') .. ']}')
  end
end
return {id, unpack(hits)}
`;

/** Where a group's rows are looked up before they are queued. */
export interface GroupLookup {
  /** The queue's current and previous cache buckets. */
  buckets: readonly [string, string];
  /** Answers stored before this (epoch ms) are stale. */
  cutoff: number;
  /** Per row, in order: its cache field, or "" for none. */
  fields: readonly string[];
}

/** A lane's groups by state: not yet read by a worker, and read but not yet answered. */
export interface LaneBacklog {
  waiting: number;
  active: number;
}

/**
 * The API's side of the sync lane: one XADD per coalesced group, whatever its size. Entries
 * are deleted once answered, so a stream's length is its backlog: waiting plus held.
 */
export class SyncLaneProducer {
  private readonly lookupOrAppend: LuaCommand<Array<string | null>>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {
    this.lookupOrAppend = new LuaCommand(redis, "ferryLookupOrAppend", 3, LOOKUP_OR_APPEND);
  }

  /** Appends a group to its queue's lane at the band of `priority`; resolves with its id. */
  async send(queue: string, priority: number, group: InferJob): Promise<string> {
    const key = this.keys.syncLane(queue, bandOf(priority));
    // a buffer, not a string, for the reason `entryBytes` gives
    const id = await this.redis.xadd(key, "*", ENTRY_FIELD, Buffer.from(JSON.stringify(group)));
    return id ?? "";
  }

  /**
   * Like `send`, after looking every row up in the cache (one script): only the rows that
   * missed are queued. Resolves with each row's stored answer, undefined for a miss.
   */
  async sendLooking(
    queue: string,
    priority: number,
    group: InferJob,
    lookup: GroupLookup,
  ): Promise<Array<string | undefined>> {
    const { rows, ...rest } = group;
    const head = `${JSON.stringify(rest).slice(0, -1)},"rows":[`;
    const encoded = rows.map((row) => JSON.stringify(row));
    const headBytes = Buffer.byteLength(head);
    const lengths = encoded.map((row) => Buffer.byteLength(row));
    const [, ...hits] = await this.lookupOrAppend.run(
      this.redis,
      this.keys.syncLane(queue, bandOf(priority)),
      ...lookup.buckets,
      lookup.cutoff,
      ENTRY_FIELD,
      entryBytes(head, headBytes, encoded, lengths),
      rows.length,
      ...rows.map((_, i) => lookup.fields[i] ?? ""),
      headBytes,
      ...lengths,
    );
    return rows.map((_, i) => hits[i] ?? undefined);
  }

  /** Groups waiting in every band of `queue`, and groups workers hold (read, not answered). */
  async backlog(queue: string): Promise<LaneBacklog> {
    const keys = laneKeys(this.keys, queue);
    const [lengths, pending] = await Promise.all([
      Promise.all(keys.map((key) => this.redis.xlen(key))),
      Promise.all(
        keys.map((key) =>
          (this.redis.xpending(key, SYNC_GROUP) as Promise<[number, ...unknown[]]>).then(
            (summary) => Number(summary[0] ?? 0),
            () => 0, // no group yet: no worker has read this lane, so nothing is held
          ),
        ),
      ),
    ]);
    let waiting = 0;
    let active = 0;
    lengths.forEach((length, band) => {
      const held = Math.min(length, pending[band] ?? 0);
      waiting += length - held;
      active += held;
    });
    return { waiting, active };
  }
}

/**
 * An entry's JSON (`head`, the rows comma-separated, then `]}`) written once into one buffer:
 * as a string it was copied three more times on the V8 heap, and in-flight entry strings were
 * most of what the API's young-generation collections promoted; a buffer's bytes live outside
 * the heap, and ioredis writes them as they are (the figures: docs/benchmarks.md).
 */
function entryBytes(
  head: string,
  headBytes: number,
  rows: readonly string[],
  lengths: readonly number[],
): Buffer {
  const size = headBytes + lengths.reduce((a, b) => a + b + 1, 0) + 1;
  const out = Buffer.allocUnsafe(size);
  let at = out.write(head, 0, "utf8");
  rows.forEach((row, i) => {
    if (i > 0) out[at++] = 0x2c; // ,
    at += out.write(row, at, "utf8");
  });
  at += out.write("]}", at, "latin1");
  return out.subarray(0, at);
}
