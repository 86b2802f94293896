/** The first wait before a failed call is made again, doubled up to the cap (ms). */
const FIRST_WAIT_MS = 50;
const WAIT_CAP_MS = 1_000;

/**
 * Makes `call` until it succeeds, again after each failure that `retryable` accepts, with
 * waits of 50 ms doubling up to 1 s, for up to `forMs` (0: once). Rejects with the last error.
 */
export async function retrying<T>(
  call: () => Promise<T>,
  forMs: number,
  retryable: (err: unknown) => boolean,
): Promise<T> {
  const giveUpAt = Date.now() + forMs;
  for (let wait = FIRST_WAIT_MS; ; wait = Math.min(wait * 2, WAIT_CAP_MS)) {
    try {
      return await call();
    } catch (err) {
      if (!retryable(err) || Date.now() + wait > giveUpAt) throw err;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

/**
 * Whether a failed command may succeed if sent again: not a script or type error, which
 * would fail the same way every time.
 */
export function transient(err: unknown): boolean {
  return !/^(ERR|WRONGTYPE)\b/.test(err instanceof Error ? err.message : String(err));
}
