import { expect } from "chai";
import {
  DataPointType,
  MeterProvider,
  MetricReader,
  type MetricData,
} from "@opentelemetry/sdk-metrics";
import WebSocket from "ws";
import { Rollcall, Sweeper } from "../../src/index.js";
import { closeGateways, connect, startGateway } from "../kit/gateway.js";
import { IMMEDIATE, client } from "../kit/redis.js";
import { advanceClock } from "../kit/clock.js";
import { eventually } from "../kit/wait.js";

/** A reader the test collects from when it wants. */
class TestReader extends MetricReader {
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
}

/** Counter sums and histogram counts, keyed `name{attr=value,…}`. */
async function collect(reader: TestReader): Promise<Map<string, number>> {
  const { resourceMetrics } = await reader.collect();
  const values = new Map<string, number>();
  const metrics: MetricData[] = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
  for (const metric of metrics) {
    for (const point of metric.dataPoints) {
      const attributes = Object.entries(point.attributes)
        .map(([k, v]) => `${k}=${String(v)}`)
        .join(",");
      const value =
        metric.dataPointType === DataPointType.HISTOGRAM
          ? (point.value as { count: number }).count
          : (point.value as number);
      values.set(`${metric.descriptor.name}{${attributes}}`, value);
    }
  }
  return values;
}

describe("metrics", () => {
  afterEach(closeGateways);

  it("count calls, events, sweeps and gateway sockets through the application's Meter", async () => {
    const reader = new TestReader();
    const meter = new MeterProvider({ readers: [reader] }).getMeter("rollcall");
    const options = { presenceWindowMs: 1_000, typingWindowMs: 300, keyTtlMs: 3_000, meter };
    const rc = new Rollcall(client(), { ...IMMEDIATE, ...options });
    await rc.heartbeat("room", "ann", "c");
    await rc.heartbeat("room", "ann", "c");
    await rc.startTyping("room", "ann");
    await rc.heartbeat("room", "bob", "c");
    await rc.leave("room", "bob", "c");
    await advanceClock(rc.redis, rc, 1_100);
    await new Sweeper(rc).sweepOnce();

    const { url } = await startGateway({ sweeper: false }, options);
    const cy = connect(url, "cy");
    await cy.join("doc");
    const refused = new WebSocket(url, ["rollcall.v1"]);
    refused.on("error", () => undefined);
    const values = await (async () => {
      await eventually(() => refused.readyState === WebSocket.CLOSED);
      return collect(reader);
    })();

    expect(values.get("rollcall.calls{operation=heartbeat,outcome=ok}")).to.equal(4); // + cy's join
    expect(values.get("rollcall.call.duration{operation=heartbeat}")).to.equal(4);
    expect(values.get("rollcall.events{type=join}")).to.equal(3);
    expect(values.get("rollcall.events{type=typing-start}")).to.equal(1);
    expect(values.get("rollcall.events{type=leave}")).to.equal(2); // bob's, then ann's expiry
    expect(values.get("rollcall.events{type=typing-stop}")).to.equal(1); // ann's, before her leave
    expect(values.get("rollcall.sweep.passes{outcome=ok}")).to.equal(1);
    expect(values.get("rollcall.sweep.expirations{kind=leave}")).to.equal(1);
    expect(values.get("rollcall.sweep.lag{}")).to.equal(1);
    expect(values.get("rollcall.gateway.sockets{}")).to.equal(1);
    expect(values.get("rollcall.gateway.frames{type=join}")).to.equal(1);
    expect(values.get("rollcall.gateway.refusals{reason=no-token}")).to.equal(1);
  });
});
