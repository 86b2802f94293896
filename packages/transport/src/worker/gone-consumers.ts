import type { RedisClient } from "../shared/connection.js";

/**
 * Deletes a consumer group's consumers that hold nothing and have not read for `goneAfterMs`:
 * workers that died (a clean exit deletes its own), which would otherwise pile up in the group.
 * `self` is never deleted.
 */
export async function forgetGoneConsumers(
  redis: RedisClient,
  streams: readonly string[],
  group: string,
  self: string,
  goneAfterMs: number,
): Promise<void> {
  for (const stream of streams) {
    const consumers = (await redis.xinfo("CONSUMERS", stream, group)) as Array<
      Array<string | number>
    >;
    for (const fields of consumers) {
      const info = new Map<string, string | number>();
      for (let k = 0; k + 1 < fields.length; k += 2)
        info.set(String(fields[k]), fields[k + 1] ?? "");
      const name = String(info.get("name") ?? "");
      if (name === self || Number(info.get("pending")) > 0) continue;
      if (Number(info.get("idle")) < goneAfterMs) continue;
      await redis.xgroup("DELCONSUMER", stream, group, name);
    }
  }
}
