/** BullMQ queue name of one model version; BullMQ forbids ':' in names. */
export function queueName(model: string, version: string): string {
  return `${model}.v${version}`;
}

/** The model and version a queue name was made from. */
export function parseQueueName(name: string): { model: string; version: string } {
  const at = name.lastIndexOf(".v");
  return { model: name.slice(0, at), version: name.slice(at + 2) };
}
