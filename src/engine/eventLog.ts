import { RedisCallError } from "./errors.js";
import { dedicatedConnection } from "./connections.js";
import type { Layout } from "./layout.js";
import type { Client } from "./script.js";

/** One entry of a bucket's log: its stream id and the event's JSON, or null once trimmed. */
export interface LogRecord {
  readonly id: string;
  readonly json: string | null;
}

type StreamEntries = [id: string, fields: string[]][];

/** The JSON of entries as the stream gives them (a pending entry trimmed away has no fields). */
export function records(entries: StreamEntries): LogRecord[] {
  return entries.map(([id, fields]) => ({ id, json: fields?.[1] ?? null }));
}

/** The stream's group is gone with its data (NOGROUP): it must be made again. */
export function isGroupLost(error: unknown): boolean {
  return String((error as Error)?.message ?? error).includes("NOGROUP");
}

/**
 * A consumer group's access to every bucket's log, on a connection of its own: what a
 * LogConsumer reads, claims and acknowledges. Failures are RedisCallErrors.
 */
export class LogGroup {
  private readonly connection: Client;

  constructor(
    client: Client,
    private readonly layout: Layout,
    readonly group: string,
    readonly consumer: string,
    onError: (error: RedisCallError) => void,
  ) {
    this.connection = dedicatedConnection(client);
    this.connection.on("error", (error: Error) => onError(new RedisCallError("log", error)));
  }

  /** Makes the group on the bucket's log (and the log itself), unless it exists. */
  async create(bucket: number, from: "start" | "end"): Promise<void> {
    try {
      await this.connection.xgroup(
        "CREATE",
        this.layout.log(bucket),
        this.group,
        from === "end" ? "$" : "0",
        "MKSTREAM",
      );
    } catch (error) {
      if (!String(error).includes("BUSYGROUP")) throw new RedisCallError("log group", error);
    }
  }

  /** This consumer's pending entries (delivered, not acknowledged), or new ones. */
  async read(bucket: number, which: "pending" | "new", count: number): Promise<LogRecord[]> {
    const reply = (await this.run(() =>
      this.connection.xreadgroup(
        "GROUP",
        this.group,
        this.consumer,
        "COUNT",
        count,
        "STREAMS",
        this.layout.log(bucket),
        which === "pending" ? "0" : ">",
      ),
    )) as [string, StreamEntries][] | null;
    return records(reply?.[0]?.[1] ?? []);
  }

  /** Claims entries idle this long in the group; `deleted` lists those trimmed meanwhile. */
  async claim(
    bucket: number,
    idleMs: number,
    count: number,
  ): Promise<{ records: LogRecord[]; deleted: string[] }> {
    const [, entries, deleted] = (await this.run(() =>
      this.connection.xautoclaim(
        this.layout.log(bucket),
        this.group,
        this.consumer,
        idleMs,
        "0-0",
        "COUNT",
        count,
      ),
    )) as [string, StreamEntries, string[]?];
    return { records: records(entries), deleted: deleted ?? [] };
  }

  async ack(bucket: number, ids: readonly string[]): Promise<void> {
    if (ids.length > 0) {
      await this.run(() => this.connection.xack(this.layout.log(bucket), this.group, ...ids));
    }
  }

  close(): void {
    this.connection.disconnect();
  }

  private async run<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (error) {
      throw new RedisCallError("log", error);
    }
  }
}
