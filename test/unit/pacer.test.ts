import { expect } from "chai";
import { ResyncPacer } from "../../src/protocol/backoff.js";

describe("the resync pacer", () => {
  it("resyncs at once, then at doubling intervals while resyncs keep coming, up to its bound", () => {
    const pacer = new ResyncPacer(100, 2_000);
    let now = 0;
    const at: number[] = [];
    // Something asks for a resync every millisecond for 10 s: a flood of foreign messages.
    for (; now < 10_000; now += 1) {
      const pause = pacer.delay(now);
      at.push(now + pause);
      now += pause;
    }
    expect(at.slice(0, 7)).to.deep.equal([0, 100, 300, 700, 1500, 3100, 5100]);
    expect(at.filter((t) => t < 10_000)).to.have.length(9); // then one every 2 s
  });

  it("resyncs at once again after a quiet spell", () => {
    const pacer = new ResyncPacer(100, 2_000);
    expect([pacer.delay(0), pacer.delay(1), pacer.delay(200)]).to.deep.equal([0, 99, 100]);
    expect(pacer.delay(2_400)).to.equal(0);
    expect(pacer.delay(2_401)).to.equal(99);
  });
});
