# `make demo` and `make test` are the two set-up commands; both install dependencies when needed.
BIN := node_modules/.bin

.PHONY: demo test check unit bench bench-smoke build format

node_modules/.installed: package.json package-lock.json
	npm ci
	@touch $@

# The page loads the browser client as tsc emits it (dist/client, dist/protocol): build first.
demo: build
	$(BIN)/tsx src/dev/demo.ts

# What CI runs: types, lint, format, the tests against a real redis-server, and the bench smoke run.
test: check unit bench-smoke

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

build: node_modules/.installed
	$(BIN)/tsc -p tsconfig.build.json

format: node_modules/.installed
	$(BIN)/prettier --write .
