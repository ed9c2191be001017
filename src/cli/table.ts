export type Align = "left" | "right";

/**
 * Rows of plain text as columns padded to their widest cell, two spaces apart. Styling goes on
 * the returned lines, after the padding, since escape codes would count as width.
 */
export function table(
  rows: readonly (readonly string[])[],
  align: readonly Align[] = [],
): string[] {
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, width(cell))));
  }
  return rows.map((row) =>
    row
      .map((cell, i) => {
        const pad = " ".repeat((widths[i] ?? 0) - width(cell));
        return align[i] === "right" ? pad + cell : i === row.length - 1 ? cell : cell + pad;
      })
      .join("  "),
  );
}

/** Code points, not UTF-16 units: close enough for ids and JSON in a terminal. */
const width = (text: string) => [...text].length;
