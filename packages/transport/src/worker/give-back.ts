import { type Job, WaitingError } from "bullmq";

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
  const until = Date.now() + lockDurationMs;
  for (let wait = 50; token !== undefined; wait = Math.min(wait * 2, 1_000)) {
    try {
      await job.moveToWait(token);
      break;
    } catch (err) {
      const lockGone = err instanceof Error && /lock/i.test(err.message);
      if (lockGone || Date.now() + wait > until) break;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
  throw new WaitingError();
}
