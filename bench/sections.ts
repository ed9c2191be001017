import { bigRooms } from "./bigRooms.js";
import { counts } from "./counts.js";
import { eventLog } from "./eventLog.js";
import { fanout } from "./fanout.js";
import { gateway } from "./gateway.js";
import { grace } from "./grace.js";
import { heartbeat } from "./heartbeat.js";
import { hocuspocus } from "./hocuspocus.js";
import { host } from "./host.js";
import { live } from "./live.js";
import { memory } from "./memory.js";
import { outage } from "./outage.js";
import { rosterReads } from "./roster.js";
import { scripts } from "./scripts.js";
import type { Section } from "./section.js";
import { socketIo } from "./socketio.js";
import { sweep } from "./sweep.js";
import { users } from "./users.js";
import { usersFollow } from "./usersFollow.js";

/**
 * Every section, in the order a run takes them and its report shows them. A section's report may
 * use the results of the sections before it. A new section is one file, added here.
 */
export const SECTIONS: readonly Section[] = [
  heartbeat,
  fanout,
  gateway,
  host,
  sweep,
  live,
  memory,
  eventLog,
  grace,
  counts,
  rosterReads,
  scripts,
  users,
  usersFollow,
  bigRooms,
  socketIo,
  hocuspocus,
  outage,
];
