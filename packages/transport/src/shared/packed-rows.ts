import type { RedisClient } from "./connection.js";
import type { Keys } from "./keys.js";
import { guarded } from "./redis-guard.js";

/**
 * The packed rows of a file's chunks (`FileStore.append`'s `packed`), each null where it is
 * gone (the file deleted or expired): what a worker reads for an OpenAI batch's predict lines,
 * where the upload left them, rather than a copy handed through the API.
 */
export async function readPackedRows(
  redis: RedisClient,
  keys: Keys,
  id: string,
  chunks: readonly number[],
): Promise<Array<Buffer | null>> {
  if (chunks.length === 0) return [];
  return guarded(() =>
    redis.hmgetBuffer(keys.filePacked(id), ...chunks.map((chunk) => `r${chunk}`)),
  );
}
