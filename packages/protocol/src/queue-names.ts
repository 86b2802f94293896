/** BullMQ queue name of one model version; BullMQ forbids ':' in names. */
export function queueName(model: string, version: string): string {
  return `${model}.v${version}`;
}
