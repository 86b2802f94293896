/**
 * Scrapes a /metrics page and sums one metric over its label sets, or over those whose labels
 * begin with `labels` (`model="digits"`, say). 0 when the metric is absent.
 */
export async function scrapeMetric(url: string, name: string, labels = ""): Promise<number> {
  const text = await (await fetch(url)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    const matches =
      line.startsWith(`${name}{${labels}`) || (labels === "" && line.startsWith(`${name} `));
    if (matches) sum += Number(line.split(" ").at(-1));
  }
  return sum;
}
