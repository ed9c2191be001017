import { number, table } from "./format.js";
import { met, type Meta, type Row, type Run, type Section } from "./section.js";

/** One line on where and how the run ran. */
export function headline(m: Meta): string {
  return (
    `${m.date.slice(0, 10)} · ${m.profile} run · Redis ${m.redisVersion} (${m.redis}) · ` +
    `Node ${m.nodeVersion} · ${m.cores} cores (${m.cpu}, ${m.platform}) · ${m.seconds} s`
  );
}

/** Where a whole run's time went: the budget is about 15 minutes on a 2-core VM. */
function timings({ sections }: Meta): string {
  const each = Object.entries(sections).map(([name, s]) => `${name} ${number(s)}`);
  return `Seconds per section: ${each.join(" · ")}.`;
}

/** A row's figure as the Targets table shows it: value, unit, then where it came from. */
export function measured({ value, unit, digits = 0, note }: Row): string {
  const joined = unit === "×" || unit === "%" || unit === "" ? unit : ` ${unit}`;
  return `${number(value, digits)}${joined}${note ? ` (${note})` : ""}`;
}

/** The rows that have a target, each with its figure and whether it met it. */
export function targetsTable(rows: readonly Row[]): string {
  return table(
    ["target", "measured", ""],
    rows
      .filter((row) => row.target)
      .map((row) => [row.name, measured(row), met(row) ? "met" : "**not met**"]),
  );
}

const WHOLE_RUN =
  "rollcall against the naive baseline (docs/baseline.md; `test/kit/naive.ts`, a port; its " +
  "work as one script under redis-benchmark; its sorted sets for memory) and against " +
  "redis-benchmark running rollcall's own heartbeat script, all on the same Redis in the " +
  "same run. Reproduce with `make bench`. The bench reports; it fails only on a broken run " +
  "(a heartbeat that was not steady, a leave missing), never on a figure.";

/** The report of a run: the whole run, or one section alone (`only`). */
export function markdown(
  run: Run,
  sections: readonly Section[],
  rows: readonly Row[],
  only?: string,
): string {
  const smoke = run.meta.profile === "smoke" ? " --smoke" : "";
  const intro = only
    ? [
        `# rollcall benchmarks: ${only} alone`,
        "",
        headline(run.meta),
        "",
        `The ${only} section of the bench, run by itself (\`npx tsx bench/main.ts --only ` +
          `${only}${smoke}\`): the figures of other sections it compares with are left out.`,
      ]
    : ["# rollcall benchmarks", "", headline(run.meta), "", WHOLE_RUN, "", timings(run.meta)];
  const targets = rows.some((row) => row.target) ? ["", "## Targets", "", targetsTable(rows)] : [];
  return [
    ...intro,
    ...targets,
    ...sections.flatMap((s) => ["", s.report(run.results[s.name], run)]),
    "",
  ].join("\n");
}
