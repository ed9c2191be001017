# `make demo` and `make test` are the two set-up commands; both install dependencies when needed.
BIN := node_modules/.bin

.PHONY: demo test check unit bench bench-smoke chaos chaos-smoke build format

node_modules/.installed: package.json package-lock.json
	npm ci
	@touch $@

# The page loads the browser client as tsc emits it (dist/client, dist/protocol): build first.
demo: build
	$(BIN)/tsx src/dev/demo.ts

# What CI runs: types, lint, format, the tests against a real redis-server, and the bench and
# chaos smoke runs.
test: check unit bench-smoke chaos-smoke

check: node_modules/.installed
	$(BIN)/tsc -p tsconfig.json
	$(BIN)/eslint .
	$(BIN)/prettier --check .

unit: node_modules/.installed
	npm test

bench: node_modules/.installed
	$(BIN)/tsx bench/main.ts

bench-smoke: node_modules/.installed
	$(BIN)/tsx bench/main.ts --smoke

# Writer and sweeper processes under random faults (kills, CLIENT KILL and PAUSE, SCRIPT FLUSH,
# SIGSTOP and restarts of Redis), then the invariant checker; a few minutes, table in
# test/chaos/results.md. Replay a run with its seed: tsx test/chaos/main.ts --seed S ...
chaos: node_modules/.installed
	$(BIN)/tsx test/chaos/main.ts --profile full

chaos-smoke: node_modules/.installed
	$(BIN)/tsx test/chaos/main.ts --profile smoke

build: node_modules/.installed
	$(BIN)/tsc -p tsconfig.build.json

format: node_modules/.installed
	$(BIN)/prettier --write .
