/** A body that streams `total` bytes of one NDJSON line that never ends (a hostile upload). */
export function endlessLine(total: number): ReadableStream<Uint8Array> {
  const chunk = new TextEncoder().encode(`{"key":"a","features":[${"1,".repeat(32_000)}`);
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent >= total) return controller.close();
      controller.enqueue(chunk);
      sent += chunk.byteLength;
    },
  });
}
