/** What rollcall attaches to a measurement: its operation, outcome, type… */
export type MetricAttributes = Record<string, string | number | boolean>;

interface InstrumentOptions {
  description?: string;
  unit?: string;
}

interface Sum {
  add(value: number, attributes?: MetricAttributes): void;
}

interface Distribution {
  record(value: number, attributes?: MetricAttributes): void;
}

/**
 * The part of an OpenTelemetry `Meter` rollcall uses. Any Meter is one, and rollcall's type
 * declarations need no @opentelemetry/api: a TypeScript user without it still compiles.
 */
export interface MeterLike {
  createCounter(name: string, options?: InstrumentOptions): Sum;
  createUpDownCounter(name: string, options?: InstrumentOptions): Sum;
  createHistogram(name: string, options?: InstrumentOptions): Distribution;
}

/**
 * The counters and histograms a dashboard wants, recorded through OpenTelemetry's API when the
 * application hands rollcall a `Meter` (so they go wherever its SDK exports: Prometheus, OTLP…).
 * Without one nothing is created or recorded: no dependency at runtime.
 */
export class Metrics {
  private readonly counters = new Map<string, Sum>();
  private readonly histograms = new Map<string, Distribution>();

  constructor(private readonly meter: MeterLike | undefined) {}

  /** Whether anything is recorded: without a meter, a caller skips measuring altogether. */
  get on(): boolean {
    return this.meter !== undefined;
  }

  /** A counter (or, with `upDown`, a gauge-like sum) incremented by `value`. */
  add(name: string, value: number, attributes: MetricAttributes = {}, upDown = false): void {
    if (!this.meter) return;
    let counter = this.counters.get(name);
    if (!counter) {
      const description = DESCRIPTIONS[name] ?? name;
      counter = upDown
        ? this.meter.createUpDownCounter(name, { description })
        : this.meter.createCounter(name, { description });
      this.counters.set(name, counter);
    }
    counter.add(value, attributes);
  }

  /** A measurement in milliseconds. */
  record(name: string, ms: number, attributes: MetricAttributes = {}): void {
    if (!this.meter) return;
    let histogram = this.histograms.get(name);
    if (!histogram) {
      histogram = this.meter.createHistogram(name, {
        description: DESCRIPTIONS[name] ?? name,
        unit: "ms",
      });
      this.histograms.set(name, histogram);
    }
    histogram.record(ms, attributes);
  }
}

const DESCRIPTIONS: Record<string, string> = {
  "rollcall.calls": "Engine calls by operation and outcome (ok or an error code)",
  "rollcall.call.duration": "Engine call latency, call to reply, by operation",
  "rollcall.events": "Events this instance published, by type (its calls' and its sweeps')",
  "rollcall.sweep.passes": "Sweeper passes by outcome",
  "rollcall.sweep.expirations": "What sweeps expired: connections, leaves, typing stops",
  "rollcall.sweep.lag":
    "Age of the oldest overdue room when a pass listed it: how far behind sweeping is",
  "rollcall.sweep.duration": "Duration of a sweeper pass",
  "rollcall.subscriber.connection": "Subscriber connection lost or back",
  "rollcall.watch.syncs": "Replica catch-ups by reason (start, gap, reconnect, log)",
  "rollcall.log.entries": "Log entries handled by outcome (ok, failed, given-up, trimmed)",
  "rollcall.gateway.sockets": "Gateway sockets open",
  "rollcall.gateway.frames": "Frames received by type",
  "rollcall.gateway.refusals": "Refused upgrades and error frames, by reason or code",
  "rollcall.gateway.snapshot.reads":
    "Snapshot reads of the gateway's rooms (each shared by the sockets that joined together), by pages",
};
