import { expect } from "chai";
import { loadScripts } from "../../src/engine/loader.js";

const fixture = (name: string) => new URL(`./fixtures/lua/${name}/`, import.meta.url);

describe("the Lua loader", () => {
  it("puts each include once before what needs it, whatever order they are listed in", () => {
    const main = loadScripts(fixture("ordered")).get("main")!;
    expect(main.numberOfKeys).to.equal(1);
    const order = ["function base", "function middle", "function top", "return top()"].map((s) =>
      main.lua.indexOf(s),
    );
    expect(order.every((at) => at >= 0)).to.equal(true);
    expect([...order].sort((a, b) => a - b)).to.deep.equal(order);
    expect(main.lua.split("function base").length).to.equal(2);
    expect(main.lua).to.not.include("@include");
  });

  it("refuses an include cycle, naming it", () => {
    expect(() => loadScripts(fixture("cycle"))).to.throw(/include cycle p -> q -> p/);
  });

  it("refuses an unknown include, a malformed include line, a bad file name and an empty folder", () => {
    expect(() => loadScripts(fixture("unknown"))).to.throw(/y-0.lua includes unknown "nowhere"/);
    expect(() => loadScripts(fixture("malformed"))).to.throw(/malformed include line/);
    expect(() => loadScripts(fixture("badName"))).to.throw(/is not named <name>-<keys>.lua/);
    expect(() => loadScripts(fixture("empty"))).to.throw(/no Lua scripts/);
  });

  it("names each script by the SHA-1 of its expanded source", () => {
    const scripts = loadScripts();
    const shas = [...scripts.values()].map((s) => s.sha);
    expect(new Set(shas).size).to.equal(shas.length);
    expect(scripts.get("heartbeat")!.numberOfKeys).to.equal(4);
  });
});

/** The names a chunk declares at its top level (`local x, y = ...`, `local function f`). */
function topLevelNames(lua: string): string[] {
  return [
    ...lua.matchAll(/^local (?:function ([A-Za-z_]\w*)|([A-Za-z_][\w, ]*?)\s*(?:=|$))/gm),
  ].flatMap(([, fn, list]) => (fn ? [fn] : list!.split(",").map((name) => name.trim())));
}

describe("the expanded scripts", () => {
  it("keep at most 60 names at their top level: a slow path's helpers live in modules", () => {
    const fixture = "local a, b = 1, 2\nlocal function f()\n  local c = 3\nend\nlocal d\n";
    expect(topLevelNames(fixture)).to.deep.equal(["a", "b", "f", "d"]);
    for (const { name, lua } of loadScripts().values()) {
      const names = topLevelNames(lua);
      expect(new Set(names).size, `${name} declares a name twice`).to.equal(names.length);
      expect(names.length, name).to.be.at.most(60);
    }
  });
});

describe("outcome codes", () => {
  it("are named alike, in the same order, by each script and its TypeScript decoder", async () => {
    const modules = await Promise.all(
      ["heartbeat", "leave", "setState", "startTyping", "stopTyping"].map(
        (name) => import(`../../src/engine/scripts/${name}.js`) as Promise<Record<string, unknown>>,
      ),
    );
    const scripts = loadScripts();
    for (const module of modules) {
      const script = Object.values(module)[0] as { name: string; outcomes: readonly string[] };
      const lua = scripts.get(script.name)!.lua;
      const named = /local OUTCOME = outcomes\(([^)]*)\)/.exec(lua)?.[1];
      expect(named, script.name).to.be.a("string");
      const names = [...named!.matchAll(/'([A-Za-z]+)'/g)].map((m) => m[1]);
      expect(names, script.name).to.deep.equal([...script.outcomes]);
      // Every outcome the script returns is one it named.
      for (const [, used] of lua.matchAll(/OUTCOME\.([A-Za-z]+)/g)) {
        expect(names, `${script.name} returns OUTCOME.${used}`).to.include(used);
      }
    }
  });
});
