import { FerryError } from "@ferry/protocol";

/**
 * `work`, or a 504 once `timeoutMs` has passed, whichever comes first. The API owns a request's
 * deadline: whatever Redis or the workers do (down, frozen, scaled to zero), the caller has
 * its answer on time. Work still running is not stopped; its result is dropped.
 */
export function beforeDeadline<T>(work: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new FerryError("DEADLINE_EXCEEDED", "deadline passed before an answer")),
      timeoutMs,
    );
  });
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}
