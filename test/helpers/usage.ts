/**
 * A usage's token counts, without `prompt_tokens_details`: how many of a prompt's tokens came
 * from the prefix cache depends on what ran before, so two answers to one prompt differ there.
 */
export function tokenCounts(usage: unknown): Record<string, unknown> {
  const { prompt_tokens, completion_tokens, total_tokens } = (usage ?? {}) as Record<
    string,
    unknown
  >;
  return { prompt_tokens, completion_tokens, total_tokens };
}
