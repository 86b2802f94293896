/** Prints rows as an aligned text table with a title line. */
export function printTable(title: string, rows: Array<Record<string, string | number>>): void {
  console.log(`\n${title}`);
  if (rows.length === 0) return;
  // every row's columns, in the order they first appear: a later row may carry one more
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const width = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c] ?? "").length)));
  const line = (cells: string[]) => cells.map((c, k) => c.padEnd(width[k] ?? 0)).join("  ");
  console.log(line(cols));
  console.log(line(width.map((w) => "-".repeat(w))));
  for (const r of rows) console.log(line(cols.map((c) => String(r[c] ?? ""))));
}
