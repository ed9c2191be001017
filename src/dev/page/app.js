/* global document, location, fetch, window, URLSearchParams, localStorage */
// The demo page: joins a room through the browser client (tsc's output, served as plain ES
// modules), and shows the live roster, who is typing, and each change as it arrives.
import { RollcallClient } from "/client/index.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const roomId = params.get("room") || "lobby";

$("room").textContent = `#${roomId}`;
$("instance").textContent = `gateway :${location.port}`;
$("name").value = params.get("user") ?? "";
$("login").addEventListener("submit", (e) => {
  e.preventDefault();
  begin($("name").value.trim());
});
if (params.get("user")) begin(params.get("user"));

function begin(user) {
  start(user).catch((error) => log(`error: ${error.message}`));
}

async function token(user) {
  const response = await fetch(`/token?user=${encodeURIComponent(user)}`);
  if (!response.ok) throw new Error(await response.text());
  return (await response.json()).token;
}

function log(text) {
  const item = document.createElement("li");
  const time = document.createElement("time");
  time.textContent = new Date().toLocaleTimeString();
  item.append(time, ` ${text}`);
  $("log").prepend(item);
}

function describe(change) {
  const { type, user, event } = change;
  const resynced = event ? "" : " (seen on resync)";
  if (type === "join") return `+ ${user} joined${resynced}`;
  if (type === "leave") {
    const why = event?.reason === "expired" ? ", timed out" : "";
    return `- ${user} left${why}${resynced}`;
  }
  if (type === "update") return `~ ${user} is now ${event?.state?.status ?? "updated"}`;
  return null; // typing shows in the indicator, not the log
}

function render(room, me) {
  const { members, typing, count } = room.roster;
  $("count").textContent = String(count);
  $("roster").replaceChildren(
    ...members.map((member) => {
      const status = String(member.state?.status ?? "online");
      const item = document.createElement("li");
      item.dataset.user = member.user;
      item.className = status;
      const dot = document.createElement("span");
      dot.className = "dot";
      const name = document.createElement("b");
      name.textContent = member.user === me ? `${member.user} (you)` : member.user;
      const state = document.createElement("span");
      state.className = "state";
      state.textContent = status;
      item.append(dot, name, state);
      if (typing.includes(member.user)) {
        const dots = document.createElement("span");
        dots.className = "typing";
        dots.textContent = "typing…";
        item.append(dots);
      }
      return item;
    }),
  );
  const others = typing.filter((user) => user !== me);
  $("typing").textContent =
    others.length === 0
      ? ""
      : others.length === 1
        ? `${others[0]} is typing…`
        : others.length === 2
          ? `${others[0]} and ${others[1]} are typing…`
          : `${others.length} people are typing…`;
}

let staleSince = null;

/** Shows the roster as out of date while the page is away from its gateway, or as live again. */
function showStale(stale) {
  if (stale && staleSince === null) staleSince = new Date();
  if (!stale) staleSince = null;
  $("present").classList.toggle("stale", stale);
  $("stale").hidden = !stale;
  $("stale").textContent = stale
    ? `Reconnecting: as of ${staleSince.toLocaleTimeString()}, this may be out of date.`
    : "";
}

/** The status a member chose, kept across reloads: the rejoin then says what the room knows. */
function savedStatus(user) {
  const key = `rollcall-demo:${roomId}:${user}:status`;
  return {
    get: () => localStorage.getItem(key),
    set: (status) => localStorage.setItem(key, status),
  };
}

async function start(user) {
  if (!user || window.rollcallDemo) return;
  const status = savedStatus(user);
  if (status.get()) $("state").value = status.get();
  $("login").hidden = true;
  document.querySelector("main").hidden = false;
  $("me").textContent = `as ${user}`;
  const client = new RollcallClient(`ws://${location.host}/presence`, {
    token: () => token(user),
    reconnectMs: { first: 250, max: 2000 },
    typingIntervalMs: 1000,
  });
  window.rollcallDemo = { client, room: null };
  const showStatus = (status) => {
    $("status").textContent = status;
    $("status").className = `status-${status}`;
  };
  showStatus(client.status);
  client.on("status", (status) => {
    showStatus(status);
    log(`connection ${status}`);
    if (status !== "open") showStale(true);
  });
  client.on("error", (error) => log(`error: ${error.message}`));
  // A closed tab closes its socket anyway; saying so at once spares the gateway a wait.
  window.addEventListener("pagehide", () => client.close());

  const room = await client.join(roomId, { state: { status: $("state").value } });
  window.rollcallDemo.room = room;
  const present = room.roster.members.map((m) => m.user).join(", ");
  log(`you joined #${roomId} (present: ${present})`);
  render(room, user);
  room.on("change", (change) => {
    const text = describe(change);
    if (text) log(text);
    render(room, user);
  });
  // A snapshot on an open socket: the roster is live again.
  room.on("sync", () => {
    if (client.status === "open") showStale(false);
    render(room, user);
  });
  room.on("error", (error) => log(`the room refused you: ${error.message}`));

  $("state").addEventListener("change", () => {
    status.set($("state").value);
    room.setState({ status: $("state").value }).catch((error) => log(`error: ${error.message}`));
  });
  const message = $("message");
  message.addEventListener("input", () => (message.value ? room.typing() : room.stopTyping()));
  message.addEventListener("blur", () => room.stopTyping());
  $("compose").addEventListener("submit", (e) => {
    e.preventDefault();
    room.stopTyping();
    if (message.value) log(`you said “${message.value}” (rollcall carries presence, not messages)`);
    message.value = "";
  });
}
