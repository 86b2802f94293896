import { type Job, WaitingError } from "bullmq";
import { retrying } from "../shared/retrying.js";

/**
 * Hands an active job back to its queue, for an attempt whose event log lost events it could
 * not write (Redis refused them for longer than the writer retries): completing or failing
 * the job then would leave a log without its end, and readers waiting for it for ever. The
 * move goes as soon as Redis takes it (the lock stays ours meanwhile: BullMQ renews it while
 * the processor runs); if Redis will not take it within the lock's lifetime, or the lock is
 * gone, the job stalls back once its lock lapses, to the same end. Either way its next attempt
 * answers from, or resumes after, what the log does hold.
 *
 * Throws BullMQ's WaitingError, its sign that the processor moved the job itself.
 */
export async function giveBack(
  job: Job,
  token: string | undefined,
  lockDurationMs: number,
): Promise<never> {
  if (token !== undefined) {
    const lockGone = (err: unknown) => err instanceof Error && /lock/i.test(err.message);
    // a move Redis never took: the job stalls back once its lock lapses
    const moved = retrying(
      () => job.moveToWait(token),
      lockDurationMs,
      (err) => !lockGone(err),
    );
    await moved.catch(() => undefined);
  }
  throw new WaitingError();
}
