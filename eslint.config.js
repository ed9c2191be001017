import { readdirSync } from "node:fs";
import js from "@eslint/js";
import tseslint from "typescript-eslint";

// Redis data commands, as ioredis methods: only src/engine runs them (and names keys).
const DATA_COMMANDS =
  "/^(pipeline|multi|eval|evalsha|h(get|getall|mget|set|setnx|del|len|keys|vals|scan|incrby|strlen)|" +
  "z(add|range|rangebyscore|rem|score|card|count|scan|popmin|incrby)|" +
  "x(add|range|revrange|read|readgroup|group|ack|autoclaim|claim|pending|trim|len)|" +
  "zscan|hscan|pexpire|incrby|getrange|setrange|flushall|flushdb|unlink|dbsize)$/";

/**
 * The layers of src/, bottom up: a folder may import from the levels below its own, never from
 * its own level's other folders nor from above. Every folder of src/ must stand here: a new one
 * fails the lint until it is given its level.
 */
const LEVELS = [
  ["protocol"],
  ["engine", "client"],
  ["runtime"],
  ["gateway", "socketio", "hocuspocus", "fastify", "cli"],
  ["dev"],
];
const FOLDERS = readdirSync(`${import.meta.dirname}/src`, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name);
for (const folder of FOLDERS) {
  if (!LEVELS.flat().includes(folder)) {
    throw new Error(`eslint.config.js: src/${folder} has no level in LEVELS`);
  }
}
/** Each folder, and the folders it must not import: its own level's others, and every level above. */
const LAYERS = Object.fromEntries(
  LEVELS.flatMap((level, i) =>
    level.map((folder) => [
      folder,
      [...level.filter((other) => other !== folder), ...LEVELS.slice(i + 1).flat()],
    ]),
  ).filter(([, above]) => above.length > 0),
);
// Isomorphic code (the browser loads it as it is): no Node built-ins, no server libraries.
const ISOMORPHIC = ["node:*", "ioredis", "ws", "jose"];

export default tseslint.config(
  // *.tmp.ts: what a test writes and runs for a moment (the docs' examples), git-ignored too.
  {
    ignores: ["dist/", "node_modules/", "bench/results/", "test/package/fixtures/", "**/*.tmp.ts"],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
    },
  },
  ...Object.entries(LAYERS).map(([layer, above]) => ({
    files: [`src/${layer}/**/*.ts`],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: above.map((name) => `**/${name}/*`),
              message: `src/${layer} must not import ${above.join(", ")}: its level's others, or above.`,
            },
            ...(layer === "protocol" || layer === "client"
              ? [{ group: ISOMORPHIC, message: `src/${layer} runs in browsers too.` }]
              : []),
          ],
        },
      ],
    },
  })),
  {
    files: ["src/**/*.ts"],
    ignores: ["src/engine/**"],
    rules: {
      "no-restricted-syntax": [
        "error",
        {
          selector: `CallExpression > MemberExpression.callee > Identifier.property[name=${DATA_COMMANDS}]`,
          message: "Only src/engine runs Redis data commands: add an engine method.",
        },
        {
          selector:
            "MemberExpression[property.name=/^(redis|layout)$/]:matches([object.name=/^rollcall$/i], [object.property.name=/^rollcall$/i])",
          message: "The Rollcall's client and layout are the engine's: add an engine method.",
        },
      ],
    },
  },
  { files: ["**/*.js"], extends: [tseslint.configs.disableTypeChecked] },
);
