import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import type { Queue } from "bullmq";

/**
 * The queues bull-board shows at /admin/queues, for job-level inspection and retries: the
 * board's adapters are made here, so that the API never holds a BullMQ queue itself.
 */
export function queueBoardAdapters(
  queue: (name: string) => Queue,
  names: readonly string[],
): BullMQAdapter[] {
  return names.map((name) => new BullMQAdapter(queue(name)));
}
