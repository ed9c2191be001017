import { mkdir, writeFile } from "node:fs/promises";
import { availableParallelism, cpus, platform } from "node:os";
import { parseArgs } from "node:util";
import { startEmbeddedRedis, type EmbeddedRedis } from "../src/embedded.js";
import { Lab } from "./lab.js";
import { Progress } from "./progress.js";
import { markdown } from "./report.js";
import { met, type Meta, type ProfileName, type Run, type Section } from "./section.js";
import { SECTIONS } from "./sections.js";
import { info } from "./stats.js";

const names = (alone: boolean) =>
  SECTIONS.filter((s) => (s.alone ?? false) === alone)
    .map((s) => s.name)
    .join(", ");

const USAGE = `Usage: tsx bench/main.ts [--smoke] [--only SECTION] [--redis-url redis://host:port]

  --smoke      a quick run that only proves the bench works (CI); results go to smoke.*
  --only       run one section alone; results go to SECTION.* (SECTION-smoke.* with --smoke,
               dots left out). The whole run's sections: ${names(false)}.
               Run alone only: ${names(true)}.
  --redis-url  an empty Redis >= 7 to use instead of an embedded redis-server: the bench
               flushes it and resets its INFO statistics`;

const RESULTS = new URL("./results/", import.meta.url);

function options(): { profile: ProfileName; redisUrl: string | undefined; only?: Section } {
  let parsed;
  try {
    parsed = parseArgs({
      options: {
        smoke: { type: "boolean", default: false },
        only: { type: "string" },
        "redis-url": { type: "string" },
        help: { type: "boolean", default: false },
      },
    });
  } catch (error) {
    console.error(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}`);
    process.exit(2);
  }
  const { values } = parsed;
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const only = SECTIONS.find((s) => s.name === values.only);
  if (values.only !== undefined && !only) {
    console.error(`--only takes a section's name, got ${values.only}\n\n${USAGE}`);
    process.exit(2);
  }
  return { profile: values.smoke ? "smoke" : "full", redisUrl: values["redis-url"], only };
}

/** Runs the sections one after another on an empty Redis, flushed after each. */
async function run(
  sections: readonly Section[],
  profile: ProfileName,
  lab: Lab,
  embedded: boolean,
): Promise<Run> {
  const progress = new Progress(sections.reduce((n, s) => n + s.steps(s.profiles[profile]), 0));
  const started = performance.now();
  const results: Record<string, unknown> = {};
  const seconds: Record<string, number> = {};
  try {
    await lab.checkEmpty();
    const server = await info(lab.admin, "server");
    for (const section of sections) {
      const start = performance.now();
      results[section.name] = await section.run(lab, section.profiles[profile], progress);
      await lab.flush();
      seconds[section.name] = Math.round((performance.now() - start) / 1000);
    }
    return { meta: { ...meta(profile, server, embedded, started), sections: seconds }, results };
  } finally {
    progress.stop();
  }
}

function meta(
  profile: ProfileName,
  server: Map<string, string>,
  embedded: boolean,
  started: number,
): Omit<Meta, "sections"> {
  return {
    date: new Date().toISOString(),
    profile,
    redisVersion: server.get("redis_version") ?? "unknown",
    redis: embedded ? "embedded" : "external",
    nodeVersion: process.version,
    cores: availableParallelism(),
    cpu: cpus()[0]?.model.trim() ?? "unknown",
    platform: platform(),
    seconds: Math.round((performance.now() - started) / 1000),
  };
}

/**
 * The report, printed and saved with the results: latest.* for a whole run, SECTION.* for one
 * section alone; a smoke run's beside them (and git ignores them).
 */
async function save(run: Run, sections: readonly Section[], only?: string): Promise<string> {
  const rows = sections.flatMap((s) =>
    (s.rows?.(run.results[s.name], run) ?? []).map((row) => ({ section: s.name, ...row })),
  );
  const report = markdown(run, sections, rows, only);
  const smoke = run.meta.profile === "smoke";
  const name = only
    ? `${only.replaceAll(".", "")}${smoke ? "-smoke" : ""}`
    : smoke
      ? "smoke"
      : "latest";
  const json = {
    meta: run.meta,
    ...run.results,
    rows: rows.map((row) => (row.target ? { ...row, met: met(row) } : row)),
  };
  await mkdir(RESULTS, { recursive: true });
  await writeFile(new URL(`${name}.md`, RESULTS), report);
  await writeFile(new URL(`${name}.json`, RESULTS), JSON.stringify(json, null, 2) + "\n");
  return report;
}

async function main(): Promise<void> {
  const { profile, redisUrl, only } = options();
  const sections = only ? [only] : SECTIONS.filter((s) => !s.alone);
  const embedded: EmbeddedRedis | undefined = redisUrl ? undefined : await startEmbeddedRedis();
  const lab = new Lab(redisUrl ?? embedded!.url);
  // Ctrl-C must not leave a redis-server behind.
  const interrupted = () => {
    lab.close();
    const exit = () => process.exit(130);
    (embedded?.stop() ?? Promise.resolve()).then(exit, exit);
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);
  try {
    const done = await run(sections, profile, lab, embedded !== undefined);
    console.log(await save(done, sections, only?.name));
  } finally {
    lab.close();
    await embedded?.stop();
  }
}

// Exits once the run is over, whatever a failed section left running (a timer, a loop, a socket):
// a broken run must end, not hang.
main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
