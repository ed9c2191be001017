import js from "@eslint/js";
import tseslint from "typescript-eslint";

// Redis data commands, as ioredis methods: only src/engine runs them (and names keys).
const DATA_COMMANDS =
  "/^(pipeline|multi|eval|evalsha|h(get|getall|mget|set|setnx|del|len|keys|vals|scan|incrby|strlen)|" +
  "z(add|range|rangebyscore|rem|score|card|count|scan|popmin|incrby)|" +
  "x(add|range|revrange|read|readgroup|group|ack|autoclaim|claim|pending|trim|len)|" +
  "zscan|hscan|pexpire|incrby|getrange|setrange|flushall|flushdb|unlink|dbsize)$/";

/** The layers, bottom up: each may import only from those below it (and itself). */
const LAYERS = {
  protocol: ["engine", "runtime", "gateway", "client", "cli", "dev"],
  client: ["engine", "runtime", "gateway", "cli", "dev"],
  engine: ["runtime", "gateway", "client", "cli", "dev"],
  runtime: ["gateway", "client", "cli", "dev"],
  gateway: ["client", "cli", "dev", "socketio", "hocuspocus"],
  socketio: ["gateway", "client", "cli", "dev", "hocuspocus"],
  hocuspocus: ["gateway", "client", "cli", "dev", "socketio"],
  cli: ["gateway", "client", "dev"],
};
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
              message: `src/${layer} sits below ${above.join(", ")}: it must not import them.`,
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
