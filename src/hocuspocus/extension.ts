import { EventEmitter } from "node:events";
import type {
  Connection as HocuspocusConnection,
  Document,
  Extension,
  connectedPayload,
  onDisconnectPayload,
} from "@hocuspocus/server";
import type { Rollcall } from "../engine/rollcall.js";
import type { Counts } from "../engine/scripts/count.js";
import type { Roster } from "../engine/scripts/roster.js";
import { InvalidInputError } from "../protocol/errors.js";
import type { PresenceEvent } from "../protocol/events.js";
import type { Snapshot } from "../protocol/replica.js";
import { checkId } from "../protocol/ids.js";
import { callback, integer, invalidOption, knownKeys } from "../protocol/options.js";
import { reportError } from "../runtime/background.js";
import { callHook, callNow, type Expect } from "../runtime/hooks.js";
import type { Connection } from "../runtime/connection.js";
import type { Sink } from "../runtime/feed.js";
import { Host } from "../runtime/host.js";
import { importPeer, requirePeer } from "../runtime/peer.js";
import type { SweeperOptions } from "../runtime/sweeper.js";
import { clientsOf, MIN_STATE_BYTES, mirroredState, Throttle } from "./state.js";

/**
 * y-protocols' awareness, an optional peer: imported as this module loads, through importPeer so
 * that a missing y-protocols names what to install (a static import fails before any code runs,
 * with a bare ERR_MODULE_NOT_FOUND). An import(), as jose is: it loads the copy a static import
 * would (require() of its ES module does not under tsx: a second yjs, which warns), and top-level
 * await would keep require() from loading this entry. listen() and every connection wait for it,
 * and fail with its error.
 */
const BY = "rollcall/hocuspocus";
let awareness: typeof import("y-protocols/awareness") | undefined;
const loading = importPeer(
  // Where this file runs as CommonJS (the tests, through tsx, beside Hocuspocus's CommonJS
  // build), the CommonJS build, as the static import compiled to require() loaded it.
  async () =>
    typeof require === "function"
      ? requirePeer<typeof import("y-protocols/awareness")>("y-protocols/awareness", BY)
      : import("y-protocols/awareness"),
  "y-protocols",
  BY,
).then((loaded) => void (awareness = loaded));
loading.catch(() => undefined); // waited for, and its error reported, where it is needed

/** What `identify` is given: the `connected` hook's payload (its context holds onAuthenticate's). */
export type IdentifyPayload = connectedPayload;

export interface HocuspocusPresenceOptions {
  /**
   * The user a connection is, from the hook payload (the context that onAuthenticate returned,
   * the request, …). Default: `context.user.id`, or `context.user` when it is a string. A
   * connection it names no valid user id for is closed (Forbidden) and reported on 'error'.
   */
  identify?: (payload: IdentifyPayload) => string | Promise<string>;
  /** How long `identify` may take; past it the connection is closed (Forbidden). Default 5 000. */
  identifyTimeoutMs?: number;
  /** The rollcall room of a document. Default: the document's name. */
  room?: (documentName: string) => string;
  /** How often every connection is refreshed. Default: a third of the presence window. */
  heartbeatMs?: number;
  /** Least time between two mirrored states of one member. Default 1 000. */
  stateIntervalMs?: number;
  /**
   * This instance's Sweeper, which announces crashed instances' users (one per instance): true
   * (the default) for one with the defaults, its options, or false for none.
   */
  sweeper?: SweeperOptions | boolean;
}

interface Events {
  /** A presence event of a document with connections here, from any instance. */
  event: [event: PresenceEvent, documentName: string];
  /** A call that failed (Redis unavailable, an identity rejected): reported, never thrown. */
  error: [error: Error];
}

/** One Hocuspocus connection (a socket in a document): one rollcall connection. */
interface Member {
  readonly doc: Doc;
  readonly hocuspocus: HocuspocusConnection;
  /** Its presence: the join, each mirrored state and the leave, in order. */
  readonly connection: Connection<Doc>;
}

/** A document with connections on this instance (or with leaves of its last ones awaited). */
interface Doc {
  readonly name: string;
  readonly room: string;
  /** Hocuspocus's document: another one when a connection comes after it was unloaded. */
  document: Document;
  /** By Hocuspocus socket id. */
  readonly members: Map<string, Member>;
  /** Awareness client id → user, for every member's clients, as their states say. */
  readonly owners: Map<number, string>;
  /** Settles once the room is followed (subscribed, its snapshot read), or failed to be. */
  followed: Promise<void>;
  /** Leaves of its members' users awaited: it is followed until they are heard (see leave). */
  awaiting: number;
  readonly onAwareness: (changes: unknown, origin: unknown) => void;
}

const isString: Expect<string> = (value): value is string => typeof value === "string";
/** A WebSocket's readyState while it is open. */
const OPEN = 1;

/** The origin of the awareness removals this extension makes. */
const ORIGIN = "rollcall";
const FORBIDDEN = { code: 4403, reason: "Forbidden" };

/** The awareness client ids that came through a socket (Hocuspocus keeps them per socket). */
function socketClients(document: Document, socket: HocuspocusConnection["webSocket"]): number[] {
  return [...(document.getClients(socket) as Set<number>)];
}

function defaultIdentify({ context }: IdentifyPayload): string {
  const user = (context as { user?: unknown } | null)?.user;
  if (typeof user === "string") return user;
  return (user as { id?: unknown } | null | undefined)?.id as string;
}

/**
 * A Hocuspocus server extension that makes presence global and crash-safe, alongside
 * @hocuspocus/extension-redis: every connection is a member of its document's room across all
 * instances (`roster`, `count`), heartbeated in batches; a crashed instance's users leave once,
 * announced by a surviving instance's Sweeper, and every instance then removes their awareness
 * clients from its documents. Each member's awareness state is mirrored as its member state.
 */
export class HocuspocusPresence extends EventEmitter<Events> implements Extension {
  /** After extension-redis (priority 1000) and most others: it reads what they set up. */
  readonly priority = 10;
  readonly extensionName = "rollcall";
  private readonly docs = new Map<string, Doc>();
  private readonly identify: (payload: IdentifyPayload) => string | Promise<string>;
  private readonly identifyTimeoutMs: number;
  private readonly roomOf: (documentName: string) => string;
  private readonly host: Host<Doc>;
  /** Keyed by documentName and user: one mirrored state per member and interval. */
  private readonly throttle: Throttle<string>;
  private readonly pending = new Set<Promise<unknown>>();
  private closed = false;

  constructor(
    readonly rollcall: Rollcall,
    options?: HocuspocusPresenceOptions,
  ) {
    super();
    const o = knownKeys(options, [
      "identify",
      "identifyTimeoutMs",
      "room",
      "heartbeatMs",
      "stateIntervalMs",
      "sweeper",
    ]);
    if (rollcall.settings.maxStateBytes < MIN_STATE_BYTES) {
      invalidOption(`rollcall/hocuspocus needs a maxStateBytes of at least ${MIN_STATE_BYTES}`);
    }
    this.identify = callback("identify", o.identify) ?? defaultIdentify;
    this.identifyTimeoutMs = integer(
      "identifyTimeoutMs",
      o.identifyTimeoutMs ?? 5_000,
      10,
      600_000,
    );
    this.roomOf = callback("room", o.room) ?? ((name) => name);
    const stateMs = integer("stateIntervalMs", o.stateIntervalMs ?? 1_000, 1, 3_600_000);
    // What a document's room says, through the host's feed: its events in chain order, and a
    // snapshot when it is followed and after every gap.
    const sink: Sink<Doc> = {
      events: (doc, batch) => {
        for (const event of batch.events) this.receive(doc, event);
      },
      snapshot: (doc, snapshot) => this.synced(doc, snapshot),
    };
    this.host = new Host<Doc>(rollcall, sink, (error) => this.report(error), {
      ...(o.heartbeatMs === undefined ? {} : { heartbeatMs: o.heartbeatMs }),
      ...(o.sweeper === undefined ? {} : { sweeper: o.sweeper }),
    });
    this.throttle = new Throttle(stateMs, (key) => this.mirror(key));
  }

  /** Who is in a document, across every instance (one page: see Rollcall.roster). */
  async roster(documentName: string, options?: { cursor?: string }): Promise<Roster> {
    return this.rollcall.roster(this.room(documentName), options);
  }

  /** How many users, connections and typists a document has, across every instance. */
  async count(documentName: string): Promise<Counts> {
    return this.rollcall.count(this.room(documentName));
  }

  /** Hocuspocus hook: listen() rejects with the error of a missing peer, naming what to install. */
  async onListen(): Promise<void> {
    await loading;
  }

  /** Hocuspocus hook: the connection joins its document's room. Never rejects. */
  async connected(payload: connectedPayload): Promise<void> {
    const { documentName, connection, socketId } = payload;
    let user: string;
    let room: string;
    try {
      await loading;
      const named = await callHook(
        "identify",
        () => this.identify(payload),
        isString,
        "a user id",
        this.identifyTimeoutMs,
      );
      user = checkId("user", named);
      room = this.room(documentName);
    } catch (error) {
      this.report(error);
      connection.close(FORBIDDEN);
      return;
    }
    // The connection went while `identify` ran: it has nothing to join (nor to leave).
    if (this.closed || connection.webSocket.readyState !== OPEN) return;
    const doc = this.docs.get(documentName) ?? this.open(documentName, room, connection.document);
    if (doc.document !== connection.document) this.attach(doc, connection.document);
    const member: Member = { doc, hocuspocus: connection, connection: this.host.connect(user) };
    doc.members.set(socketId, member);
    // Followed first, then joined, before anything else of the member's (its mirrored states,
    // its leave): every event of the room from this join on reaches 'event'. A join that failed
    // is made by the heartbeat rounds.
    const joined = member.connection.inTurn(async (turn) => {
      await doc.followed;
      return turn.join(room, { retry: true });
    });
    this.track(joined);
    // Awareness that came with the connection, before this hook.
    if (socketClients(connection.document, connection.webSocket).length > 0) this.changed(member);
    await joined.catch(() => undefined);
  }

  /**
   * Hocuspocus hook: the connection leaves its document's room. The document stays followed
   * until the user's leave is heard (at once, or when the grace ends), so that `event` reports
   * it even after the document's last connection here. Never rejects.
   */
  async onDisconnect({ documentName, socketId }: onDisconnectPayload): Promise<void> {
    const doc = this.docs.get(documentName);
    const member = doc?.members.get(socketId);
    if (!doc || !member) return;
    doc.members.delete(socketId);
    if (doc.members.size > 0) this.changed(member); // its clients leave the user's state
    const left = this.leave(doc, member.connection).finally(() => member.connection.close());
    this.track(left);
    await left.catch(() => undefined);
  }

  /** Hocuspocus hook: the server stops. */
  async onDestroy(): Promise<void> {
    await this.close();
  }

  /**
   * Stops heartbeating, sweeping and listening, after the leaves in flight. Connections still
   * open are left to expire: close Hocuspocus's first (its destroy() does) to announce them.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.throttle.clear();
    for (const doc of [...this.docs.values()]) {
      for (const member of doc.members.values()) member.connection.abandon();
      this.shut(doc);
    }
    await Promise.allSettled([...this.pending]);
    await this.host.close();
  }

  private room(documentName: string): string {
    if (typeof documentName !== "string") {
      throw new InvalidInputError("INVALID_ID", "a document name must be a string");
    }
    const roomOf = this.roomOf;
    return checkId(
      "room",
      callNow("room", () => roomOf(documentName), isString, "a room id"),
    );
  }

  /** Starts following a document: its room's events, its awareness changes. */
  private open(name: string, room: string, document: Document): Doc {
    const onAwareness = (_changes: unknown, origin: unknown) => {
      // Changes from a local client carry its socket as origin; relayed ones do not.
      const socketId = doc.document.connections.get(origin as never)?.connection.socketId;
      const member = socketId === undefined ? undefined : doc.members.get(socketId);
      if (member) this.changed(member);
    };
    const doc: Doc = {
      name,
      room,
      document,
      members: new Map(),
      owners: new Map(),
      onAwareness,
      followed: Promise.resolve(),
      awaiting: 0,
    };
    doc.followed = this.host.follow(room, doc).catch((error: unknown) => this.report(error));
    this.docs.set(name, doc);
    document.awareness.on("update", onAwareness);
    return doc;
  }

  /** A document followed still, while leaves were awaited, was unloaded: the new one's awareness. */
  private attach(doc: Doc, document: Document): void {
    doc.document.awareness.off("update", doc.onAwareness);
    doc.document = document;
    document.awareness.on("update", doc.onAwareness);
  }

  /**
   * A member's connection leaves the document's room. The document stays followed until its
   * user's leave is passed on (LocalRoom.awaitLeave), when a leave is coming; it is shut once it
   * has neither connections nor leaves awaited.
   */
  private leave(doc: Doc, connection: Connection<Doc>): Promise<void> {
    doc.awaiting += 1;
    const ended = () => {
      doc.awaiting -= 1;
      if (doc.members.size === 0 && doc.awaiting === 0) this.shut(doc);
    };
    const leave = () => connection.leave(doc.room);
    return this.host.room(doc.room).awaitLeave(connection.user, leave, ended);
  }

  /** Stops following a document that has no connections here any more. */
  private shut(doc: Doc): void {
    if (this.docs.get(doc.name) === doc) this.docs.delete(doc.name);
    doc.document.awareness.off("update", doc.onAwareness);
    this.host.unfollow(doc.room, doc);
  }

  /** A member's awareness changed: its state is mirrored, at most once per interval. */
  private changed(member: Member): void {
    this.throttle.changed(JSON.stringify([member.doc.name, member.connection.user]));
  }

  /**
   * A member's awareness, mirrored as its state (the throttle calls it): the clients of all its
   * connections to the document here, and the awareness state of the first that has one.
   */
  private mirror(key: string): void {
    const [name, user] = JSON.parse(key) as [string, string];
    const doc = this.docs.get(name);
    const members = [...(doc?.members.values() ?? [])].filter((m) => m.connection.user === user);
    if (this.closed || !doc || members.length === 0) return;
    const clients = members.flatMap((m) => socketClients(doc.document, m.hocuspocus.webSocket));
    const states = doc.document.awareness.getStates();
    const awareness = clients.map((id) => states.get(id)).find((s) => s) ?? null;
    const state = mirroredState(clients, awareness, this.rollcall.settings.maxStateBytes);
    // A heartbeat with the state, in the member's order: never before its join, nor after its leave.
    this.track(members[0]!.connection.join(doc.room, { state, retry: true }));
  }

  private receive(doc: Doc, event: PresenceEvent): void {
    if (event.type === "join" || event.type === "update") this.own(doc, event.user, event.state);
    if (event.type === "leave") this.removeClients(doc, event.user);
    this.emit("event", event, doc.name);
  }

  /** Records which awareness clients a member's state names. */
  private own(doc: Doc, user: string, state: Parameters<typeof clientsOf>[0]): void {
    for (const id of clientsOf(state)) doc.owners.set(id, user);
  }

  /**
   * A user left the document everywhere: removes the awareness states of its clients that are
   * not this instance's own (those Hocuspocus removes itself), and tells the local clients.
   */
  private removeClients(doc: Doc, user: string): void {
    const local = new Set(
      [...doc.document.connections.keys()].flatMap((s) => socketClients(doc.document, s)),
    );
    const gone: number[] = [];
    for (const [id, owner] of doc.owners) {
      if (owner !== user) continue;
      doc.owners.delete(id);
      if (!local.has(id) && doc.document.awareness.states.has(id)) gone.push(id);
    }
    // A member's connection joined after `loading` settled: the module is there.
    if (gone.length > 0) awareness!.removeAwarenessStates(doc.document.awareness, gone, ORIGIN);
  }

  /**
   * The room's roster, when it is followed and after every gap: the clients of members present
   * before this instance followed the document (or while it lost track), and the leaves it
   * missed meanwhile.
   */
  private synced(doc: Doc, snapshot: Snapshot): void {
    const present = new Set<string>();
    for (const { user, state } of snapshot.members) {
      present.add(user);
      this.own(doc, user, state);
    }
    for (const owner of new Set(doc.owners.values())) {
      if (!present.has(owner)) this.removeClients(doc, owner);
    }
  }

  /** Keeps a call's promise until it settles (close() waits for it); its failure is reported. */
  private track(promise: Promise<unknown>): void {
    const tracked = promise.catch((error: unknown) => this.report(error));
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
  }

  private report(error: unknown): void {
    reportError(this, error);
  }
}
